"""Figures of the convergence study (matplotlib, Agg backend)."""

from __future__ import annotations

import json
from pathlib import Path

from rubriq.evaluation.plots import _pyplot, save
from rubriq.studies.aggregate import series
from rubriq.studies.layout import finished_arm_seeds
from rubriq.studies.settings import REWRITE_OUTCOMES

PANELS = (
    ("correct_rate", "held-out correct rate (F_avg >= 0.99)"),
    ("mean_reward", "held-out mean reward (rubric)"),
    ("pass@k", "held-out pass@k"),
    ("wrong_rewarded_rate", "held-out wrong-rewarded rate"),
)
GAP_PANEL = ("gap_closed", "held-out fraction of the T gap to PyZX closed (0 if wrong)")


REWRITE_PANELS = (
    ("rewrite_copy_rate", "correct and the input verbatim (copy)"),
    ("rewrite_reduction_rate", "correct with fewer T than the input"),
    ("rewrite_wrong_rate", "not correct (wrong)"),
)


def _bands(ax, agg: dict, metric: str, split: str) -> None:
    """One line per arm (mean over seeds) with its 95% interval as a band."""
    for name, arm in agg["arms"].items():
        per = series(arm, split)
        steps = sorted(per)
        mean = [per[s][metric][0] for s in steps]
        pts = [(s, m, per[s][metric]) for s, m in zip(steps, mean, strict=True) if m is not None]
        if not pts:
            continue
        xs = [p[0] for p in pts]
        (line,) = ax.plot(xs, [p[1] for p in pts], marker="o", label=f"{name} ({len(arm['seeds'])} seeds)")
        lo = [max(0.0, p[2][1]) for p in pts]
        hi = [min(1.0, p[2][2]) for p in pts]
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)


def _where(split: str) -> str:
    return {"test": "held-out", "train": "training-prompt"}.get(split, f"held-out tier {split}")


def _has(agg: dict, split: str, metrics) -> bool:
    """Whether any arm has a value of one of ``metrics`` on ``split``."""
    return any(
        step.get(m, (None,))[0] is not None
        for arm in agg["arms"].values()
        for step in series(arm, split).values()
        for m in metrics
    )


def curves(agg: dict, out: Path, study, split: str = "test") -> Path:
    """Metrics per evaluated step: mean over seeds with the 95% interval as a band, on ``split``:
    ``test`` (held-out), ``train`` (the fixed sample of training prompts) or a further held-out
    tier.  With rewrite prompts in the set, the gap-closed panel replaces pass@k."""
    plt = _pyplot()
    where = _where(split)
    has_gap = _has(agg, split, ("gap_closed",))
    panels = [p for p in PANELS if not (has_gap and p[0] == "pass@k")]
    if has_gap:
        panels.insert(2, GAP_PANEL)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (metric, label) in zip(axes.flat, panels, strict=False):
        label = label.replace("held-out", where)
        _bands(ax, agg, metric, split)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(label.replace(f"{where} ", ""))
        ax.set_title(label.replace("pass@k", f"pass@{study.sampling.samples}"), fontsize=10)
        ax.set_ylim(-0.02, 1.02)
    axes.flat[0].legend(fontsize=8, loc="best")
    fig.suptitle(
        f"Convergence study: {where} targets, k = {study.sampling.samples} samples per prompt, mean and 95% interval over seeds",
        fontsize=11,
    )
    return save(fig, out)


def rewrite_outcomes(agg: dict, out: Path, study) -> Path | None:
    """What became of the rewrite samples per evaluated step, one row of panels per prompt set
    that has them (held-out, each further tier, the training prompts): copied, reduced, wrong
    (mean over seeds, 95% band).  None (nothing drawn) without rewrite samples."""
    splits = [s for s in (*study.tiers(), "train") if _has(agg, s, REWRITE_OUTCOMES)]
    if not splits:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(len(splits), 3, figsize=(14, 3.8 * len(splits)), squeeze=False)
    for row, split in zip(axes, splits, strict=True):
        for ax, (metric, label) in zip(row, REWRITE_PANELS, strict=True):
            _bands(ax, agg, metric, split)
            ax.set_xlabel("GRPO step")
            ax.set_title(f"{_where(split)}: {label}", fontsize=10)
            ax.set_ylim(-0.02, 1.02)
    axes[0][0].legend(fontsize=8, loc="best")
    fig.suptitle(
        f"Rewrite samples (a circuit to improve): fraction copied, reduced, wrong; k = {study.sampling.samples} samples "
        "per prompt, mean and 95% interval over seeds",
        fontsize=11,
    )
    return save(fig, out)


def training(out_dir: Path, study, out: Path) -> Path:
    """Training reward, reward std within groups, frac_reward_zero_std and entropy per step,
    averaged over the finished seeds (TRL's logged values)."""
    plt = _pyplot()
    keys = (
        ("reward", "training reward (arm's own)"),
        ("reward_std", "reward std within groups"),
        ("frac_reward_zero_std", "fraction of groups with zero reward std"),
        ("entropy", "token entropy"),
    )
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for name in study.arms:
        per_step: dict[int, dict[str, list[float]]] = {}
        for _, arm_dir in finished_arm_seeds(Path(out_dir), study, name):
            path = arm_dir / "metrics.jsonl"
            if not path.is_file():
                continue
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line) if line.strip() else {}
                if "step" not in row or "train_runtime" in row:
                    continue
                for key, _ in keys:
                    if isinstance(row.get(key), (int, float)):
                        per_step.setdefault(row["step"], {}).setdefault(key, []).append(row[key])
        if not per_step:
            continue
        steps = sorted(per_step)
        for ax, (key, label) in zip(axes.flat, keys, strict=False):
            pts = [(s, sum(per_step[s][key]) / len(per_step[s][key])) for s in steps if per_step[s].get(key)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], label=name)
            ax.set_title(label, fontsize=10)
            ax.set_xlabel("GRPO step")
    if axes.flat[0].lines:
        axes.flat[0].legend(fontsize=8)
    fig.suptitle("Training signal per step (mean over seeds)", fontsize=11)
    return save(fig, out)
