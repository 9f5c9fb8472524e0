"""Stage 4, the arms: one GRPO run per (arm, seed) from the warm-start, with the arm's reward,
the same prompts and the same step budget, evaluated at the study's steps as it trains
(:mod:`rubriq.studies.evaluate`); the control ``none`` trains nothing.  An arm-seed writes its
files as it goes and ``done.json`` last, so a stopped study loses at most the arm-seed it was in
(a finished one is skipped, an unfinished one restarted).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path

from rubriq.config import ConfigError
from rubriq.extract.files import open_record
from rubriq.studies import layout
from rubriq.studies.evaluate import step0_evaluation
from rubriq.studies.warm_start import warm_start_fingerprint
from rubriq.tables import fmt

log = logging.getLogger(__name__)


def check_arm_rubrics(study, settings) -> None:
    """Merge every arm's rubric overrides into the training config's rubric before anything
    trains, so that a bad one (an unknown field, a wrong type) stops the study at its start,
    naming the arm, not when that arm's turn comes."""
    for name, arm in study.arms.items():
        try:
            arm.rubric_config(settings.rubric)
        except ConfigError as exc:
            raise ConfigError(f"arm {name!r}: rubric {arm.rubric}: {exc}") from None


def arm_training_settings(settings, arm, seed: int, steps: int, arm_dir: Path):
    """The training config of one arm-seed: the arm's reward and rubric, GRPO's seed and step
    budget, no SFT (the warm-start is given), its output in ``arm_dir``."""
    grpo = settings.grpo.replace(seed=seed, max_steps=steps, save_strategy="no", logging_steps=1)
    return dataclasses.replace(
        settings,
        output_dir=str(arm_dir),
        rubric=arm.rubric_config(settings.rubric),
        grpo=grpo,
        reward=dataclasses.replace(settings.reward, kind=arm.reward),
        sft=dataclasses.replace(settings.sft, enabled=False),
    )


def run_arm(study, name: str, seed: int, settings, warm, evaluators: list, out: Path) -> dict:
    """Train (or, for the control, only re-sample) one arm with one seed; return its done.json."""
    arm = study.arms[name]
    arm_dir = layout.arm_dir(out, name, seed)
    done = arm_dir / "done.json"
    if done.is_file():
        return json.loads(done.read_text())
    for stale in ("metrics.jsonl", "evals.jsonl", "train_scores.jsonl", "groups.jsonl"):
        (arm_dir / stale).unlink(missing_ok=True)
    arm_dir.mkdir(parents=True, exist_ok=True)
    evals = arm_dir / "evals.jsonl"
    for ev in evaluators:
        layout.append_jsonl(evals, {**step0_evaluation(ev, warm, out, seed), "simulations": 0})
    start = time.perf_counter()
    later = [s for s in study.eval_steps() if s > 0]
    if arm.reward == "none":
        # the control's policy never changes: its value at every step is its step-0 evaluation
        # (the same samples; re-sampling would only add draws of the same policy)
        for ev in evaluators:
            step0 = json.loads(layout.step0_path(out, ev.split, seed).read_text())
            for step in later:
                if step in study.tier_steps(ev.split):
                    layout.append_jsonl(evals, {**step0, "step": step, "simulations": 0, "eval_seconds": 0.0})
        simulations = 0
    else:
        simulations = _train(study, name, seed, settings, warm, evaluators, arm_dir, later)
    result = {
        "arm": name,
        "seed": seed,
        "warm_start_sha256": warm_start_fingerprint(out, model=warm.model_dir)["sha256"],
        "seconds": time.perf_counter() - start,
        "simulations": simulations,
        "steps": study.steps if arm.reward != "none" else 0,
    }
    done.write_text(json.dumps(result, indent=2))
    return result


