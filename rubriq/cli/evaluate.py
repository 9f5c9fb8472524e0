"""``rubriq evaluate`` (sample a policy, the paper's metrics) and ``rubriq report``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from rubriq.cli.common import (
    CONTEXT,
    app,
    check,
    check_model,
    check_sampling,
    console,
    err,
    new_table,
    packaged,
    reported,
)
from rubriq.evaluation.settings import EndpointSettings
from rubriq.models.sampling import SamplingSpec
from rubriq.options import typer_options


@app.command(context_settings=CONTEXT)
@typer_options(EndpointSettings, into="remote")
@typer_options(SamplingSpec, into="sampling", defaults={"top_p": 0.95, "max_new_tokens": 512})
def evaluate(
    model: str = typer.Option(
        ...,
        metavar="MODEL",
        help="Model or adapter folder, hub id, 'embedded', or 'tiny'; with --endpoint, the name of the served model.",
    ),
    dataset: Path = typer.Option(Path("data/prompts"), metavar="DIR", help="Folder written by rubriq data build."),
    split: str = typer.Option("test", metavar="NAME", help="Dataset split (train, validation, test)."),
    max_prompts: int = typer.Option(0, metavar="N", help="Evaluate at most N prompts (0: all)."),
    eps: float = typer.Option(0.01, metavar="EPS", help="Correct: F_avg >= 1 - EPS."),
    baselines: str = typer.Option("", metavar="LIST", help="Compiler baselines on the same targets, e.g. qiskit,pyzx."),
    out: Path = typer.Option(
        Path("runs/eval"), metavar="DIR", help="records.jsonl, summary.json (and completions.jsonl with --endpoint)."
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue an --endpoint run that stopped: request only the completions missing from its cache.",
    ),
    remote: EndpointSettings = EndpointSettings(),
    sampling: SamplingSpec = SamplingSpec(),
) -> None:
    """Sample a policy on a split and compute the paper's metrics (docs/metrics.md). With --endpoint
    URL --model NAME, sample a model behind any OpenAI-compatible server instead (docs/endpoints.md)."""
    from rubriq.baselines.compilers import METHODS
    from rubriq.evaluation.evaluate import EvalRequest, run_evaluation
    from rubriq.tables import fmt

    check_sampling(sampling, "--samples")
    check(max_prompts >= 0, "--max-prompts", f"must be >= 0 (0: all), got {max_prompts}")
    check(0 < eps < 1, "--eps", f"must be in (0, 1), got {eps}")
    methods = tuple(m.strip() for m in baselines.split(",") if m.strip())
    unknown = [m for m in methods if m not in METHODS]
    check(not unknown, "--baselines", f"unknown method(s) {', '.join(unknown)}; known: {', '.join(METHODS)}")
    check(dataset.is_dir(), "--dataset", f"no folder {dataset} (write one with rubriq data build)")
    check(
        (dataset / f"{split}.jsonl").is_file(),
        "--split",
        f"no split {split!r} in {dataset} (has: "
        f"{', '.join(sorted(p.stem for p in dataset.glob('*.jsonl'))) or 'none'})",
    )
    with reported():
        remote.validate()
    check(not resume or remote.enabled, "--resume", "continues an --endpoint run (local sampling keeps no cache)")
    if not remote.enabled:
        check_model(model)
        _warn_style(model, dataset, split)
    req = EvalRequest(
        model=model, dataset=str(dataset), split=split, sampling=sampling, max_prompts=max_prompts, eps=eps
    )
    with reported():
        summary = run_evaluation(req, out, baselines=methods, endpoint=remote, resume=resume)
    s = summary["overall"]
    ks = sorted(int(k.removeprefix("pass@")) for k in s if k.startswith("pass@"))
    where = f" at {remote.endpoint}" if remote.enabled else ""
    table = new_table(
        f"{model}{where} on {dataset} [{split}] ({s['completions']} completions)",
        "metric",
        "value",
        keep_whole=("metric",),
    )
    for label, value in (
        ("parse rate", fmt(s["parse_rate"], 2)),
        ("mean F_avg", fmt(s["mean_fidelity"])),
        (f"correct (F_avg >= {1 - eps:g})", fmt(s["correct_rate"], 2)),
        ("C = T0/T over correct", fmt(s["compression"], 2)),
        ("MNTC", fmt(s["mntc"])),
        ("violation rate V", fmt(s["violation_rate"], 2)),
        *((f"pass@{k}", fmt(s.get(f"pass@{k}"), 2)) for k in ks),
        ("mean reward", fmt(s["mean_reward"])),
        ("wrong rewarded", fmt(s["wrong_rewarded_rate"], 2)),
        ("trivial", fmt(s["trivial_rate"], 2)),
    ):
        table.add_row(label, value)
    rewrite = _rewrite_metrics(out, dataset, split, eps, summary)
    if rewrite:
        for label, key in (
            ("correct, T < T0 (reduction)", "correct_reduction_rate"),
            ("correct copy of the input", "copy_rate"),
            ("wrong (not correct)", "wrong_rate"),
            ("gap to PyZX closed", "gap_closed"),
        ):
            lo, hi = rewrite["intervals"].get(key, (None, None))
            band = f" [{fmt(lo, 2)}, {fmt(hi, 2)}]" if lo is not None and hi is not None else ""
            table.add_row(label, fmt(rewrite[key], 2) + band)
    for label, value in usage_rows(summary.get("usage")):
        table.add_row(label, value)
    console.print(table)
    if rewrite:
        console.print(
            f"rewrite prompts: {rewrite['samples']} samples of {rewrite['prompts']} circuits; gap_closed over "
            f"{rewrite['gap_samples']} samples of circuits with a PyZX count (95% intervals over circuits)",
            markup=False,
        )
    if summary.get("baselines"):
        console.print(_baseline_table(summary["baselines"]))
    console.print(f"wrote {out / 'records.jsonl'} and {out / 'summary.json'}", markup=False)


def usage_rows(usage: dict | None) -> list[tuple[str, str]]:
    """The token and cost lines of an endpoint run's ``usage`` (none for a local run)."""
    if not usage:
        return []
    rows = [
        (
            "tokens (prompt + completion)",
            f"{usage['prompt_tokens']:,} + {usage['completion_tokens']:,} = {usage['total_tokens']:,}",
        ),
        (
            "requests (this run)",
            f"{usage['requests']} ({usage['retries']} retries); {usage['from_cache']} completions from the cache",
        ),
    ]
    if "cost_usd" in usage:
        rows.append(("cost (USD)", f"{usage['cost_usd']:.4f}"))
    return rows


