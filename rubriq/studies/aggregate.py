"""Stage 6a, the numbers: what the finished arm-seeds' files say, over seeds.

* :func:`collect`: one row per (arm, seed, evaluated step, split), with the arm-seed's
  training-log means (``per_step.csv``);
* :func:`aggregate`: means and 95% t-intervals over seeds (:func:`rubriq.evaluation.metrics.mean_ci`)
  per arm and step, time-to-target (the first evaluated step at which the held-out
  ``primary_metric`` reaches ``target_value``), and paired differences between arms at the
  final step (same seed) with the smallest effect the seeds can detect
  (:func:`rubriq.studies.analysis.minimum_detectable_effect`);
* :func:`correlations`: the correlation of the rubric's five dimensions and their effective
  number, per arm and task family, over training completions and held-out samples;
* :func:`paired_from_step0`: each trained arm-seed's final step against its own step 0 on the
  same prompts (what one seed can say), with its verbatim copies and T reductions;
* :func:`headline`: the study in one table (correct reductions and ``gap_closed`` of the
  warm-start and of each arm at the final step, with their change from step 0);
* :func:`warm_starts`: which arm-seeds trained from which warm-start.

Only finished arm-seeds (``done.json``) are read (:func:`rubriq.studies.layout.finished_arm_seeds`).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from rubriq.evaluation.metrics import mean_ci
from rubriq.sim.measures import CORRECT_EPS as EPS  # what the summary recomputes from scored samples uses
from rubriq.studies import layout
from rubriq.studies.settings import EVAL_METRICS, REWRITE_OUTCOMES, TRAIN_METRICS, StudySettings


def collect(out: Path, study: StudySettings) -> list[dict]:
    """One row per (arm, seed, evaluated step, split) of the finished arm-seeds, with the
    arm-seed's training-log means (TRAIN_METRICS, prefixed ``train/``) and seconds.  An
    evaluation logged before the rewrite outcomes were measured gets them from its scored
    samples (the records files; all None where those are missing too)."""
    from rubriq.studies.evaluate import rewrite_outcomes

    rows = []
    for name in study.arms:
        for seed, arm_dir in layout.finished_arm_seeds(out, study, name):
            done = json.loads((arm_dir / "done.json").read_text())
            logged = [r for r in layout.read_jsonl(arm_dir / "metrics.jsonl") if "train_runtime" not in r]
            train = {}
            for key in (*TRAIN_METRICS, "dynamic_sampling/skipped_groups"):
                values = [r[key] for r in logged if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
                train[f"train/{key}"] = statistics.fmean(values) if values else None
            for ev in layout.read_jsonl(arm_dir / "evals.jsonl"):
                if any(m not in ev for m in REWRITE_OUTCOMES):  # evaluated before these were measured
                    records = layout.eval_records(out, study, name, seed, ev.get("split", "test"), ev["step"])
                    ev = {**ev, **rewrite_outcomes(layout.read_jsonl(records), EPS)}
                rows.append(
                    {
                        "arm": name,
                        "seed": seed,
                        "split": ev.get("split", "test"),
                        **{k: ev.get(k) for k in ("step", *EVAL_METRICS)},
                        "simulations": ev.get("simulations"),
                        **train,
                        "arm_seconds": done["seconds"],
                        "warm_start": done.get("warm_start_sha256") or "not recorded",
                    }
                )
    return rows


def time_to_target(rows: list[dict], threshold: float, metric: str = "correct_rate") -> int | None:
    """First evaluated step whose ``metric`` reaches ``threshold`` (rows of one arm-seed).

    >>> time_to_target([{"step": 0, "correct_rate": 0.1}, {"step": 10, "correct_rate": 0.6}], 0.5)
    10
    """
    hits = [r["step"] for r in sorted(rows, key=lambda r: r["step"]) if (r.get(metric) or 0) >= threshold]
    return hits[0] if hits else None


DIFFERENCE_METRICS = (
    "correct_rate",
    "mean_reward",
    "pass@k",
    "wrong_rewarded_rate",
    "gap_closed",
    "compression",
    "rewrite_copy_rate",
    "rewrite_reduction_rate",
)


def _pairs(names) -> list[tuple[str, str]]:
    """The pairs of arms compared (first minus second): every arm against ``none`` (no RL) and
    every trained arm against ``binary`` (0/1 correctness, the reward every other one must beat),
    then the dense rubric against ``sparse`` and the gated rubric against both."""
    pairs = [(a, "none") for a in names if a != "none"]
    pairs += [(a, "binary") for a in names if a not in ("none", "binary")]
    pairs += [("rubric", "sparse"), ("rubric_gated", "sparse"), ("rubric_gated", "rubric")]
    return [(a, b) for a, b in pairs if a in names and b in names]


def aggregate(rows: list[dict], study: StudySettings) -> dict[str, Any]:
    """Means and 95% intervals over seeds per arm and step (held-out; the training-prompt sample
    as ``train_per_step``; each further tier in ``tier_per_step``); time-to-target on the primary
    metric of the primary tier; paired differences of the final-step metrics (same seed) with the
    smallest effect the seeds can detect, on the primary tier (``differences``) and on every
    other held-out tier (``tier_differences``)."""
    arms: dict[str, Any] = {}
    test = [r for r in rows if r.get("split", "test") == "test"]
    primary = [r for r in rows if r.get("split", "test") == study.primary_tier]
    final_step = max((r["step"] for r in test), default=0)
    metric = study.primary_metric
    for name in study.arms:
        mine = [r for r in test if r["arm"] == name]
        if not mine:
            continue
        seeds = sorted({r["seed"] for r in mine})
        steps = sorted({r["step"] for r in mine})
        of_arm = [r for r in rows if r["arm"] == name]
        judged = [r for r in primary if r["arm"] == name]
        ttt = [time_to_target([r for r in judged if r["seed"] == s], study.threshold, metric) for s in seeds]
        first = {s: next(r for r in mine if r["seed"] == s) for s in seeds}
        arms[name] = {
            "seeds": seeds,
            "per_step": _per_step(mine, steps, (*EVAL_METRICS, "simulations")),
            "train_per_step": _per_step([r for r in of_arm if r.get("split") == "train"], steps, EVAL_METRICS),
            "tier_per_step": {
                tier: _per_step([r for r in of_arm if r.get("split") == tier], steps, EVAL_METRICS)
                for tier in study.eval_tiers
            },
            "time_to_target": ttt,
            "simulations_to_target": [
                next(
                    (
                        r["simulations"]
                        for r in sorted(mine, key=lambda r: r["step"])
                        if r["seed"] == s and r["step"] == t
                    ),
                    None,
                )
                if t is not None
                else None
                for s, t in zip(seeds, ttt, strict=True)
            ],
            "seconds_per_seed": mean_ci([first[s]["arm_seconds"] for s in seeds]),
            "train": {k: mean_ci([first[s][k] for s in seeds]) for k in first[seeds[0]] if k.startswith("train/")},
        }
    start = {(r["arm"], r["seed"]): r.get("warm_start", "not recorded") for r in test}
    metrics = tuple(dict.fromkeys((*DIFFERENCE_METRICS, metric)))
    return {
        "final_step": final_step,
        "arms": arms,
        "differences": _differences(primary, arms, final_step, metrics, start),
        "tier_differences": {
            tier: _differences([r for r in rows if r.get("split", "test") == tier], arms, final_step, metrics, start)
            for tier in study.tiers()
            if tier != study.primary_tier
        },
    }


def series(arm: dict, split: str) -> dict:
    """One arm's means per evaluated step (an entry of ``aggregate()["arms"]``) on a prompt set:
    ``test`` (the held-out split), ``train`` (the training-prompt sample) or a further tier."""
    if split == "test":
        return arm["per_step"]
    if split == "train":
        return arm["train_per_step"]
    return arm.get("tier_per_step", {}).get(split, {})


def _per_step(rows: list[dict], steps: list[int], metrics: tuple[str, ...]) -> dict[int, dict]:
    """Mean and 95% interval over the rows (seeds) of each of ``steps`` that has rows."""
    out = {}
    for step in steps:
        at = [r for r in rows if r["step"] == step]
        if at:
            out[step] = {m: mean_ci([r.get(m) for r in at]) for m in metrics}
    return out


def _differences(
    rows: list[dict], arms: dict[str, Any], final_step: int, metrics: tuple[str, ...], start: dict
) -> dict[str, Any]:
    """Paired (same seed) differences at ``final_step`` of each pair of arms (:func:`_pairs`) over
    ``rows`` (one prompt set), with the MDE and the seeds at which both used one warm-start."""
    from rubriq.studies.analysis import minimum_detectable_effect

    diffs = {}
    for a, b in _pairs(list(arms)):
        common = sorted(set(arms[a]["seeds"]) & set(arms[b]["seeds"]))
        out: dict[str, Any] = {}
        for m in metrics:
            values = []
            for s in common:
                va = [r.get(m) for r in rows if r["arm"] == a and r["seed"] == s and r["step"] == final_step]
                vb = [r.get(m) for r in rows if r["arm"] == b and r["seed"] == s and r["step"] == final_step]
                if va and vb and va[0] is not None and vb[0] is not None:
                    values.append(va[0] - vb[0])
            out[m] = mean_ci(values)
            out[f"mde/{m}"] = minimum_detectable_effect(values)
        # a pair of arm-seeds that trained from two warm-starts (a rebuilt one) differs by more
        # than the reward: say which seeds are matched ("not recorded" counts as one warm-start)
        same = [s for s in common if start[(a, s)] == start[(b, s)]]
        diffs[f"{a} - {b}"] = {"seeds": common, "same_warm_start": same, "step": final_step, **out}
    return diffs


def correlations(out: Path, study: StudySettings, final_step: int) -> dict[str, Any]:
    """The five dimensions' correlation and effective number (``analysis.dimension_correlation``)
    per arm over its finished arm-seeds' training completions (every seed, per task family and all) and over the
    held-out samples at the final step (and at step 0, shared)."""
    from rubriq.studies.analysis import dimension_correlation, family_of_spec

    result: dict[str, Any] = {"train": {}, "held_out": {}}
    for name in study.arms:
        finished = [arm_dir for _, arm_dir in layout.finished_arm_seeds(out, study, name)]
        scored = []
        for arm_dir in finished:
            scored += layout.read_jsonl(arm_dir / "train_scores.jsonl")
        parsed = [r for r in scored if r.get("error_type") is None]
        if parsed:
            fams = sorted({r["family"] for r in parsed})
            result["train"][name] = {
                "all": dimension_correlation([r["scores"] for r in parsed]),
                **{f: dimension_correlation([r["scores"] for r in parsed if r["family"] == f]) for f in fams},
            }
        held = []
        for arm_dir in finished:
            held += layout.read_jsonl(layout.step_records(arm_dir, "test", final_step))
        if name == "none" or not held:
            continue
        result["held_out"][name] = _by_family(held, dimension_correlation, family_of_spec)
    step0 = []
    for seed in study.seeds:
        step0 += layout.read_jsonl(layout.step0_records(out, "test", seed))
    if step0:
        result["held_out"]["step 0 (warm-start)"] = _by_family(step0, dimension_correlation, family_of_spec)
    return result


def _by_family(records: list[dict], corr, family_of) -> dict[str, Any]:
    parsed = [r for r in records if (r.get("result") or {}).get("error_type") is None and r.get("result")]
    fams = sorted({"rewrite" if family_of(r.get("target") or "") == "rewrite" else "synthesis" for r in parsed})
    out = {"all": corr([r["result"]["scores"] for r in parsed])}
    for f in fams:
        out[f] = corr(
            [
                r["result"]["scores"]
                for r in parsed
                if ("rewrite" if family_of(r.get("target") or "") == "rewrite" else "synthesis") == f
            ]
        )
    return out


def paired_from_step0(out: Path, study: StudySettings, final_step: int) -> dict[str, Any]:
    """Per finished arm-seed (the control left out: its later steps are its step 0) and prompt
    set (``test``, ``train``, each further tier): the final step's change from step 0 on the same
    prompts (``analysis.paired_change``), with the correct rewrites' verbatim copies and T
    reductions (``analysis.rewrite_copies``)."""
    from rubriq.studies.analysis import paired_change, rewrite_copies

    rows = _rows(out / "data", study.split) + _rows(out / "data", "train")
    t_pyzx = {"test": _t_pyzx(rows), "train": _t_pyzx(rows)}
    for tier in study.eval_tiers:
        t_pyzx[tier] = _t_pyzx(_rows(out / "tiers" / tier, "test"))
    found: dict[str, Any] = {}
    for name, arm in study.arms.items():
        if arm.reward == "none":
            continue
        for seed, arm_dir in layout.finished_arm_seeds(out, study, name):
            for split, gaps in t_pyzx.items():
                before = layout.read_jsonl(layout.step0_records(out, split, seed))
                after = layout.read_jsonl(layout.step_records(arm_dir, split, final_step))
                if before and after:
                    change = paired_change(before, after, gaps, EPS)
                    prompts = len({r.get("prompt_id") for r in after})
                    copies = {"step0": rewrite_copies(before, EPS), "final": rewrite_copies(after, EPS)}
                    found.setdefault(name, {}).setdefault(str(seed), {})[split] = {
                        **change,
                        "prompts": prompts,
                        "rewrite_copies": copies,
                    }
    return found


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """The proportion k / n with its Wilson score interval (scipy's ``binomtest``).

    >>> [round(v, 3) for v in wilson(17, 192)]
    [0.089, 0.056, 0.137]
    """
    if n <= 0:
        return (None, None, None)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return (k / n, float(ci.low), float(ci.high))


def reductions_by_prompt(records: list[dict], eps: float = EPS) -> dict[str, list[float]]:
    r"""Per prompt (``prompt_id``) of the rewrite samples among ``records`` (the others are
    skipped): 1.0 for each sample that is a correct reduction, else 0.0
    (:func:`rubriq.studies.analysis.rewrite_outcome`).

    >>> spec = '{"algorithm": "circuit", "qasm": "qreg q[1];\\nt q[0];\\nt q[0];\\n"}'
    >>> rec = lambda text, f: {"prompt_id": "a", "target": spec, "t0": 2, "text": text,
    ...                        "result": {"parsed": True, "average_fidelity": f, "t_count": 0}}
    >>> reductions_by_prompt([rec("qreg q[1];\ns q[0];", 1.0), rec("qreg q[1];", 0.5)])
    {'a': [1.0, 0.0]}
    """
    from rubriq.studies.analysis import rewrite_outcome

    by: dict[str, list[float]] = {}
    for r in records:
        outcome = rewrite_outcome(r, eps)
        if outcome is not None:
            by.setdefault(str(r.get("prompt_id")), []).append(1.0 if outcome == "reduction" else 0.0)
    return by


def reduction_change(
    before: dict[str, list[float]], after: dict[str, list[float]]
) -> tuple[float | None, float | None, float | None]:
    """The paired change of the correct-reduction rate from ``before`` to ``after``
    (:func:`reductions_by_prompt` of each): the mean over the prompts both hold of the
    per-prompt rate after minus before, with its 95% t-interval over prompts (samples of one
    prompt are not independent, prompts are).

    >>> reduction_change({"a": [0.0, 0.0], "b": [1.0, 0.0]}, {"a": [1.0, 0.0], "b": [1.0, 0.0]})[0]
    0.25
    """
    return mean_ci([statistics.fmean(after[p]) - statistics.fmean(before[p]) for p in after if p in before])


def reductions_per_step(out: Path, study: StudySettings) -> list[dict[str, Any]]:
    """Per finished arm-seed, prompt set and evaluated step: the correct reductions (correct with
    T < T0) among the rewrite samples with their Wilson interval, the prompts with at least one,
    and the per-prompt paired change of the reduction rate from step 0 (mean over prompts, 95%
    t-interval over prompts; with ``same_eval_seed`` both steps drew the same random numbers)."""
    found = []
    for name in study.arms:
        for seed, _ in layout.finished_arm_seeds(out, study, name):
            for split in ["test", *(["train"] if study.train_eval_prompts else []), *study.eval_tiers]:
                base = reductions_by_prompt(layout.read_jsonl(layout.step0_records(out, split, seed)))
                for step in study.tier_steps(split):
                    records = layout.read_jsonl(layout.eval_records(out, study, name, seed, split, step))
                    if not records:
                        continue
                    now = reductions_by_prompt(records)
                    flat = [v for vs in now.values() for v in vs]
                    change = reduction_change(base, now)
                    found.append(
                        {
                            "arm": name,
                            "seed": seed,
                            "split": split,
                            "step": step,
                            "reductions": int(sum(flat)),
                            "samples": len(flat),
                            "rate": wilson(int(sum(flat)), len(flat)),
                            "prompts_with_one": sum(1 for vs in now.values() if any(vs)),
                            "prompts": len(now),
                            "change_from_step0": change if step else (0.0, 0.0, 0.0),
                        }
                    )
    return found


def _minus(key: str, first: dict, last: dict) -> float | None:
    """``last[key] - first[key]``; None where either is not measured."""
    a, b = last.get(key), first.get(key)
    return None if a is None or b is None else a - b


def headline(out: Path, study: StudySettings, rows: list[dict], split: str = "test") -> dict[str, Any]:
    """The study in one table: per trained arm at the final evaluated step of ``split`` (and the
    warm-start: the step-0 evaluation of every seed kept, which the control ``none`` repeats), the
    correct-reduction rate (mean and 95% t-interval over seeds), the reductions pooled over seeds
    (``reductions`` of ``samples``), the change from the same seed's step 0 (same prompts, same
    sampling seed) as a mean over seeds with its t-interval and MDE and as a mean over prompts of
    each prompt's change averaged over the seeds (t-interval over prompts), ``gap_closed`` and its
    change over seeds, and the copy and wrong rates (means over seeds).

    ``rows``: :func:`collect`'s rows. A policy with no row at the final step is left out."""
    from rubriq.studies.analysis import minimum_detectable_effect

    on = [r for r in rows if r.get("split", "test") == split]
    final = max((r["step"] for r in on), default=0)
    start = {r["seed"]: r for r in on if r["step"] == 0}
    policies: dict[str, list[tuple[int, dict, dict]]] = {"warm-start": [(s, start[s], start[s]) for s in sorted(start)]}
    for name, arm in study.arms.items():
        if arm.reward == "none":
            continue
        mine = {(r["seed"], r["step"]): r for r in on if r["arm"] == name}
        kept = [(s, mine[(s, 0)], mine[(s, final)]) for s in study.seeds if (s, 0) in mine and (s, final) in mine]
        if kept:
            policies[name] = kept
    found: dict[str, Any] = {}
    for name, kept in policies.items():
        trained = name != "warm-start"
        by_prompt: dict[str, list[float]] = {}
        reductions = samples = 0
        for seed, _, _ in kept:
            before = reductions_by_prompt(layout.read_jsonl(layout.step0_records(out, split, seed)))
            after = before
            if trained:
                after = reductions_by_prompt(
                    layout.read_jsonl(layout.eval_records(out, study, name, seed, split, final))
                )
            reductions += int(sum(v for vs in after.values() for v in vs))
            samples += sum(len(vs) for vs in after.values())
            for p in after.keys() & before.keys():
                by_prompt.setdefault(p, []).append(statistics.fmean(after[p]) - statistics.fmean(before[p]))
        change = [_minus("rewrite_reduction_rate", first, last) for _, first, last in kept]
        found[name] = {
            "seeds": [s for s, _, _ in kept],
            "step": final if trained else 0,
            "reductions": reductions,
            "samples": samples,
            "reduction_rate": mean_ci([last.get("rewrite_reduction_rate") for _, _, last in kept]),
            "change": mean_ci(change) if trained else (None, None, None),
            "mde/change": minimum_detectable_effect(change) if trained else None,
            "change_by_prompt": mean_ci([statistics.fmean(v) for v in by_prompt.values()])
            if trained
            else (None, None, None),
            "prompts": len(by_prompt),
            "gap_closed": mean_ci([last.get("gap_closed") for _, _, last in kept]),
            "gap_closed_change": mean_ci([_minus("gap_closed", first, last) for _, first, last in kept])
            if trained
            else (None, None, None),
            "copy": mean_ci([last.get("rewrite_copy_rate") for _, _, last in kept])[0],
            "wrong": mean_ci([last.get("rewrite_wrong_rate") for _, _, last in kept])[0],
        }
    return found


