"""``rubriq report RUN_OR_EVAL_DIR... --out DIR``: markdown + self-contained HTML with PNG plots.

A *training run* is a folder with ``metrics.jsonl`` (or ``train/metrics.jsonl``, as the
quickstart writes); an *evaluation* is a folder with ``records.jsonl`` (``rubriq evaluate``,
or ``eval_*.jsonl`` from the quickstart).  For training runs: learning curves, time-to-target
(first logged step whose metric reaches the threshold; the paper uses C >= 3.3), compute cost
(device-hours = wall time x devices, per phase, from ``train_runtime`` and ``run_info.json``),
variant bars and, for runs named ``..._sens_<dim>_<plus|minus>NNN``, the weight-sensitivity
table.  For evaluations: the metrics of docs/metrics.md, the F_avg-vs-compression scatter and
the residual error per T0 bucket (Table VI).  The report is built as a list of blocks rendered
twice, to markdown and to HTML (images embedded as base64), so both always say the same.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rubriq.evaluation.metrics import DEFAULT_EPS
from rubriq.evaluation.plots import _pyplot, learning_curves, legend_outside, plain_log_axis, read_metrics, save
from rubriq.evaluation.records import RecordLike
from rubriq.evaluator.result import is_correct
from rubriq.rubric.tcount import compression
from rubriq.tables import fmt, format_ci, markdown_table  # noqa: F401 (format_ci: re-exported)


# -- loading ------------------------------------------------------------------------------------
def find_metrics(folder: Path) -> Path | None:
    """The run's ``metrics.jsonl`` (in the folder or its ``train/``), or None."""
    for p in (folder / "metrics.jsonl", folder / "train" / "metrics.jsonl"):
        if p.is_file():
            return p
    return None


PHASE_ORDER = ("before sft", "after sft", "after grpo", "after ppo")
"""The quickstart's evaluation files, in the order they are made."""


def find_records(folder: Path) -> list[tuple[str, Path]]:
    """The evaluations in ``folder``, in time order: ``records.jsonl``, or the quickstart's
    ``eval_<phase>.jsonl`` ordered by phase (before SFT, after SFT, after GRPO), others by
    modification time."""
    if (folder / "records.jsonl").is_file():
        return [(folder.name, folder / "records.jsonl")]

    def order(p: Path) -> tuple:
        phase = p.stem.removeprefix("eval_").replace("_", " ").lower()
        return (PHASE_ORDER.index(phase) if phase in PHASE_ORDER else len(PHASE_ORDER), p.stat().st_mtime, p.name)

    return [
        (f"{folder.name}: {p.stem.removeprefix('eval_').replace('_', ' ')}", p)
        for p in sorted(folder.glob("eval_*.jsonl"), key=order)
    ]


def run_phases(metrics_path: Path) -> dict[str, float]:
    """Wall seconds per phase from the trainer's summary lines (``train_runtime``)."""
    out: dict[str, float] = {}
    for line in metrics_path.read_text().splitlines():
        row = json.loads(line)
        if "train_runtime" in row:
            out[row.get("phase", "grpo")] = out.get(row.get("phase", "grpo"), 0.0) + float(row["train_runtime"])
    if "ppo" not in out:
        ppo = [r for r in read_metrics(metrics_path, "ppo") if "step_time" in r]
        if ppo:
            out["ppo"] = sum(r["step_time"] for r in ppo)
    return out


def time_to_target(metrics: list[dict], key: str, threshold: float) -> dict[str, Any] | None:
    """First logged step (and epoch) whose ``key`` is >= ``threshold``; None if never."""
    for r in metrics:
        v = r.get(key)
        if v is not None and v >= threshold:
            return {"step": r.get("step"), "epoch": r.get("epoch")}
    return None


def _last_mean(metrics: list[dict], key: str, n: int = 5) -> float | None:
    vals = [r[key] for r in metrics if r.get(key) is not None][-n:]
    return statistics.fmean(vals) if vals else None