def _rewrite_metrics(out: Path, dataset: Path, split: str, eps: float, summary: dict) -> dict | None:
    """Of the rewrite prompts' samples (a ``circuit`` target): correct-reduction, copy and wrong
    rates (rubriq.studies.analysis.rewrite_outcomes) and the gap to PyZX closed (rewrite_gap, over
    the prompts whose row records ``t_pyzx``), each with a 95% t-interval over prompts; added to
    summary.json as ``rewrite``.  None when the split has no rewrite prompt."""
    from collections import defaultdict

    from rubriq.data.prompts import load_split
    from rubriq.evaluation.metrics import mean_ci
    from rubriq.evaluation.sampling import load_records
    from rubriq.studies.analysis import family_of_spec, rewrite_gap, rewrite_outcomes

    records = [
        r for r in load_records(out / "records.jsonl") if family_of_spec(str(r.get("target") or "")) == "rewrite"
    ]
    if not records:
        return None
    t_pyzx = {r["id"]: int(r["t_pyzx"]) for r in load_split(dataset, split) if r.get("t_pyzx") is not None}
    outcomes, gap = rewrite_outcomes(records, eps), rewrite_gap(records, t_pyzx, eps)
    by_prompt: dict = defaultdict(list)
    for r in records:
        by_prompt[r.get("prompt_id")].append(r)
    intervals = {}
    for key in ("correct_reduction_rate", "copy_rate", "wrong_rate"):
        lo, _, hi = _ci(mean_ci(rewrite_outcomes(rs, eps)[key] for rs in by_prompt.values()))
        intervals[key] = (lo, hi)
    gaps = [rewrite_gap(rs, t_pyzx, eps)["gap_closed"] for p, rs in by_prompt.items() if p in t_pyzx]
    lo, _, hi = _ci(mean_ci(gaps))
    intervals["gap_closed"] = (lo, hi)
    rewrite = {
        **outcomes,
        "gap_closed": gap["gap_closed"],
        "reached_pyzx": gap["reached_pyzx"],
        "t_gap_pyzx": gap["t_gap_pyzx"],
        "gap_samples": gap["samples"],
        "prompts": len(by_prompt),
        "intervals": intervals,
    }
    summary["rewrite"] = rewrite
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return rewrite