def _train(study, name: str, seed: int, settings, warm, evaluators: list, arm_dir: Path, later: list[int]) -> int:
    """GRPO for one arm-seed, evaluated at the ``later`` steps; its policy saved to ``final/``;
    returns the number of completions it scored (simulations)."""
    from rubriq.reward import RubricRewards
    from rubriq.training.train_rubriq import build

    arm_cfg = arm_training_settings(settings, study.arms[name], seed, study.steps, arm_dir)
    rewards = RubricRewards(arm_cfg.rubric, workers=arm_cfg.reward.workers)
    rewards.on_batch = _TrainingScores(arm_dir, study.arms[name], rewards)
    callback = _evaluation_callback(study, name, seed, evaluators, arm_dir, later, rewards)
    trainer = build(arm_cfg, policy=(warm.tokenizer, warm.load()), rewards=rewards, callbacks=[callback])
    trainer.train()
    trainer.save_model(str(arm_dir / "final"))  # the policy (LoRA adapter), for `rubriq evaluate` / the leaderboard
    simulations = int(rewards.stats["evaluated"])
    rewards.close()
    return simulations


class _TrainingScores:
    """``RubricRewards.on_batch``: every training completion's five scores, reward, correctness,
    T, what became of it (``outcome``: reduction, copy, wrong, other_correct; None for synthesis),
    the arm's own reward and GRPO's advantage, one JSONL row each (``train_scores.jsonl``), and one
    row per batch (= per step here: one generation batch per optimizer step) of what the groups
    held (``groups.jsonl``, :func:`rubriq.studies.groups.batch_groups`)."""

    def __init__(self, arm_dir: Path, arm, rewards) -> None:
        self.path, self.groups_path, self.arm, self.rewards, self.batches = (
            arm_dir / "train_scores.jsonl",
            arm_dir / "groups.jsonl",
            arm,
            rewards,
            0,
        )

    def __call__(self, results, targets, prompts, completions=None) -> None:
        from rubriq.evaluator.result import is_correct
        from rubriq.studies.analysis import family_of_spec, rewrite_outcome
        from rubriq.studies.groups import batch_groups
        from rubriq.studies.pilot import arm_reward_values

        self.batches += 1
        eps = 1 - self.rewards.config.fidelity.correct_threshold
        texts = completions if completions is not None else [""] * len(results)
        train = arm_reward_values(results, self.arm, lambda _arm: results)
        keys = [json.dumps(p, sort_keys=True, default=str) for p in prompts] if prompts else list(targets)
        rows = []
        for r, t, text, reward, key in zip(results, targets, texts, train, keys, strict=True):
            record = {"target": t, "t0": self.rewards.t0(t), "text": text, "result": r.to_dict()}
            rows.append(
                {
                    "batch": self.batches,
                    "family": family_of_spec(t),
                    "scores": r.scores,
                    "reward": r.reward,
                    "train_reward": reward,
                    "correct": is_correct(r),
                    "t_count": r.t_count,
                    "outcome": rewrite_outcome(record, eps) if completions is not None else None,
                    "error_type": r.error_type,
                    "group": key,
                }
            )
        summary = batch_groups(rows)
        with open_record(self.path, "a") as fh:  # 0600: completions and rewards
            for row in rows:
                row.pop("group")
                fh.write(json.dumps(row) + "\n")
        layout.append_jsonl(self.groups_path, {"step": self.batches, **summary})


def _evaluation_callback(study, name: str, seed: int, evaluators: list, arm_dir: Path, later: list[int], rewards):
    """A ``TrainerCallback`` that runs every evaluation at the ``later`` steps and appends its row
    (with the simulations so far) to ``evals.jsonl``."""
    from transformers import TrainerCallback

    evals = arm_dir / "evals.jsonl"

    class Evaluations(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            step = state.global_step
            if step not in later:
                return
            for ev in evaluators:
                if step not in study.tier_steps(ev.split):
                    continue
                row = ev(model, seed, step, layout.step_records(arm_dir, ev.split, step))
                layout.append_jsonl(evals, {**row, "simulations": rewards.stats["evaluated"]})
                log.info(
                    "%s seed %d step %d (%s): correct %.3f, reward %.3f, %s %s",
                    name,
                    seed,
                    step,
                    ev.split,
                    row["correct_rate"],
                    row["mean_reward"],
                    study.primary_metric,
                    fmt(row.get(study.primary_metric)),
                )

    return Evaluations()


__all__ = ["arm_training_settings", "check_arm_rubrics", "run_arm"]