def training_summary(folder: Path, key: str, threshold: float) -> dict[str, Any]:
    """The summary of one training run folder (its metrics.jsonl must exist)."""
    path = find_metrics(folder)
    if path is None:
        raise ValueError(f"{folder}: no metrics.jsonl (not a training run)")
    phase = "ppo" if read_metrics(path, "ppo") else "grpo"
    metrics = read_metrics(path, phase)
    info = {}
    if (path.parent / "run_info.json").is_file():
        info = json.loads((path.parent / "run_info.json").read_text())
    devices = int(info.get("devices", 1))
    phases = run_phases(path)
    return {
        "name": folder.name,
        "algorithm": phase,
        "steps": len([m for m in metrics if "reward" in m]),
        "final_reward": _last_mean(metrics, "reward"),
        "final_compression": _last_mean(metrics, "compression"),
        "final_correct": _last_mean(metrics, "correct_rate"),
        "final_violation": _last_mean(metrics, "violation_rate"),
        "target": time_to_target(metrics, key, threshold),
        "devices": devices,
        "device_hours": {k: v * devices / 3600 for k, v in phases.items()},
        "metrics": metrics,
    }


# -- plots --------------------------------------------------------------------------------------
def scatter_points(records: Sequence[RecordLike], eps: float = DEFAULT_EPS) -> dict[tuple[float, float, bool], int]:
    """(T0/T(c), F_avg, correct) -> how many parsed completions sit on that point."""
    from collections import Counter

    pts: Counter = Counter()
    for r in records:
        res = r.get("result", {})
        c = compression(r.get("t0"), res.get("t_count"))
        if res.get("parsed") and res.get("average_fidelity") is not None and c is not None and c != math.inf:
            pts[
                (
                    round(c, 9),
                    round(res["average_fidelity"], 9),
                    is_correct(res, 1 - eps),
                )
            ] += 1
    return dict(pts)


def scatter_fidelity_compression(records: Sequence[RecordLike], out: Path, eps: float = DEFAULT_EPS) -> Path | None:
    """F_avg vs T0/T(c) per parsed completion; correct ones (F_avg >= 1 - eps) highlighted;
    completions on the same point drawn once, larger, with their count."""
    pts = scatter_points(records, eps)
    if not pts:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for ok, color, label in ((True, "tab:green", f"correct (F_avg >= {1 - eps:g})"), (False, "tab:red", "incorrect")):
        sel = [(x, y, n) for (x, y, c), n in pts.items() if c == ok]
        if sel:
            xs, ys, ns = zip(*sel, strict=True)
            ax.scatter(xs, ys, c=color, label=label, alpha=0.6, s=[25 + 12 * (n - 1) for n in ns])
            for x, y, n in sel:
                if n > 1:
                    ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
    ax.axhline(1 - eps, color="gray", linestyle=":", linewidth=1)
    ax.axvline(1.0, color="gray", linestyle=":", linewidth=1)
    ax.set_xscale("log")
    plain_log_axis(ax, "x")
    ax.set(
        xlabel="T0 / T(c) (> 1: fewer T gates than the reference; log scale)",
        ylabel="average gate fidelity F_avg",
        title=f"Fidelity vs T-count compression ({sum(pts.values())} completions; numbers: completions on a point)",
    )
    ax.title.set_fontsize(9)
    legend_outside(ax)
    return save(fig, out)


def variant_bars(runs: list[dict], out: Path) -> Path:
    """Bars per run: compression, violation rate and steps to target, values on the bars."""
    plt = _pyplot()
    names = [r["name"] for r in runs]
    panels = (
        ("final_compression", "compression C (last 5 logs)"),
        ("final_violation", "violation rate V"),
        ("steps_to_target", "steps to target"),
    )
    fig, axes = plt.subplots(1, 3, figsize=(max(9, 1.2 * len(names) * 3), 3.8))
    for ax, (key, label) in zip(axes, panels, strict=True):
        vals = [((r["target"] or {}).get("step") if key == "steps_to_target" else r.get(key)) for r in runs]
        bars = ax.bar(range(len(names)), [v if v is not None else 0 for v in vals], color="tab:blue")
        ax.bar_label(
            bars,
            labels=["n/a" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v)) for v in vals],
            fontsize=7,
            padding=2,
        )
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set(ylabel=label, title=label)
        ax.grid(axis="y", alpha=0.3)
    return save(fig, out)


