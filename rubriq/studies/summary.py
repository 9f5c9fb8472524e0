"""Stage 6b, the report: ``per_step.csv``, ``summary.json``, ``summary.md`` and the figures
(:mod:`rubriq.studies.plots`), from whatever arm-seeds are finished (:mod:`rubriq.studies.aggregate`).
Written after every arm-seed, and again by ``rubriq study convergence --summary-only`` (also in a
committed results folder, which holds no ``data/``).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rubriq.config import ConfigError
from rubriq.studies import plots
from rubriq.studies.aggregate import (
    aggregate,
    collect,
    correlations,
    headline,
    paired_from_step0,
    reductions_per_step,
    series,
    training_groups,
    warm_starts,
)
from rubriq.studies.data import tier_folder
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


def tier_prompt_counts(out: Path, study: StudySettings) -> dict[str, int | None]:
    """The number of prompts of each further tier: from ``OUT/tiers/NAME``, else from
    ``summary.json`` (None where neither says)."""
    written = out / "summary.json"
    recorded = json.loads(written.read_text()).get("tier_prompts", {}) if written.is_file() else {}
    counts: dict[str, int | None] = {}
    for name in study.eval_tiers:
        path = tier_folder(out, name) / "test.jsonl"
        if path.is_file():
            n = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
            counts[name] = min(n, study.max_prompts) if study.max_prompts else n
        else:
            counts[name] = recorded.get(name)
    return counts


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
    tier_prompts = tier_prompt_counts(out, study)
    agg = aggregate(rows, study)
    agg["paired_from_step0"] = paired_from_step0(out, study, agg["final_step"])
    head = headline(out, study, rows, study.primary_tier)
    if any(p["samples"] for p in head.values()):  # a study of rewrite prompts (the others have no reductions)
        agg["headline"] = head
    groups = training_groups(out, study)
    if groups:  # a study that logged its groups (2026-12-06 on): correct reductions and group logs
        agg["reductions"] = reductions_per_step(out, study)
        agg["training_groups"] = groups
    corr = correlations(out, study, agg["final_step"])
    filtered = json.loads((out / "filter.json").read_text()) if (out / "filter.json").is_file() else None
    train_prompts = study.train_eval_prompts
    summary = {
        "study": study.to_record(),
        "eval_prompts": eval_prompts,
        "train_eval_prompts": train_prompts,
        "tier_prompts": tier_prompts,
        "filter": {k: v for k, v in (filtered or {}).items() if k != "kept"},
        "correlations": corr,
        **agg,
        "warm_starts": warm_starts(out, study),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    figures = [("held-out curves", plots.curves(agg, out / "curves.png", study))]
    if any(a["train_per_step"] for a in agg["arms"].values()):
        figures.append(("training-prompt curves", plots.curves(agg, out / "train_curves.png", study, split="train")))
    for tier in study.eval_tiers:
        figures.append(
            (f"held-out tier {tier} curves", plots.curves(agg, out / f"curves_{tier}.png", study, split=tier))
        )
    rewrites = plots.rewrite_outcomes(agg, out / "rewrites.png", study)
    if rewrites is not None:
        figures.append(("rewrite outcomes", rewrites))
    figures.append(("training signal", plots.training(out, study, out / "training.png")))
    text = summary_markdown(
        study,
        agg,
        corr,
        filtered,
        eval_prompts,
        train_prompts,
        summary["warm_starts"],
        tier_prompts,
        [(alt, path.name) for alt, path in figures],
        primary_named=_primary_named(out),
    )
    (out / "summary.md").write_text(text)
    for readme in headline_readmes(out):
        sync_headline(readme, text)
    return out / "summary.md"


HEADLINE_BEGIN = "<!-- headline: written from summary.md by `rubriq study convergence --summary-only`; do not edit -->"
HEADLINE_END = "<!-- /headline -->"


def headline_section(summary: str) -> str:
    """The headline table of a ``summary.md`` (its text from the table's header line to the blank
    line after the table); "" when it has none."""
    lines = summary.splitlines()
    begin = next((i for i, line in enumerate(lines) if line.startswith("| policy | seeds | correct reduction")), None)
    if begin is None:
        return ""
    end = next((i for i in range(begin, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[begin:end])


def headline_readmes(out: Path) -> tuple[Path, ...]:
    """The results READMEs that carry study folder ``out``'s headline table: ``out/README.md``
    and the one of the folder above, each where it exists and holds the headline markers."""
    found = []
    for readme in (out / "README.md", out.parent / "README.md"):
        if readme.is_file() and HEADLINE_BEGIN in readme.read_text(encoding="utf-8"):
            found.append(readme)
    return tuple(found)


def sync_headline(readme: Path, summary: str) -> bool:
    """Replace the block between :data:`HEADLINE_BEGIN` and :data:`HEADLINE_END` in ``readme``
    (a results README written by hand) with the headline table of ``summary`` (the text of
    ``summary.md``), so that the README's numbers are always those of the committed units.
    False (nothing written) where the README or its markers or the table are missing."""
    if not readme.is_file():
        return False
    text = readme.read_text(encoding="utf-8")
    table = headline_section(summary)
    if HEADLINE_BEGIN not in text or HEADLINE_END not in text or not table:
        return False
    head, rest = text.split(HEADLINE_BEGIN, 1)
    _, tail = rest.split(HEADLINE_END, 1)
    new = f"{head}{HEADLINE_BEGIN}\n{table}\n{HEADLINE_END}{tail}"
    if new != text:
        readme.write_text(new, encoding="utf-8")
    return True


def _primary_named(out: Path) -> bool:
    """Whether the study's record (``OUT/study.json``, written when it started) names its primary
    metric: a study run before the setting existed judged the default, named by nobody."""
    path = out / "study.json"
    return not path.is_file() or "primary_metric" in json.loads(path.read_text())


def summary_markdown(
    study: StudySettings,
    agg: dict,
    corr: dict,
    filtered,
    eval_prompts: int,
    train_prompts: int,
    starts: dict[str, list[str]] | None = None,
    tier_prompts: dict[str, int | None] | None = None,
    figures: list[tuple[str, str]] | None = None,
    primary_named: bool = True,
) -> str:
    """The study's tables (summary.md), section by section; ``figures``: (alt text, file name)
    of the figures written beside it (default: the held-out and training-prompt curves and the
    training signal); ``primary_named``: whether the primary metric was named before the run
    (False: the header says it is the default)."""
    if figures is None:
        figures = [("held-out curves", "curves.png")]
        figures += [("training-prompt curves", "train_curves.png")] if train_prompts else []
        figures += [("training signal", "training.png")]
    lines = _header(study, agg, eval_prompts, tier_prompts or {}, primary_named)
    lines += _headline(study, agg)
    lines += _held_out(study, agg)
    lines += _training_prompts(study, agg, train_prompts)
    for tier in study.eval_tiers:
        lines += _tier(study, agg, tier, (tier_prompts or {}).get(tier))
    lines += _rewrite_outcomes(study, agg)
    lines += _time_to_target(study, agg)
    lines += _training_signal(agg)
    lines += _difficulty_filter(filtered)
    lines += _paired_differences(study, agg)
    lines += _correlations(corr)
    lines += _change_from_step0(agg)
    lines += _reductions(agg.get("reductions") or [])
    lines += _groups(agg.get("training_groups") or {})
    lines += _warm_starts(starts)
    lines += [""]
    for alt, name in figures:
        lines += [f"![{alt}]({name})", ""]
    return "\n".join(lines)


# -- the sections of summary.md, in order --------------------------------------------------------
HELD_OUT_COLUMNS = (
    "correct_rate",
    "mean_reward",
    "pass@k",
    "gap_closed",
    "reached_pyzx",
    "compression",
    "wrong_rewarded_rate",
)
OUTCOME_NAMES = {"rewrite_copy_rate": "copy", "rewrite_reduction_rate": "reduction", "rewrite_wrong_rate": "wrong"}


def _tier_label(tier: str) -> str:
    return "held-out" if tier == "test" else f"held-out tier `{tier}`"


def _steps(agg: dict) -> list[int]:
    return sorted({s for a in agg["arms"].values() for s in a["per_step"]})


def _tier_differences(study: StudySettings, agg: dict, tier: str) -> dict:
    return agg["differences"] if tier == study.primary_tier else agg.get("tier_differences", {}).get(tier, {})


def _matched(d: dict) -> str:
    same = d.get("same_warm_start", d["seeds"])
    return f"{', '.join(f's{s}' for s in same) or 'none'} ({len(same)} of {len(d['seeds'])})"


def _header(study: StudySettings, agg: dict, eval_prompts: int, tier_prompts: dict, named: bool = True) -> list[str]:
    k, metric = study.sampling.samples, study.primary_metric
    judged = "" if study.primary_tier == "test" else f" on tier `{study.primary_tier}`"
    tiers = "".join(
        f" Further held-out tier `{t}`: {fmt(tier_prompts.get(t))} prompts x {k} samples." for t in study.eval_tiers
    )
    return [
        f"# Convergence study ({', '.join(agg['arms'])})",
        "",
        f"{eval_prompts} held-out prompts x {k} samples; {len(study.seeds)} seeds; {study.steps} GRPO steps.{tiers} "
        "Means over seeds with 95% t-intervals. "
        + (
            "Primary metric (named before the run): held-out "
            if named
            else "Primary metric (the default; this study ran before one was named): held-out "
        )
        + f"`{metric}`{judged}; time-to-target threshold {study.threshold}.",
    ]


def _headline(study: StudySettings, agg: dict) -> list[str]:
    """The study in one table (:func:`rubriq.studies.aggregate.headline`): correct reductions and
    gap_closed of the warm-start and of each trained arm at the final step; [] before any arm-seed
    of a rewriting study (no rewrite samples) is kept."""
    found = agg.get("headline") or {}
    if not any(p["samples"] for p in found.values()):
        return []
    seeds = len(study.seeds)
    where = _tier_label(study.primary_tier)
    drawn = (
        "the same prompts and sampling seed"
        if study.same_eval_seed
        else "the same prompts; this study drew a new sampling seed at each step"
    )
    lines = [
        "",
        f"## Headline: {where} correct reductions and gap_closed at step {agg['final_step']}",
        "",
        "Correct reduction: a rewrite sample that is correct and has fewer T gates than its input (T < T0). "
        "Rate, gap_closed, copy and wrong: means over seeds, 95% t-intervals over seeds; reductions: pooled over "
        f"seeds. Change from step 0: each seed's final rate minus its own step-0 rate ({drawn}), mean over "
        f"seeds with its t-interval and MDE (the smallest change {seeds} seed{'s' if seeds != 1 else ''} detect "
        "at 80% power), and over prompts (each prompt's change averaged over the seeds, t-interval over "
        "prompts). One seed: no interval over seeds. The warm-start row is the step-0 evaluation of every seed "
        "(the control `none` repeats it).",
        "",
    ]
    table = []
    for name, p in found.items():
        change = format_ci(p["change"])
        if p["mde/change"] is not None:
            change += f" ({fmt(p['mde/change'])})"
        table.append(
            [
                "warm-start (step 0)" if name == "warm-start" else f"`{name}`",
                ", ".join(str(s) for s in p["seeds"]),
                format_ci(p["reduction_rate"]),
                f"{p['reductions']} of {p['samples']}",
                change if name != "warm-start" else "",
                format_ci(p["change_by_prompt"]) if name != "warm-start" else "",
                format_ci(p["gap_closed"]),
                format_ci(p["gap_closed_change"]) if name != "warm-start" else "",
                fmt(p["copy"]),
                fmt(p["wrong"]),
            ]
        )
    lines += markdown_table(
        [
            "policy",
            "seeds",
            "correct reduction",
            "reductions",
            "change from step 0, over seeds (MDE)",
            "over prompts",
            "gap_closed",
            "its change",
            "copy",
            "wrong",
        ],
        table,
    )
    return lines


def _at_final(agg: dict, per: dict) -> dict:
    return per.get(agg["final_step"]) or per[max(per)]


def _final_table(study: StudySettings, agg: dict, tier: str) -> list[str]:
    """The held-out metrics of every arm at the final step, on one tier."""
    k = study.sampling.samples
    header = ["arm", "seeds", *(c.replace("pass@k", f"pass@{k}") for c in HELD_OUT_COLUMNS)]
    return markdown_table(
        header,
        [
            [n, str(len(a["seeds"])), *(format_ci(_at_final(agg, series(a, tier))[c]) for c in HELD_OUT_COLUMNS)]
            for n, a in agg["arms"].items()
            if series(a, tier)
        ],
    )


def _per_step_table(study: StudySettings, agg: dict, tier: str) -> list[str]:
    """The primary metric of every arm at every evaluated step, on one tier."""
    steps, metric = _steps(agg), study.primary_metric
    return markdown_table(
        ["arm", *(f"step {s}" for s in steps)],
        [
            [n, *(format_ci(series(a, tier)[s][metric]) if s in series(a, tier) else "-" for s in steps)]
            for n, a in agg["arms"].items()
        ],
    )


def _held_out(study: StudySettings, agg: dict) -> list[str]:
    lines = ["", f"## Held-out metrics at step {agg['final_step']}", ""]
    lines += _final_table(study, agg, "test")
    lines += ["", f"## Held-out `{study.primary_metric}` per evaluated step", ""]
    lines += _per_step_table(study, agg, "test")
    if study.primary_tier != "test":
        lines += ["", f"Paired differences at step {agg['final_step']} (same seed):", ""]
        lines += _paired_table(study, _tier_differences(study, agg, "test"))
    return lines


def _training_prompts(study: StudySettings, agg: dict, train_prompts: int) -> list[str]:
    if not train_prompts:
        return []
    k, metric, steps = study.sampling.samples, study.primary_metric, _steps(agg)
    lines = [
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
    return lines


def _tier(study: StudySettings, agg: dict, tier: str, prompts: int | None) -> list[str]:
    """A further held-out tier: its final-step table, its primary metric per step, its paired differences."""
    last = agg["final_step"]
    lines = ["", f"## Held-out tier `{tier}` ({fmt(prompts)} prompts x {study.sampling.samples} samples)", ""]
    lines += [f"Metrics at step {last}:", ""]
    lines += _final_table(study, agg, tier)
    lines += ["", f"`{study.primary_metric}` per evaluated step:", ""]
    lines += _per_step_table(study, agg, tier)
    if tier == study.primary_tier:
        lines += ["", "The primary tier: its paired differences are in the table of paired differences below."]
    else:
        lines += ["", f"Paired differences at step {last} (same seed):", ""]
        lines += _paired_table(study, _tier_differences(study, agg, tier))
    return lines


def _paired_table(study: StudySettings, diffs: dict) -> list[str]:
    """A short table of paired differences: correct rate, reward, gap closed and the primary metric (MDE)."""
    dm = list(dict.fromkeys(("correct_rate", "mean_reward", "gap_closed", study.primary_metric)))
    return markdown_table(
        ["pair", *(f"{m} (MDE)" for m in dm), "same warm-start"],
        [
            [pair, *(f"{format_ci(d[m])} ({fmt(d.get('mde/' + m))})" for m in dm), _matched(d)]
            for pair, d in diffs.items()
        ],
    )


def _rewrite_outcomes(study: StudySettings, agg: dict) -> list[str]:
    """Copied, reduced and wrong rewrite samples per evaluated step, on every prompt set that has them."""
    steps = _steps(agg)
    sets = [(_tier_label(t), t) for t in study.tiers()] + [("training prompts", "train")]
    table = []
    for label, where in sets:
        for name, arm in agg["arms"].items():
            per = series(arm, where)
            cells = [
                format_ci(per[s].get(m, (None, None, None))) if s in per else "-" for m in OUTCOME_NAMES for s in steps
            ]
            if any(c not in ("-", format_ci((None, None, None))) for c in cells):
                table.append([label, name, *cells])
    if not table:
        return []
    last = agg["final_step"]
    lines = [
        "",
        "## Rewrite outcomes per evaluated step",
        "",
        "Of the samples of rewrite prompts (a circuit to improve): the fraction that is correct and the input "
        "verbatim (copy), correct with fewer T than the input (reduction: T < T0), and not correct (wrong); a "
        "correct sample that is neither (e.g. the input with gates reordered) is in none of the three. Means over "
        "seeds with 95% t-intervals.",
        "",
    ]
    lines += markdown_table(
        ["prompts", "arm", *(f"{short} step {s}" for short in OUTCOME_NAMES.values() for s in steps)], table
    )
    where = "" if study.primary_tier == "test" else f", tier `{study.primary_tier}`"
    lines += ["", f"Paired differences at step {last} (same seed{where}):", ""]
    lines += markdown_table(
        ["pair", "copy rate (MDE)", "reduction rate (MDE)", "same warm-start"],
        [
            [
                pair,
                *(
                    f"{format_ci(d.get(m, (None, None, None)))} ({fmt(d.get('mde/' + m))})"
                    for m in ("rewrite_copy_rate", "rewrite_reduction_rate")
                ),
                _matched(d),
            ]
            for pair, d in agg["differences"].items()
        ],
    )
    return lines


def _time_to_target(study: StudySettings, agg: dict) -> list[str]:
    judged = "held-out" if study.primary_tier == "test" else f"tier `{study.primary_tier}`"
    lines = ["", f"## Time to target ({judged} {study.primary_metric} >= {study.threshold})", ""]
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
    return lines


def _training_signal(agg: dict) -> list[str]:
    lines = ["", "## Training signal (mean over steps)", ""]
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
    return lines


def _difficulty_filter(filtered) -> list[str]:
    if not filtered:
        return []
    lines = [
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
    return lines


def _paired_differences(study: StudySettings, agg: dict) -> list[str]:
    k, last, metric = study.sampling.samples, agg["final_step"], study.primary_metric
    where = "" if study.primary_tier == "test" else f", tier `{study.primary_tier}`"
    lines = [
        "",
        f"## Paired differences at step {last} (same seed{where}; MDE: smallest effect {len(study.seeds)} seeds detect "
        "at 80% power)",
        "",
        "Same warm-start: the seeds at which both arm-seeds trained from the same SFT weights (the "
        "Warm-starts table below; the control's: the one its done.json records). At the other "
        "seeds the difference also holds that of two warm-starts.",
        "",
    ]
    dm = list(dict.fromkeys(("correct_rate", "mean_reward", "gap_closed", metric)))
    lines += markdown_table(
        ["pair", *(f"{m} (MDE)" for m in dm), f"pass@{k}", "wrong rewarded", "same warm-start"],
        [
            [
                pair,
                *(f"{format_ci(d[m])} ({fmt(d.get('mde/' + m))})" for m in dm),
                format_ci(d["pass@k"]),
                format_ci(d["wrong_rewarded_rate"]),
                _matched(d),
            ]
            for pair, d in agg["differences"].items()
        ],
    )
    return lines


def _correlations(corr: dict) -> list[str]:
    lines = [
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
    return lines


def _change_from_step0(agg: dict) -> list[str]:
    paired = agg.get("paired_from_step0") or {}
    if not paired:
        return []
    lines = [
        "",
        f"## Change from step 0 to step {agg['final_step']} on the same prompts, per seed",
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
                        "training prompts" if split == "train" else _tier_label(split).replace("`", ""),
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
    return lines


def _reductions(found: list[dict]) -> list[str]:
    if not found:
        return []
    lines = [
        "",
        "## Correct reductions (correct with T < T0) per evaluated step",
        "",
        "Of the rewrite samples: the correct reductions with their 95% Wilson interval, the prompts with at "
        "least one, and the mean over prompts of the per-prompt change of the reduction rate from the same "
        "seed's step 0 (95% t-interval over prompts).",
        "",
    ]
    table = [
        [
            f["arm"],
            str(f["seed"]),
            "training prompts" if f["split"] == "train" else _tier_label(f["split"]).replace("`", ""),
            str(f["step"]),
            f"{f['reductions']} / {f['samples']}",
            format_ci(f["rate"], 3),
            f"{f['prompts_with_one']} / {f['prompts']}",
            format_ci(f["change_from_step0"], 3) if f["step"] else "",
        ]
        for f in found
    ]
    lines += markdown_table(
        ["arm", "seed", "prompts", "step", "reductions", "rate", "prompts with one", "change from step 0"], table
    )
    return lines


def _groups(found: dict[str, list[dict]]) -> list[str]:
    if not found:
        return []
    lines = [
        "",
        "## What GRPO's groups held during training (groups.jsonl; mean per window of steps)",
        "",
        "`with red.`: fraction of groups holding a correct reduction; `A(...)`: mean advantage of a correct "
        "reduction, a copy and a wrong answer in those groups; then the outcomes of the training samples; "
        "TRL's entropy and KL to the warm-start.",
        "",
    ]
    keys: tuple[str, ...] = ("groups_with_reduction", "adv_reduction", "adv_copy", "adv_wrong", "reduction_rate")
    keys += ("copy_rate", "wrong_rate", "entropy", "kl")

    def cell(key: str, value) -> str:  # the KL to the warm-start is of order 1e-4 here: 3 decimals say 0.000
        return f"{value:.1e}" if key == "kl" and isinstance(value, float) else fmt(value)

    table = [[unit, w["steps"], *(cell(k, w[k]) for k in keys)] for unit, windows in found.items() for w in windows]
    header = ["arm-seed", "steps", "with red.", "A(red.)", "A(copy)", "A(wrong)", "red.", "copy", "wrong"]
    lines += markdown_table([*header, "entropy", "KL"], table)
    return lines


def _warm_starts(starts: dict[str, list[str]] | None) -> list[str]:
    if not starts:
        return []
    lines = ["", "## Warm-starts (SHA-256 of the SFT weights each trained arm-seed started from)", ""]
    lines += markdown_table(["warm-start", "arm-seeds"], [[sha[:16], ", ".join(v)] for sha, v in starts.items()])
    return lines


__all__ = [
    "HEADLINE_BEGIN",
    "HEADLINE_END",
    "eval_prompt_count",
    "headline_readmes",
    "headline_section",
    "summary_markdown",
    "sync_headline",
    "tier_prompt_counts",
    "write_summary",
]
