"""Stage 6b, the report: ``per_step.csv``, ``summary.json``, ``summary.md`` and the figures
(:mod:`rubriq.studies.plots`), from whatever arm-seeds are finished (:mod:`rubriq.studies.aggregate`).
Written after every arm-seed, and again by ``rubriq study convergence --summary-only`` (also in a
committed results folder, which holds no ``data/``).
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

from rubriq.config import ConfigError
from rubriq.studies import plots
from rubriq.studies.aggregate import aggregate, collect, correlations, paired_from_step0, warm_starts
from rubriq.studies.settings import StudySettings
from rubriq.tables import fmt, format_ci, markdown_table


def eval_prompt_count(out: Path, study: StudySettings) -> int:
    """The number of held-out prompts each evaluation samples: from ``OUT/data`` (the study's
    split), else, in a committed results folder (no data), from its ``summary.json``."""
    split = out / "data" / f"{study.split}.jsonl"
    if split.is_file():
        n = sum(1 for line in split.read_text(encoding="utf-8").splitlines() if line.strip())
        return min(n, study.max_prompts) if study.max_prompts else n
    written = out / "summary.json"
    if written.is_file():
        return int(json.loads(written.read_text())["eval_prompts"])
    raise ConfigError(
        f"{out}: neither {split} nor summary.json to count the held-out prompts from; run the study "
        "(without --summary-only) to write its data"
    )


def write_summary(out: Path, study: StudySettings, eval_prompts: int) -> Path:
    """per_step.csv, summary.json, summary.md and the plots, from whatever arm-seeds are done."""
    rows = collect(out, study)
    if not rows:
        raise RuntimeError(f"no finished arm-seed under {out / 'arms'}")
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(out / "per_step.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    agg = aggregate(rows, study)
    agg["paired_from_step0"] = paired_from_step0(out, study, agg["final_step"])
    corr = correlations(out, study, agg["final_step"])
    filtered = json.loads((out / "filter.json").read_text()) if (out / "filter.json").is_file() else None
    train_prompts = study.train_eval_prompts
    summary = {
        "study": dataclasses.asdict(study),
        "eval_prompts": eval_prompts,
        "train_eval_prompts": train_prompts,
        "filter": {k: v for k, v in (filtered or {}).items() if k != "kept"},
        "correlations": corr,
        **agg,
        "warm_starts": warm_starts(out, study),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    plots.curves(agg, out / "curves.png", study)
    if any(a["train_per_step"] for a in agg["arms"].values()):
        plots.curves(agg, out / "train_curves.png", study, key="train_per_step")
    plots.training(out, study, out / "training.png")
    text = summary_markdown(study, agg, corr, filtered, eval_prompts, train_prompts, summary["warm_starts"])
    (out / "summary.md").write_text(text)
    return out / "summary.md"


def summary_markdown(
    study: StudySettings,
    agg: dict,
    corr: dict,
    filtered,
    eval_prompts: int,
    train_prompts: int,
    starts: dict[str, list[str]] | None = None,
) -> str:
    """The study's tables (summary.md)."""
    k, last, metric = study.samples, agg["final_step"], study.primary_metric
    lines = [
        f"# Convergence study ({', '.join(agg['arms'])})",
        "",
        f"{eval_prompts} held-out prompts x {k} samples; {len(study.seeds)} seeds; {study.steps} GRPO steps. "
        "Means over seeds with 95% t-intervals. Primary metric (named before the run): held-out "
        f"`{metric}`; time-to-target threshold {study.threshold}.",
        "",
        f"## Held-out metrics at step {last}",
        "",
    ]

    def at_last(a: dict, key: str = "per_step") -> dict:
        per = a[key]
        return per.get(last) or per[max(per)]

    cols = ["correct_rate", "mean_reward", "pass@k", "gap_closed", "reached_pyzx", "compression", "wrong_rewarded_rate"]
    header = ["arm", "seeds", *(c.replace("pass@k", f"pass@{k}") for c in cols)]
    lines += markdown_table(
        header, [[n, str(len(a["seeds"])), *(format_ci(at_last(a)[c]) for c in cols)] for n, a in agg["arms"].items()]
    )
    lines += ["", f"## Held-out `{metric}` per evaluated step", ""]
    steps = sorted({s for a in agg["arms"].values() for s in a["per_step"]})
    lines += markdown_table(
        ["arm", *(f"step {s}" for s in steps)],
        [
            [n, *(format_ci(a["per_step"][s][metric]) if s in a["per_step"] else "-" for s in steps)]
            for n, a in agg["arms"].items()
        ],
    )
    if train_prompts:
        lines += [
            "",
            f"## Training prompts ({train_prompts} fixed prompts x {k} samples): learning vs generalization",
            "",
        ]
        lines += markdown_table(
            ["arm", *(f"{m} step {s}" for m in ("correct", metric) for s in steps)],
            [
                [
                    n,
                    *(
                        format_ci(a["train_per_step"][s][m]) if s in a["train_per_step"] else "-"
                        for m in ("correct_rate", metric)
                        for s in steps
                    ),
                ]
                for n, a in agg["arms"].items()
            ],
        )
    lines += ["", f"## Time to target (held-out {metric} >= {study.threshold})", ""]
    lines += markdown_table(
        ["arm", "step per seed", "simulations per seed", "mean seconds per arm-seed"],
        [
            [
                name,
                ", ".join(fmt(t) for t in a["time_to_target"]),
                ", ".join(fmt(t) for t in a["simulations_to_target"]),
                format_ci(a["seconds_per_seed"][0], 0),
            ]
            for name, a in agg["arms"].items()
        ],
    )
    lines += ["", "## Training signal (mean over steps)", ""]
    lines += markdown_table(
        ["arm", "reward", "reward std", "frac_reward_zero_std", "skipped groups", "entropy", "completion length"],
        [
            [
                name,
                format_ci(t["train/reward"]),
                format_ci(t["train/reward_std"]),
                format_ci(t["train/frac_reward_zero_std"]),
                format_ci(t.get("train/dynamic_sampling/skipped_groups", (None, None, None))),
                format_ci(t["train/entropy"]),
                format_ci(t["train/completions/mean_length"], 1),
            ]
            for name, t in ((name, a["train"]) for name, a in agg["arms"].items())
            if t.get("train/reward", (None,))[0] is not None
        ],
    )
    if filtered:
        lines += [
            "",
            "## Difficulty filter (pilot of the warm-start, before training)",
            "",
            f"{filtered['kept_prompts']} of {filtered['prompts']} training prompts kept ({filtered['samples_per_prompt']} "
            f"samples each); mean solve rate {fmt(filtered.get('solve_rate_mean'))}, fraction of prompts solved on "
            f"20-70% of samples {fmt(filtered.get('solved_20_70'))}.",
            "",
        ]
        lines += markdown_table(
            ["arm", "zero-variance groups, all prompts", "after the filter"],
            [
                [name, fmt(v), fmt(filtered["zero_variance_after_filter"].get(name))]
                for name, v in filtered["zero_variance_before_filter"].items()
            ],
        )
    lines += [
        "",
        f"## Paired differences at step {last} (same seed; MDE: smallest effect {len(study.seeds)} seeds detect at 80% power)",
        "",
        "Same warm-start: the seeds at which both arm-seeds trained from the same SFT weights (the "
        "Warm-starts table below; the control's: the one its done.json records). At the other "
        "seeds the difference also holds that of two warm-starts.",
        "",
    ]
    dm = list(dict.fromkeys(("correct_rate", "mean_reward", "gap_closed", metric)))

    def matched(d: dict) -> str:
        same = d.get("same_warm_start", d["seeds"])
        return f"{', '.join(f's{s}' for s in same) or 'none'} ({len(same)} of {len(d['seeds'])})"

    lines += markdown_table(
        ["pair", *(f"{m} (MDE)" for m in dm), f"pass@{k}", "wrong rewarded", "same warm-start"],
        [
            [
                pair,
                *(f"{format_ci(d[m])} ({fmt(d.get('mde/' + m))})" for m in dm),
                format_ci(d["pass@k"]),
                format_ci(d["wrong_rewarded_rate"]),
                matched(d),
            ]
            for pair, d in agg["differences"].items()
        ],
    )
    lines += [
        "",
        "## The paper's mechanism: correlation of the five dimensions",
        "",
        "Mean pairwise correlation and effective number of dimensions (participation ratio of the "
        "correlation matrix' eigenvalues; constant dimensions left out). The paper: mean correlation "
        "0.31, D_eff ~ 3.2 (for 5 equicorrelated dimensions at 0.31 the participation ratio is 3.6).",
        "",
    ]
    table = []
    for where, per_arm in (("training", corr.get("train", {})), ("held-out", corr.get("held_out", {}))):
        for name, fams in per_arm.items():
            for fam, c in fams.items():
                if c.get("n", 0) >= 3:
                    table.append(
                        [
                            where,
                            name,
                            fam,
                            str(c["n"]),
                            fmt(c.get("mean_correlation")),
                            fmt(c.get("effective_dimensions")),
                            ", ".join(c.get("constant") or []) or "-",
                        ]
                    )
    lines += markdown_table(
        ["completions", "arm", "family", "n", "mean correlation", "effective dimensions", "constant"], table
    )
    paired = agg.get("paired_from_step0") or {}
    if paired:
        lines += [
            "",
            f"## Change from step 0 to step {last} on the same prompts, per seed",
            "",
            "Mean over prompts of the per-prompt change (final step minus step 0, the same policy's warm-start), "
            "95% t-intervals over prompts: what one seed can say about its own policy (the control's later steps "
            "are its step 0, so it is left out; differences between arms are in the tables above).",
            "",
        ]
        table = []
        for name, seeds in paired.items():
            for seed, splits in seeds.items():
                for split, c in splits.items():
                    table.append(
                        [
                            name,
                            seed,
                            "held-out" if split == "test" else "training prompts",
                            str(c["prompts"]),
                            *(format_ci(c.get(m), 3) for m in ("correct", "reward", "gap_closed")),
                            " -> ".join(
                                f"{k['copies']} / {k['fewer_t']} of {k['correct']}"
                                for k in (c["rewrite_copies"]["step0"], c["rewrite_copies"]["final"])
                            ),
                        ]
                    )
        lines += markdown_table(
            [
                "arm",
                "seed",
                "prompts",
                "n",
                "correct",
                "reward",
                "gap_closed",
                "correct rewrites: verbatim copies / fewer T (step 0 -> final)",
            ],
            table,
        )
    if starts:
        lines += ["", "## Warm-starts (SHA-256 of the SFT weights each trained arm-seed started from)", ""]
        lines += markdown_table(["warm-start", "arm-seeds"], [[sha[:16], ", ".join(v)] for sha, v in starts.items()])
    lines += ["", "![held-out curves](curves.png)", ""]
    if train_prompts:
        lines += ["![training-prompt curves](train_curves.png)", ""]
    lines += ["![training signal](training.png)", ""]
    return "\n".join(lines)


__all__ = ["eval_prompt_count", "summary_markdown", "write_summary"]