# -- report blocks ------------------------------------------------------------------------------
def bucket_table(records: Sequence[RecordLike], eps: float) -> list[list[str]]:
    """Table VI: residual error 1 - F_avg and correctness per T0 bucket."""
    rows = []
    groups: dict[str, list[RecordLike]] = {}
    for r in records:
        groups.setdefault(str(r.get("bucket")), []).append(r)
    for bucket, recs in sorted(groups.items()):
        fids = [r["result"]["average_fidelity"] for r in recs if r["result"].get("average_fidelity") is not None]
        rows.append(
            [
                bucket,
                str(len(recs)),
                fmt(statistics.fmean(1 - f for f in fids) if fids else None, 4),
                fmt(sum(is_correct(r["result"], 1 - eps) for r in recs) / len(recs), 2),
            ]
        )
    return rows


def build(
    inputs: list[Path], out: Path, key: str = "reward", threshold: float = 0.5, eps: float = DEFAULT_EPS
) -> list[tuple]:
    """The report as blocks (headings, paragraphs, tables, images) for training runs and evaluations."""
    from rubriq.evaluation.evaluate import summaries
    from rubriq.evaluation.sampling import load_records

    out.mkdir(parents=True, exist_ok=True)
    blocks: list[tuple] = [
        ("h1", "RubriQ report"),
        (
            "p",
            "Inputs: " + ", ".join(str(p) for p in inputs) + f". Correct: F_avg >= {1 - eps:g}; "
            "C = T0/T(c) over correct circuits only (docs/metrics.md).",
        ),
    ]
    runs = [training_summary(p, key, threshold) for p in inputs if find_metrics(p)]
    if runs:
        blocks.append(("h2", "Training runs"))
        blocks.append(
            (
                "table",
                [
                    "run",
                    "algorithm",
                    "steps",
                    "reward (last 5)",
                    "C (last 5)",
                    "correct (last 5)",
                    "V (last 5)",
                    f"first step with {key} >= {threshold:g}",
                    "device-hours by phase",
                ],
                [
                    [
                        r["name"],
                        r["algorithm"],
                        str(r["steps"]),
                        fmt(r["final_reward"]),
                        fmt(r["final_compression"], 2),
                        fmt(r["final_correct"], 2),
                        fmt(r["final_violation"], 2),
                        fmt((r["target"] or {}).get("step"))
                        + (f" (epoch {r['target']['epoch']:.2f})" if r["target"] and r["target"].get("epoch") else ""),
                        ", ".join(f"{k} {v:.4f}" for k, v in r["device_hours"].items()) or "-",
                    ]
                    for r in runs
                ],
            )
        )
        for r in runs:
            if any("reward" in m for m in r["metrics"]):
                png = learning_curves(
                    r["metrics"], out / f"curves_{_slug(r['name'])}.png", title=f"{r['name']}: learning curves"
                )
                blocks.append(("img", png.name, f"learning curves of {r['name']}"))
        if len(runs) > 1:
            blocks.append(("img", variant_bars(runs, out / "variants.png").name, "variants"))
        sens = [r for r in runs if re.search(r"sens_([a-z]+)_(plus|minus)(\d+)$", r["name"])]
        if sens:
            rows = []
            for r in sens:
                match = re.search(r"sens_([a-z]+)_(plus|minus)(\d+)$", r["name"])
                assert match is not None  # sens holds only the runs that match
                dim, sign, step = match.groups()
                rows.append(
                    [
                        dim,
                        ("+" if sign == "plus" else "-") + f"{int(step) / 100:.2f}",
                        fmt(r["final_reward"]),
                        fmt(r["final_compression"], 2),
                        fmt(r["final_correct"], 2),
                    ]
                )
            blocks += [
                ("h2", "Weight sensitivity (Table IV)"),
                ("table", ["weight", "change", "reward", "C", "correct"], sorted(rows)),
            ]
    evals = [(name, path) for p in inputs for name, path in find_records(p)]
    if evals:
        blocks.append(("h2", "Evaluations"))
        table = []
        loaded = {name: load_records(path) for name, path in evals}
        k = max((int(r.get("sample", 0)) + 1 for recs in loaded.values() for r in recs), default=1)
        for name, records in loaded.items():
            s = summaries(records, eps, k)["overall"]
            table.append(
                [
                    name,
                    str(s["completions"]),
                    fmt(s["parse_rate"], 2),
                    fmt(s["mean_fidelity"]),
                    fmt(s["correct_rate"], 2),
                    fmt(s["compression"], 2),
                    fmt(s["mntc"], 3),
                    fmt(s["violation_rate"], 2),
                    fmt(s.get("pass@1"), 2),
                    fmt(s.get(f"pass@{k}"), 2),
                    fmt(s["mean_reward"]),
                    fmt(s["wrong_rewarded_rate"], 2),
                ]
            )
        blocks.append(
            (
                "table",
                [
                    "evaluation",
                    "completions",
                    "parse rate",
                    "mean F_avg",
                    "correct",
                    "C (correct only)",
                    "MNTC",
                    "V",
                    "pass@1",
                    f"pass@{k}",
                    "mean reward",
                    "wrong rewarded",
                ],
                table,
            )
        )
        drawn: dict[tuple, str] = {}
        for name, records in loaded.items():
            blocks += [
                ("h3", f"{name}: residual error by T0 bucket (Table VI)"),
                ("table", ["T0 bucket", "completions", "mean 1 - F_avg", "correct"], bucket_table(records, eps)),
            ]
            points = tuple(sorted(scatter_points(records, eps).items()))
            if points and points in drawn:
                blocks.append(("p", f"F_avg vs compression: the same points as {drawn[points]} (not drawn again)."))
                continue
            scatter = scatter_fidelity_compression(records, out / f"scatter_{_slug(name)}.png", eps)
            if scatter:
                drawn[points] = name
                blocks.append(("img", scatter.name, f"F_avg vs compression, {name}"))
        for folder in inputs:
            summary_path = folder / "summary.json"
            if not summary_path.is_file():
                continue
            try:
                baseline = json.loads(summary_path.read_text(encoding="utf-8")).get("baselines") or []
            except ValueError:
                continue
            if baseline:
                blocks += [
                    ("h3", f"{folder.name}: compiler baselines on the same targets"),
                    (
                        "table",
                        ["target", "T0", "method", "T", "verified", "C"],
                        [
                            [
                                b["circuit"],
                                str(b["t0"]),
                                b["method"],
                                fmt(b["t"]),
                                str(b["verified"]),
                                fmt(b.get("compression"), 2),
                            ]
                            for b in baseline
                        ],
                    ),
                ]
    if not runs and not evals:
        raise ValueError(
            "no training run (metrics.jsonl) or evaluation (records.jsonl) in " + ", ".join(map(str, inputs))
        )
    return blocks


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_")


