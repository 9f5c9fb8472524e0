"""Figures of the convergence study (matplotlib, Agg backend)."""

from __future__ import annotations

import json
from pathlib import Path

from rubriq.evaluation.plots import _pyplot, save
from rubriq.studies.layout import finished_arm_seeds

PANELS = (
    ("correct_rate", "held-out correct rate (F_avg >= 0.99)"),
    ("mean_reward", "held-out mean reward (rubric)"),
    ("pass@k", "held-out pass@k"),
    ("wrong_rewarded_rate", "held-out wrong-rewarded rate"),
)
GAP_PANEL = ("gap_closed", "held-out fraction of the T gap to PyZX closed (0 if wrong)")


def curves(agg: dict, out: Path, study, key: str = "per_step") -> Path:
    """Metrics per evaluated step: mean over seeds with the 95% interval as a band; ``key``
    ``per_step`` (held-out) or ``train_per_step`` (the fixed sample of training prompts).  With
    rewrite prompts in the set, the gap-closed panel replaces pass@k."""
    plt = _pyplot()
    where = "held-out" if key == "per_step" else "training-prompt"
    has_gap = any(
        step.get("gap_closed", (None,))[0] is not None for arm in agg["arms"].values() for step in arm[key].values()
    )
    panels = [p for p in PANELS if not (has_gap and p[0] == "pass@k")]
    if has_gap:
        panels.insert(2, GAP_PANEL)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (metric, label) in zip(axes.flat, panels, strict=False):
        label = label.replace("held-out", where)
        for name, arm in agg["arms"].items():
            steps = sorted(arm[key])
            mean = [arm[key][s][metric][0] for s in steps]
            pts = [(s, m, arm[key][s][metric]) for s, m in zip(steps, mean, strict=True) if m is not None]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            (line,) = ax.plot(xs, [p[1] for p in pts], marker="o", label=f"{name} ({len(arm['seeds'])} seeds)")
            lo = [max(0.0, p[2][1]) for p in pts]
            hi = [min(1.0, p[2][2]) for p in pts]
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.15)
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(label.replace(f"{where} ", ""))
        ax.set_title(label.replace("pass@k", f"pass@{study.samples}"), fontsize=10)
        ax.set_ylim(-0.02, 1.02)
    axes.flat[0].legend(fontsize=8, loc="best")
    fig.suptitle(
        f"Convergence study: {where} targets, k = {study.samples} samples per prompt, mean and 95% interval over seeds",
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
