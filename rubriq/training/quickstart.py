"""``rubriq quickstart``: the whole pipeline on a laptop CPU, end to end, in minutes.

Top to bottom (``configs/quickstart_cpu.yaml``): prepare the embedded SmolLM2-135M-Instruct;
build a small prompt dataset with a held-out split (by target); evaluate the base model on the
held-out prompts; SFT warm-start on the training references; evaluate; a few GRPO steps with the
rubric reward; evaluate; write ``report.md``, ``reward_curve.png``, ``phases.png``, the scored
completions of each phase (JSONL) and ``summary.json`` under the output folder.

Every evaluation **samples** ``evaluation.samples`` completions per held-out prompt at
``evaluation.temperature`` (the training temperature): the report gives, per phase, the
correct rate and mean reward with 95% t-intervals over prompts, pass@k, and the paired
per-prompt differences between phases, and one sentence on the held-out change after GRPO (per
metric: the change with its interval, or "no measurable change" when the interval contains 0);
the training reward on its own prompts is plotted per step (``reward_curve.png``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubriq.evaluation.records import ScoredRecord

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "quickstart_cpu.yaml"
"""Shipped in the package (rubriq/configs, a link to the repository's configs/ in a checkout)."""
PHASES = ("before SFT", "after SFT", "after GRPO")


def _say(console, message: str) -> None:
    if console is not None:
        console.print(message)


def evaluate_policy(settings, model, tokenizer, rows: list[dict], label: str) -> list[ScoredRecord]:
    """Sample the policy on the held-out rows with the ``evaluation`` settings and score every completion."""
    from rubriq.evaluation.sampling import sample, score

    records = sample(model, tokenizer, rows, settings.evaluation, description=f"evaluating {label}")
    return score(records, settings.rubric)


def step_breakdown(metrics: list[dict]) -> dict[str, float]:
    """Mean seconds per GRPO step: total and its generation / reward / update parts."""
    keys = {
        "step": "step_time",
        "generation": "timing/generation_s",
        "reward": "timing/reward_s",
        "update": "timing/update_s",
        "tokens_per_s": "tokens_per_s",
        "completion_tokens": "completions/mean_length",
    }
    out = {}
    for name, key in keys.items():
        values = [m[key] for m in metrics if m.get(key) is not None]
        if values:
            out[name] = statistics.fmean(values)
    return out


def run(
    config: str | Path = DEFAULT_CONFIG,
    out_dir: str | Path = "runs/quickstart",
    max_steps: int | None = None,
    console: Any = None,
) -> Path:
    """Run the quickstart; return the path of the report."""
    from rubriq.evaluation.metrics import paired_prompt_difference, per_prompt_ci, summarize
    from rubriq.evaluation.plots import learning_curves, phase_bars, read_metrics
    from rubriq.evaluation.sampling import save_records
    from rubriq.models import EMBEDDED, prepare_embedded
    from rubriq.training.config import TrainSettings
    from rubriq.training.train_rubriq import build, load_base, load_rows, save_final, warm_start, write_run_info

    out = Path(out_dir)
    settings = TrainSettings.from_yaml(config)
    settings = dataclasses.replace(
        settings, output_dir=str(out / "train"), data=dataclasses.replace(settings.data, dataset=str(out / "data"))
    )
    if not settings.sft.enabled:
        raise ValueError(f"{config}: the quickstart needs sft.enabled: true")
    (out / "train" / "metrics.jsonl").unlink(missing_ok=True)
    write_run_info(settings)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    if settings.model.name_or_path == EMBEDDED and not settings.model.tiny:
        _say(console, "[bold]1/6[/] preparing the embedded SmolLM2-135M-Instruct (once; cached afterwards)")
        prepare_embedded()
    train_rows = load_rows(settings)
    eval_rows = load_rows(settings, settings.evaluation.split)
    tokenizer, model = load_base(settings)
    seconds["prepare"] = time.perf_counter() - t
    _say(console, f"    {len(train_rows)} training prompts, {len(eval_rows)} held-out prompts")

    summaries: dict[str, dict] = {}

    records_of: dict[str, list[ScoredRecord]] = {}
    k = settings.evaluation.sampling.samples
    eps = 1 - settings.rubric.fidelity.correct_threshold

    def evaluate(label: str, step: str) -> None:
        _say(console, f"[bold]{step}[/] evaluating {label} on the held-out prompts ({k} samples each)")
        start = time.perf_counter()
        records = records_of[label] = evaluate_policy(settings, model, tokenizer, eval_rows, label)
        save_records(records, out / f"eval_{label.replace(' ', '_').lower()}.jsonl")
        summaries[label] = summarize(records, eps, ks=tuple(sorted({1, k})))
        summaries[label]["correct_ci"] = per_prompt_ci(records, "correct", eps)
        summaries[label]["reward_ci"] = per_prompt_ci(records, "reward", eps)
        seconds[f"eval {label}"] = time.perf_counter() - start
        s = summaries[label]
        _say(
            console,
            f"    parse rate {s['parse_rate']:.2f}, mean reward {s['mean_reward']:.3f}, "
            f"correct (F_avg >= {settings.rubric.fidelity.correct_threshold}): {s['correct_rate']:.2f}",
        )

    evaluate(PHASES[0], "2/6")
    _say(console, "[bold]3/6[/] SFT warm-start on the training references")
    start = time.perf_counter()
    model = warm_start(settings, tokenizer, model)
    seconds["sft"] = time.perf_counter() - start
    evaluate(PHASES[1], "4/6")
    _say(console, "[bold]5/6[/] GRPO with the rubric reward")
    start = time.perf_counter()
    trainer = build(settings, max_steps=max_steps, policy=(tokenizer, model))
    trainer.train()
    save_final(trainer, settings, out / "train" / "final")
    model = trainer.model
    seconds["grpo"] = time.perf_counter() - start
    evaluate(PHASES[2], "6/6")

    metrics = read_metrics(out / "train" / "metrics.jsonl", phase="grpo")
    breakdown = step_breakdown(metrics)
    learning_curves(metrics, out / "reward_curve.png", title="Quickstart GRPO (embedded 135M, CPU)")
    phase_bars(
        summaries,
        out / "phases.png",
        title=f"Held-out prompts ({len(eval_rows)}), {k} samples each at T = {settings.evaluation.sampling.temperature}",
    )
    differences = {
        f"{b} -> {a}": {
            m: paired_prompt_difference(records_of[b], records_of[a], m, eps) for m in ("correct", "reward")
        }
        for b, a in itertools.pairwise(PHASES)
    }
    summary = {
        "config": str(config),
        "summaries": summaries,
        "differences": differences,
        "seconds": seconds,
        "grpo_step": breakdown,
        "train_prompts": len(train_rows),
        "eval_prompts": len(eval_rows),
        "grpo_steps": len(metrics),
        "samples": k,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    report = write_report(out, summary, settings)
    _say(console, f"[green]report:[/] {report}")
    return report


def write_report(out: Path, summary: dict, settings) -> Path:
    """The quickstart's ``report.md``: per-phase metrics with intervals, paired differences, step time."""
    from rubriq.tables import fmt, format_ci, markdown_table

    k, e = summary.get("samples", 1), settings.evaluation
    threshold = settings.rubric.fidelity.correct_threshold
    lines = [
        "# RubriQ quickstart",
        "",
        f"Model: {settings.model.name_or_path}; {summary['train_prompts']} training prompts, "
        f"{summary['eval_prompts']} held-out prompts (targets never trained on), {k} completions sampled per "
        f"prompt at temperature {e.sampling.temperature} ({e.sampling.max_new_tokens} new tokens at most); "
        f"{summary['grpo_steps']} GRPO steps with N = {settings.grpo.sampling.samples} completions per "
        "prompt. Intervals: 95% t-intervals over prompts.",
        "",
    ]
    lines += markdown_table(
        [
            "phase",
            "parse rate",
            "mean reward",
            f"correct (F_avg >= {threshold})",
            f"pass@{k}",
            "mean F_avg",
            "C over correct",
            "mean T",
            "wrong rewarded",
        ],
        [
            [
                phase,
                fmt(s["parse_rate"], 2),
                format_ci(s["reward_ci"]),
                format_ci(s["correct_ci"], 2),
                fmt(s.get(f"pass@{k}"), 2),
                fmt(s["mean_fidelity"]),
                fmt(s["compression"], 2),
                fmt(s["mean_t_count"], 1),
                fmt(s["wrong_rewarded_rate"], 2),
            ]
            for phase, s in summary["summaries"].items()
        ],
    )
    lines += ["", "Paired per-prompt differences (later phase minus earlier phase):", ""]
    lines += markdown_table(
        ["change", "correct rate", "mean reward"],
        [[change, format_ci(d["correct"], 2), format_ci(d["reward"])] for change, d in summary["differences"].items()],
    )
    grpo = summary["differences"].get(f"{PHASES[1]} -> {PHASES[2]}", {})
    lines += ["", held_out_verdict(grpo, summary["grpo_steps"])]
    b = summary["grpo_step"]
    lines += [
        "",
        "C = T0 / T(c) over correct circuits only (docs/metrics.md).",
        "",
        "## GRPO step time (seconds, mean over steps)",
        "",
    ]
    lines += markdown_table(
        ["step", "generation", "reward", "update", "completion tokens", "tokens/s"],
        [
            [
                fmt(b.get("step"), 1),
                fmt(b.get("generation"), 1),
                fmt(b.get("reward"), 2),
                fmt(b.get("update"), 1),
                fmt(b.get("completion_tokens"), 0),
                fmt(b.get("tokens_per_s"), 1),
            ]
        ],
    )
    lines += ["", "## Wall time per phase (seconds)", ""]
    lines += markdown_table(list(summary["seconds"]), [[f"{v:.0f}" for v in summary["seconds"].values()]])
    lines += [
        "",
        "Training reward on the training prompts, per GRPO step (left; the band is the spread within the step's "
        "groups) and its five dimensions (right):",
        "",
        "![reward curve](reward_curve.png)",
        "",
        "![phases](phases.png)",
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def held_out_verdict(change: dict, steps: int) -> str:
    """One sentence on the held-out change after GRPO: for the correct rate and the mean reward,
    "no measurable effect" when the 95% interval of the paired change contains 0, else the change.

    >>> held_out_verdict({"correct": (0.03, -0.04, 0.11), "reward": (0.087, 0.025, 0.149)}, 12)
    'After 12 GRPO steps, held-out: correct rate no measurable change (0.03 [-0.04, 0.11]: the 95% interval contains 0); mean reward +0.087 [0.025, 0.149]. The learning study (results/studies/learning/, `rubriq study convergence configs/studies/learning_cpu.yaml`) measures GRPO over more steps, seeds and arms.'
    """
    from rubriq.tables import format_ci

    parts = []
    for name, key, digits in (("correct rate", "correct", 2), ("mean reward", "reward", 3)):
        value = change.get(key)
        if not value or value[1] is None or value[2] is None:
            parts.append(f"{name} not measured")
            continue
        mean, lo, hi = value
        if lo <= 0 <= hi:
            parts.append(f"{name} no measurable change ({format_ci(value, digits)}: the 95% interval contains 0)")
        else:
            parts.append(f"{name} {mean:+.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]")
    return (
        f"After {steps} GRPO steps, held-out: {'; '.join(parts)}. The learning study (results/studies/learning/, "
        "`rubriq study convergence configs/studies/learning_cpu.yaml`) measures GRPO over more steps, seeds and arms."
    )