def to_markdown(blocks: list[tuple]) -> str:
    """The blocks as markdown (images by file name)."""
    lines = []
    for b in blocks:
        if b[0] in ("h1", "h2", "h3"):
            lines += ["#" * int(b[0][1]) + " " + b[1], ""]
        elif b[0] == "p":
            lines += [b[1], ""]
        elif b[0] == "table":
            lines += markdown_table(b[1], b[2]) + [""]
        elif b[0] == "img":
            lines += [f"![{b[2]}]({b[1]})", ""]
    return "\n".join(lines)


def to_html(blocks: list[tuple], folder: Path) -> str:
    """The blocks as one self-contained HTML page (images embedded as base64)."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>RubriQ report</title><style>"
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f4f4f4}"
        "img{max-width:100%}</style></head><body>"
    ]
    for b in blocks:
        if b[0] in ("h1", "h2", "h3"):
            parts.append(f"<{b[0]}>{html.escape(b[1])}</{b[0]}>")
        elif b[0] == "p":
            parts.append(f"<p>{html.escape(b[1])}</p>")
        elif b[0] == "table":
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b[1])
            body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in b[2])
            parts.append(f"<table><tr>{head}</tr>{body}</table>")
        elif b[0] == "img":
            data = base64.b64encode((folder / b[1]).read_bytes()).decode()
            parts.append(f"<img alt='{html.escape(b[2])}' src='data:image/png;base64,{data}'>")
    return "".join(parts) + "</body></html>"


def write_report(
    inputs: Sequence[str | Path], out: str | Path, key: str = "reward", threshold: float = 0.5, eps: float = DEFAULT_EPS
) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` (and the PNGs) for ``inputs`` into ``out``; return both paths."""
    out = Path(out)
    blocks = build([Path(p) for p in inputs], out, key, threshold, eps)
    md, page = out / "report.md", out / "report.html"
    md.write_text(to_markdown(blocks))
    page.write_text(to_html(blocks, out))
    return md, page