def _ci(interval: tuple) -> tuple:
    """(low, mean, high) of ``mean_ci`` in that order, whatever order it returns them in."""
    mean, lo, hi = interval
    return lo, mean, hi


def _warn_style(model: str, dataset: Path, split: str) -> None:
    """Warn when the dataset's prompts are not in the style the policy was trained with."""
    from rubriq.data.prompts import prompt_style_of_rows
    from rubriq.evaluation.evaluate import prompt_style_of

    first = (dataset / f"{split}.jsonl").read_text(encoding="utf-8").split("\n", 1)[0]
    try:
        style = prompt_style_of_rows([json.loads(first)])
    except (ValueError, AttributeError):
        return
    trained = prompt_style_of(model)
    if Path(model).is_dir() and style != trained:
        err.print(
            f"warning: {dataset} has {style} prompts but {model} was trained on {trained} prompts (build the "
            f"dataset with prompt_style: {trained})",
            markup=False,
            soft_wrap=True,
        )


def _baseline_table(rows: list[dict]) -> Table:
    methods = sorted({r["method"] for r in rows})
    table = new_table(
        "compiler baselines on the same targets (T, verified)", "target", "T0", *methods, keep_whole=("target",)
    )
    by_circuit: dict[str, dict] = {}
    for r in rows:
        by_circuit.setdefault(r["circuit"], {"t0": r["t0"]})[r["method"]] = r
    for name, cells in by_circuit.items():
        table.add_row(
            name,
            str(cells["t0"]),
            *(
                ("-" if m not in cells else f"{cells[m]['t']}" + ("" if cells[m]["verified"] else " (unverified)"))
                for m in methods
            ),
        )
    return table


@app.command(context_settings=CONTEXT)
def report(
    inputs: list[Path] = typer.Argument(
        ..., metavar="DIR...", help="Training runs (metrics.jsonl) and/or evaluations (records.jsonl)."
    ),
    out: Path = typer.Option(Path("runs/report"), metavar="DIR", help="report.md, report.html, PNGs"),
    target_metric: str = typer.Option(
        "reward", metavar="NAME", help="Logged metric for time-to-target (e.g. compression)."
    ),
    target_value: float = typer.Option(
        0.5, metavar="X", help="Threshold of the time-to-target (paper: compression 3.3)."
    ),
    eps: float = typer.Option(0.01, metavar="EPS", help="Correct: F_avg >= 1 - EPS."),
) -> None:
    """Tables and plots from training runs and evaluations (markdown + self-contained HTML)."""
    from rubriq.evaluation.report import write_report

    missing = [str(p) for p in inputs if not p.is_dir()]
    check(not missing, "DIR", f"not a folder: {', '.join(missing)}")
    check(0 < eps < 1, "--eps", f"must be in (0, 1), got {eps}")
    with reported():
        md, page = write_report(inputs, out, target_metric, target_value, eps)
    console.print(f"wrote {md} and {page}", markup=False)


@app.command(context_settings=CONTEXT)
def leaderboard(
    config: Path = typer.Argument(Path("configs/leaderboard.yaml"), metavar="YAML", help="Leaderboard config."),
    table_only: bool = typer.Option(
        False, "--table-only", help="Rebuild the table from the folders present; evaluate nothing."
    ),
    force: bool = typer.Option(False, "--force", help="Evaluate every entry again, even one already evaluated."),
    only: list[str] = typer.Option([], "--only", metavar="NAME", help="Evaluate only this entry (repeatable)."),
) -> None:
    """Evaluate the config's entries (local policies, endpoints) on the same held-out prompts with the
    same k, run the compilers on the rewrite prompts, and write the table (results/leaderboard/)."""
    from rubriq.evaluation.leaderboard import run

    config = packaged(config)
    check(config.is_file(), "YAML", f"no such file: {config}")
    with reported():
        readme = run(config, table_only=table_only, force=force, only=tuple(only))
    console.print(f"wrote {readme}", markup=False)