def training_groups(out: Path, study: StudySettings, window: int = 10) -> dict[str, list[dict[str, Any]]]:
    """Per finished arm-seed that logged its groups (``groups.jsonl``): the group statistics
    (:mod:`rubriq.studies.groups`) with TRL's entropy and KL, averaged over windows of ``window``
    steps; {} for studies run before the groups were logged."""
    from rubriq.studies.groups import window_means

    keys = (
        "groups_with_reduction",
        "adv_reduction",
        "adv_copy",
        "adv_wrong",
        "reduction_rate",
        "copy_rate",
        "wrong_rate",
        "entropy",
        "kl",
    )
    found: dict[str, list[dict[str, Any]]] = {}
    for name in study.arms:
        for seed, arm_dir in layout.finished_arm_seeds(out, study, name):
            groups = layout.read_jsonl(arm_dir / "groups.jsonl")
            if not groups:
                continue
            logged = [r for r in layout.read_jsonl(arm_dir / "metrics.jsonl") if "train_runtime" not in r]
            trl = {int(r["step"]): r for r in logged if isinstance(r.get("step"), int)}
            rows = [{**g, **{k: trl.get(g["step"], {}).get(k) for k in ("entropy", "kl")}} for g in groups]
            found[f"{name} seed {seed}"] = window_means(rows, keys, window)
    return found


