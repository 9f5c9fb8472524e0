"""Stage 3, the pilot: with ``filter_prompts``, the warm-start samples a group of completions per
training prompt before any arm trains, and the prompts whose group would have all-equal rewards
under every arm's reward (always solved with the same T, or never solved with the same wrong
score: nothing for GRPO to rank) are dropped, for every arm alike (an offline version of DAPO's
dynamic sampling).  ``OUT/filter.json`` records the decision and, per arm, the fraction of such
zero-variance groups before training; it is computed once and reused on resume.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import statistics
from pathlib import Path

from rubriq.config import ConfigError

log = logging.getLogger(__name__)


def arm_reward_values(results: list, arm, scorer_for_arm) -> list[float]:
    """Each result's reward under ``arm`` (the arm's own training reward): the rubric (re-scored
    by ``scorer_for_arm`` when the arm changes rubric settings), 1/T or 1 if correct, else 0."""
    from rubriq.evaluator.result import is_correct

    if arm.reward == "rubric":
        return [float(r.reward) for r in scorer_for_arm(arm)]
    out = []
    for r in results:
        ok = is_correct(r)
        if arm.reward == "sparse_correct":
            out.append(1.0 if ok else 0.0)
        else:
            out.append(0.0 if not ok or r.t_count is None else (1.0 if r.t_count == 0 else 1.0 / r.t_count))
    return out


def filter_training_prompts(study, data, warm, out: Path):
    """``data`` with the training prompts every arm trains on: with ``filter_prompts``, those
    whose pilot group (``filter_samples`` completions of the warm-start at the training
    temperature) has unequal rewards under at least one arm's reward, saved to
    ``OUT/data_filtered`` (the training settings read them from there)."""
    if not study.filter_prompts:
        return data
    from rubriq.data.prompts import save_splits

    path = out / "filter.json"
    if not path.is_file():
        info = pilot(study, data.settings, warm, data.train_rows)
        path.write_text(json.dumps(info, indent=2))
    info = json.loads(path.read_text())
    kept_ids = set(info["kept"])
    kept = [r for r in data.train_rows if r["id"] in kept_ids]
    if not kept:
        raise ConfigError(
            f"{path}: no training prompt gives a reward signal on the pilot (every group has equal rewards "
            "under every arm): nothing to train on; a stronger warm-start or other prompts are needed"
        )
    folder = out / "data_filtered"
    if not (folder / "train.jsonl").is_file():
        save_splits({"train": kept, "validation": [], "test": data.eval_rows}, folder)
    log.info("difficulty filter: %d of %d training prompts kept (%s)", len(kept), len(data.train_rows), path)
    settings = data.settings
    settings = dataclasses.replace(settings, data=dataclasses.replace(settings.data, dataset=str(folder)))
    return dataclasses.replace(data, settings=settings, train_rows=kept)


def pilot(study, settings, warm, rows: list[dict]) -> dict:
    """The pilot's groups scored under every trained arm's reward: which prompts to keep, the
    zero-variance fraction per arm before and after the filter, and the warm-start's solve rates."""
    from rubriq.evaluation.sampling import generate
    from rubriq.evaluator.batch import BatchScorer
    from rubriq.evaluator.result import is_correct
    from rubriq.models.generation import GenerationFlags, install_prefix_generate

    model = install_prefix_generate(
        warm.load(), warm.tokenizer, GenerationFlags.of_generate(settings.generation.end_after_code_block)
    )
    records = generate(
        model,
        warm.tokenizer,
        rows,
        settings.sampling().replace(samples=study.filter_samples, seed=4242),  # GRPO's groups, as training samples them
        batch_size=study.batch_size,
        progress=False,
        sampler="generate",  # transformers' generate, as the committed pilots were drawn
    )
    texts = [r.text for r in records]
    specs: list[str | dict] = [r.target or "" for r in records]
    with BatchScorer(settings.rubric) as base:
        results = base.results(texts, specs)

    def rescored(arm) -> list:
        if not arm.rubric:
            return results
        with BatchScorer(arm.rubric_config(settings.rubric)) as scorer:
            return scorer.results(texts, specs)

    arms = {name: arm for name, arm in study.arms.items() if arm.reward != "none"}
    rewards = {name: arm_reward_values(results, arm, rescored) for name, arm in arms.items()}
    n = study.filter_samples
    ids = [r["id"] for r in rows]
    flat: dict[str, list[bool]] = {}
    for name, values in rewards.items():
        flat[name] = [statistics.pstdev(values[i * n : (i + 1) * n]) <= 1e-12 for i in range(len(rows))]
    kept = [ids[i] for i in range(len(rows)) if not all(flat[name][i] for name in flat)] if flat else ids
    solved = [
        statistics.fmean(1.0 if is_correct(r) else 0.0 for r in results[i * n : (i + 1) * n]) for i in range(len(rows))
    ]
    kept_set = set(kept)
    return {
        "samples_per_prompt": n,
        "prompts": len(rows),
        "kept_prompts": len(kept),
        "kept": kept,
        "zero_variance_before_filter": {name: statistics.fmean(v) for name, v in flat.items()},
        "zero_variance_after_filter": {
            name: statistics.fmean(f for f, i in zip(v, ids, strict=True) if i in kept_set) if kept else None
            for name, v in flat.items()
        },
        "solve_rate_mean": statistics.fmean(solved) if solved else None,
        "solve_rate_quartiles": statistics.quantiles(solved, n=4) if len(solved) > 1 else solved,
        "solved_20_70": statistics.fmean(1.0 if 0.2 <= s <= 0.7 else 0.0 for s in solved) if solved else None,
    }


__all__ = ["arm_reward_values", "filter_training_prompts", "pilot"]
