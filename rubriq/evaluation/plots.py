"""PNG figures with matplotlib (Agg backend: no display needed).

Every figure has axis labels with units, a legend when it has more than one series, and a
title that says what the data are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from rubriq.rubric.engine import DIMENSION_NAMES


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def legend_outside(ax, fontsize: int = 8) -> None:
    """The legend to the right of the axes, never over the data."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=fontsize)


def plain_log_axis(ax, axis: str = "x") -> None:
    """A log axis labelled 0.5, 1, 2, 5 ... instead of 10^-0.3."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def save(fig, out: str | Path) -> Path:
    """Write ``fig`` as a PNG (folders created) and release it."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    _pyplot().close(fig)
    return out


def read_metrics(path: str | Path, phase: str | None = None) -> list[dict]:
    """Rows of a ``metrics.jsonl`` (optionally one phase: sft, grpo, ppo) that carry a step log
    (summary lines such as ``train_runtime`` are skipped)."""
    rows = [json.loads(x) for x in Path(path).read_text(encoding="utf-8").splitlines() if x.strip()]
    rows = [r for r in rows if "train_runtime" not in r]
    return [r for r in rows if phase is None or r.get("phase", "grpo") == phase]


def learning_curves(metrics: Iterable[dict], out: str | Path, title: str = "GRPO learning curves") -> Path:
    """Total reward and the five rubric dimensions per step (one panel each)."""
    plt = _pyplot()
    rows = [r for r in metrics if "reward" in r]
    if not rows:
        raise ValueError("no logged reward in these metrics: nothing to plot")
    steps = [r["step"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.plot(steps, [r["reward"] for r in rows], marker="o", label="reward R = sum w_d S_d")
    if any("reward_std" in r for r in rows):
        # rewards live in [0, 1]: the band is clipped there (a std band past 1 is no reward anyone got)
        lo = [max(0.0, r["reward"] - (r.get("reward_std") or 0)) for r in rows]
        hi = [min(1.0, r["reward"] + (r.get("reward_std") or 0)) for r in rows]
        ax1.fill_between(steps, lo, hi, alpha=0.2, label="+/- 1 std within the group, in [0, 1]")
    ax1.set(xlabel="training step", ylabel="mean reward (0-1)", title=title)
    ax1.set_ylim(-0.02, 1.02)
    ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=8, ncol=2)
    ax1.grid(alpha=0.3)
    for dim in DIMENSION_NAMES:
        key = f"rewards/{dim}/mean"
        pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        if pts:
            ax2.plot(*zip(*pts, strict=True), marker=".", label=f"S_{dim}")
    ax2.set(xlabel="training step", ylabel="mean dimension score (0-1)", title="rubric dimensions")
    ax2.set_ylim(-0.02, 1.02)
    ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), fontsize=8, ncol=3)
    ax2.grid(alpha=0.3)
    return save(fig, out)


def phase_bars(summaries: dict[str, dict], out: str | Path, title: str = "Held-out prompts") -> Path:
    """Parse rate, fraction F_avg >= 0.99 and mean reward per phase (before SFT, after SFT ...),
    with the 95% interval as an error bar where the summary has one (``correct_ci``, ``reward_ci``)."""
    plt = _pyplot()
    phases = list(summaries)
    metrics = [
        ("parse_rate", "parse rate", None),
        ("correct_rate", "fraction F_avg >= 0.99", "correct_ci"),
        ("mean_reward", "mean reward", "reward_ci"),
    ]
    fig, ax = plt.subplots(figsize=(8.5, 3.6))
    width = 0.8 / len(metrics)
    for i, (key, label, ci) in enumerate(metrics):
        xs = [p + i * width for p in range(len(phases))]
        heights = [summaries[p].get(key) or 0.0 for p in phases]
        yerr = None
        if ci and all((summaries[p].get(ci) or [None])[0] is not None for p in phases):
            lo = [max(0.0, summaries[p][ci][1]) for p in phases]
            hi = [min(1.0, summaries[p][ci][2]) for p in phases]
            yerr = [
                [max(0.0, h - low) for h, low in zip(heights, lo, strict=True)],
                [max(0.0, u - h) for h, u in zip(heights, hi, strict=True)],
            ]
        bars = ax.bar(xs, heights, width, label=label, yerr=yerr, capsize=3 if yerr else 0)
        ax.bar_label(bars, labels=[f"{h:.2f}" for h in heights], fontsize=7, padding=2)
    ax.set_xticks([p + width for p in range(len(phases))], phases)
    ax.set(ylabel="fraction / reward (0-1)", title=title, ylim=(0, 1.12))
    legend_outside(ax)
    ax.grid(axis="y", alpha=0.3)
    return save(fig, out)