def _rows(folder: Path, split: str) -> list[dict]:
    """A split's rows ([] where the folder or split is missing, as in committed results)."""
    from rubriq.data.prompts import load_split

    try:
        return load_split(folder, split)
    except (OSError, ValueError):
        return []


def _t_pyzx(rows: list[dict]) -> dict[str, int]:
    return {str(r["id"]): int(r["t_pyzx"]) for r in rows if r.get("t_pyzx") is not None}


def warm_starts(out: Path, study: StudySettings) -> dict[str, list[str]]:
    """Finished trained arm-seeds ("ARM sS") by the SHA-256 of the warm-start they trained from
    (``done.json``; "not recorded" for arm-seeds that ran before the field existed)."""
    found: dict[str, list[str]] = {}
    for name, arm in study.arms.items():
        if arm.reward == "none":
            continue
        for seed, arm_dir in layout.finished_arm_seeds(out, study, name):
            sha = json.loads((arm_dir / "done.json").read_text()).get("warm_start_sha256") or "not recorded"
            found.setdefault(sha, []).append(f"{name} s{seed}")
    return found


__all__ = [
    "DIFFERENCE_METRICS",
    "aggregate",
    "collect",
    "correlations",
    "headline",
    "paired_from_step0",
    "reduction_change",
    "reductions_by_prompt",
    "series",
    "time_to_target",
    "warm_starts",
]
