"""Convergence study: does GRPO on the rubric improve a policy, and faster than a sparse reward?

    rubriq study convergence configs/studies/convergence_cpu.yaml

One shared SFT warm-start, then one *arm* per reward, each over several seeds, every arm from
the same checkpoint with the same prompts and the same step budget:

* ``rubric``: the paper's reward R = sum_d w_d S_d;
* ``rubric_gated``: the same with ``fidelity_gating: multiplicative``;
* ``sparse``: Sparse-GRPO (1/T(c) for a correct circuit, else 0);
* ``none``: no RL at all: the SFT policy (the control); its policy never changes, so its value
  at every evaluated step is its step-0 evaluation (the same samples).

Every arm is evaluated on the held-out split (targets never trained on: splits are by target)
at steps 0, ``eval_every``, 2 ``eval_every``, ... ``steps`` by **sampling** ``samples``
completions per prompt at the training temperature, and every evaluation is scored with the
training config's rubric (the paper's reward), one yardstick for all arms.  The evaluation
sampling seed depends on (seed, step) only, so at a given step all arms draw with the same
seed; step 0 (the SFT policy for every arm) is evaluated once per seed and shared.

Everything is written as it goes, so a stopped study loses at most one arm-seed
(a finished arm-seed has ``done.json`` and is skipped; an unfinished one is restarted)::

    OUT/data/                 the prompt splits            OUT/sft/model/   the warm-start
    OUT/step0/seedS.json      the shared step-0 evaluation
    OUT/arms/ARM/seedS/       metrics.jsonl (training log), evals.jsonl (one line per
                              evaluation), records_stepN.jsonl (scored samples), done.json
    OUT/per_step.csv  OUT/summary.json  OUT/summary.md  OUT/curves.png  OUT/training.png

Means over seeds carry 95% t-intervals (:func:`mean_ci`); time-to-target is the first
evaluated step at which the held-out correct rate reaches ``target_correct_rate``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rubriq.config import ConfigError, RubricConfig, from_dict, load_yaml_mapping
from rubriq.evaluation.metrics import mean_ci
from rubriq.evaluation.records import RecordLike
from rubriq.tables import fmt, format_ci, markdown_table

log = logging.getLogger(__name__)

DEFAULT_ARMS = {
    "rubric": {"reward": "rubric"},
    "rubric_gated": {"reward": "rubric", "rubric": {"fidelity_gating": "multiplicative"}},
    "sparse": {"reward": "sparse_inverse_t"},
    "none": {"reward": "none"},
}
EVAL_METRICS = (
    "mean_reward",
    "correct_rate",
    "pass@k",
    "mean_t_correct",
    "wrong_rewarded_rate",
    "trivial_rate",
    "parse_rate",
    "mean_fidelity",
)
"""Held-out metrics per evaluation (``pass@k`` for k = ``samples``)."""
TRAIN_METRICS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "entropy",
    "correct_rate",
    "wrong_rewarded_rate",
    "completions/mean_length",
    "step_time",
)
"""Training-log metrics averaged over an arm-seed's steps (TRL's names and RubriQ's batch metrics)."""


@dataclass(frozen=True)
class ArmSettings:
    """One reward to train with."""

    reward: Literal["rubric", "sparse_inverse_t", "sparse_correct", "none"] = "rubric"
    """rubric: the rubric (with the overrides below); sparse_*: Sparse-GRPO; none: no RL (control)."""
    rubric: dict = field(default_factory=dict)
    """Rubric fields that differ from the training config's (e.g. ``fidelity_gating``)."""


@dataclass(frozen=True)
class StudySettings:
    """A convergence study; YAML maps onto it one to one (``configs/studies/``)."""

    train_config: str
    """Training YAML (model, data, LoRA, SFT, GRPO settings), relative to the study file."""
    output_dir: str = "runs/studies/convergence"
    arms: dict = field(default_factory=lambda: dict(DEFAULT_ARMS))
    """Arm name -> :class:`ArmSettings` fields."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """GRPO seeds (sampling and data order); the warm-start is shared."""
    steps: int = 30
    """GRPO steps per arm-seed."""
    eval_every: int = 10
    samples: int = 4
    """Held-out completions per prompt (k of pass@k)."""
    temperature: float = 0.0
    """Held-out sampling temperature; 0: the training temperature (grpo.temperature)."""
    top_p: float = 0.0
    """0: the training top_p (grpo.top_p, else 1)."""
    max_new_tokens: int = 0
    """0: grpo.max_completion_length."""
    batch_size: int = 16
    split: str = "test"
    max_prompts: int = 0
    """Evaluate on at most this many held-out prompts (0: all)."""
    target_correct_rate: float = 0.5
    """Time-to-target threshold on the held-out correct rate (F_avg >= fidelity.correct_threshold)."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.eval_every < 1:
            raise ConfigError("steps and eval_every must be >= 1")
        if self.samples < 2:
            raise ConfigError("samples must be >= 2: the study evaluates by sampling, not greedy decoding")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds must be distinct and not empty, got {list(self.seeds)}")
        if not self.arms:
            raise ConfigError("a study needs at least one arm")
        for name, arm in self.arms.items():
            if not isinstance(arm, ArmSettings):
                raise ConfigError(f"arm {name!r} is not an ArmSettings")

    @classmethod
    def from_yaml(cls, path: str | Path) -> StudySettings:
        path = Path(path)
        data = load_yaml_mapping(path)
        arms = data.get("arms", DEFAULT_ARMS)
        if not isinstance(arms, dict):
            raise ConfigError(f"{path}: arms must map names to settings")
        data["arms"] = {str(name): from_dict(ArmSettings, arm or {}) for name, arm in arms.items()}
        if "train_config" not in data:
            raise ConfigError(f"{path}: train_config (a training YAML) is required")
        data["train_config"] = str((path.parent / data["train_config"]).resolve())
        return from_dict(cls, data)

    def eval_steps(self) -> list[int]:
        """0, eval_every, 2 eval_every, ... and the last step."""
        return sorted({0, *range(self.eval_every, self.steps + 1, self.eval_every), self.steps})


def eval_seed(seed: int, step: int) -> int:
    """Sampling seed of the held-out evaluation at ``step`` (equal for every arm)."""
    return 1_000_003 * (seed + 1) + step


# -- one evaluation -------------------------------------------------------------------------------
def held_out_metrics(records: Sequence[RecordLike], k: int, eps: float) -> dict[str, Any]:
    """EVAL_METRICS of scored records (see docs/metrics.md)."""
    from rubriq.evaluation.metrics import summarize
    from rubriq.evaluator.result import is_correct

    s = summarize(records, eps, ks=(k,))
    t_correct = [r["result"]["t_count"] for r in records if is_correct(r["result"], 1 - eps)]
    return {
        "mean_reward": s["mean_reward"],
        "correct_rate": s["correct_rate"],
        "pass@k": s.get(f"pass@{k}"),
        "mean_t_correct": statistics.fmean(t_correct) if t_correct else None,
        "wrong_rewarded_rate": s["wrong_rewarded_rate"],
        "trivial_rate": s["trivial_rate"],
        "parse_rate": s["parse_rate"],
        "mean_fidelity": s["mean_fidelity"],
        "completions": s["completions"],
    }


class _Evaluator:
    """Samples and scores a policy on the held-out rows without disturbing training's RNG."""

    def __init__(self, study: StudySettings, settings, tokenizer, rows: list[dict]) -> None:
        grpo = settings.grpo
        self.study, self.tokenizer, self.rows = study, tokenizer, rows
        self.rubric: RubricConfig = settings.rubric
        self.eps = 1 - settings.rubric.fidelity.correct_threshold
        self.temperature = study.temperature or float(grpo.get("temperature", 1.0))
        self.top_p = study.top_p or float(grpo.get("top_p", 1.0))
        self.max_new_tokens = study.max_new_tokens or int(grpo.get("max_completion_length", 256))

    def __call__(self, model, seed: int, step: int, records_path: Path | None = None) -> dict[str, Any]:
        import torch

        from rubriq.evaluation.sampling import generate, save_records, score

        state, training = torch.random.get_rng_state(), model.training
        start = time.perf_counter()
        try:
            records = generate(
                model,
                self.tokenizer,
                self.rows,
                samples=self.study.samples,
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                batch_size=self.study.batch_size,
                seed=eval_seed(seed, step),
                progress=False,
            )
        finally:
            torch.random.set_rng_state(state)
            model.train(training)
        scored = score(records, self.rubric)
        if records_path is not None:
            save_records(scored, records_path)
        return {
            "step": step,
            **held_out_metrics(scored, self.study.samples, self.eps),
            "eval_seconds": time.perf_counter() - start,
        }


# -- the study ------------------------------------------------------------------------------------
def _append(path: Path, row: dict) -> None:
    from rubriq.training.callbacks import append_jsonl

    path.parent.mkdir(parents=True, exist_ok=True)
    append_jsonl(path, row)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _prepare(study: StudySettings, out: Path):
    """Training settings rooted in ``out``, the data, and the shared warm-start on disk."""
    from rubriq.training.config import TrainSettings
    from rubriq.training.models import EMBEDDED, load_model, load_tokenizer, prepare_embedded
    from rubriq.training.train_rubriq import load_base, load_rows, warm_start

    settings = TrainSettings.from_yaml(study.train_config)
    if settings.algorithm != "grpo":
        raise ConfigError(f"{study.train_config}: the convergence study compares GRPO rewards (algorithm: grpo)")
    settings = dataclasses.replace(
        settings, output_dir=str(out), data=dataclasses.replace(settings.data, dataset=str(out / "data"))
    )
    if settings.model.name_or_path == EMBEDDED and not settings.model.tiny:
        prepare_embedded()
    train_rows = load_rows(settings)
    eval_rows = load_rows(settings, study.split)
    if study.max_prompts:
        eval_rows = eval_rows[: study.max_prompts]
    if not eval_rows:
        raise ConfigError(f"the {study.split!r} split of {out / 'data'} is empty: nothing held out to evaluate on")
    sft_model = out / "sft" / "model"
    if not (sft_model / "config.json").is_file():
        tokenizer, model = load_base(settings)
        if settings.sft.enabled:
            log.info("SFT warm-start on %d training prompts", len(train_rows))
            model = warm_start(settings, tokenizer, model)
        else:
            model.save_pretrained(sft_model)
            tokenizer.save_pretrained(sft_model)
    tokenizer = load_tokenizer(settings.model.name_or_path)
    return settings, tokenizer, eval_rows, lambda: load_model(str(sft_model))


def _arm_settings(settings, arm: ArmSettings, seed: int, steps: int, arm_dir: Path):
    from rubriq.training.config import deep_merge

    rubric = RubricConfig.from_dict(deep_merge(dataclasses.asdict(settings.rubric), arm.rubric))
    grpo = {**settings.grpo, "seed": seed, "max_steps": steps, "save_strategy": "no", "logging_steps": 1}
    return dataclasses.replace(
        settings,
        output_dir=str(arm_dir),
        rubric=rubric,
        grpo=grpo,
        reward=dataclasses.replace(settings.reward, kind=arm.reward),
        sft=dataclasses.replace(settings.sft, enabled=False),
    )


def _step0(study: StudySettings, evaluate: _Evaluator, load_sft, out: Path, seed: int) -> dict:
    path = out / "step0" / f"seed{seed}.json"
    if path.is_file():
        return json.loads(path.read_text())
    row = evaluate(load_sft(), seed, 0, out / "step0" / f"records_seed{seed}.jsonl")
    path.write_text(json.dumps(row, indent=2))
    return row


def run_arm(
    study: StudySettings, name: str, seed: int, settings, tokenizer, evaluate: _Evaluator, load_sft, out: Path
) -> dict:
    """Train (or, for the control, only re-sample) one arm with one seed; return its done.json."""
    arm = study.arms[name]
    arm_dir = out / "arms" / name / f"seed{seed}"
    done = arm_dir / "done.json"
    if done.is_file():
        return json.loads(done.read_text())
    for stale in ("metrics.jsonl", "evals.jsonl"):
        (arm_dir / stale).unlink(missing_ok=True)
    arm_dir.mkdir(parents=True, exist_ok=True)
    evals = arm_dir / "evals.jsonl"
    _append(evals, {**_step0(study, evaluate, load_sft, out, seed), "simulations": 0})
    start = time.perf_counter()
    later = [s for s in study.eval_steps() if s > 0]
    simulations = 0
    if arm.reward == "none":
        # the control's policy never changes: its value at every step is its step-0 evaluation
        # (the same samples; re-sampling would only add draws of the same policy)
        step0 = json.loads((out / "step0" / f"seed{seed}.json").read_text())
        for step in later:
            _append(evals, {**step0, "step": step, "simulations": 0, "eval_seconds": 0.0})
    else:
        from transformers import TrainerCallback

        from rubriq.training.rewards import RubricRewards
        from rubriq.training.train_rubriq import build

        arm_cfg = _arm_settings(settings, arm, seed, study.steps, arm_dir)
        rewards = RubricRewards(arm_cfg.rubric, workers=arm_cfg.reward.workers)

        class HeldOutEval(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, **kwargs):
                if state.global_step in later:
                    row = evaluate(model, seed, state.global_step, arm_dir / f"records_step{state.global_step}.jsonl")
                    _append(evals, {**row, "simulations": rewards.stats["evaluated"]})
                    log.info(
                        "%s seed %d step %d: held-out correct %.3f, reward %.3f",
                        name,
                        seed,
                        state.global_step,
                        row["correct_rate"],
                        row["mean_reward"],
                    )

        trainer = build(arm_cfg, policy=(tokenizer, load_sft()), rewards=rewards, callbacks=[HeldOutEval()])
        trainer.train()
        simulations = int(rewards.stats["evaluated"])
    result = {
        "arm": name,
        "seed": seed,
        "seconds": time.perf_counter() - start,
        "simulations": simulations,
        "steps": study.steps if arm.reward != "none" else 0,
    }
    done.write_text(json.dumps(result, indent=2))
    return result


def run(
    config: str | Path,
    out: str | Path | None = None,
    arms: list[str] | None = None,
    seeds: list[int] | None = None,
    progress=None,
) -> Path:
    """Run (or resume) the study of ``config``; write and return the path of ``summary.md``.

    ``arms`` / ``seeds`` restrict this invocation (the summary covers whatever is done);
    ``progress(message)`` is called between arm-seeds."""
    study = StudySettings.from_yaml(config)
    out = Path(out or study.output_dir)
    unknown = sorted(set(arms or ()) - set(study.arms))
    if unknown:
        raise ConfigError(f"unknown arm(s) {unknown}; this study has {sorted(study.arms)}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(json.dumps(dataclasses.asdict(study), indent=2, default=str))
    settings, tokenizer, eval_rows, load_sft = _prepare(study, out)
    evaluate = _Evaluator(study, settings, tokenizer, eval_rows)
    for seed in seeds or study.seeds:
        for name in arms or study.arms:
            if progress:
                progress(f"arm {name}, seed {seed}")
            result = run_arm(study, name, seed, settings, tokenizer, evaluate, load_sft, out)
            log.info("arm %s seed %d: %.0f s", name, seed, result["seconds"])
    return write_summary(out, study, len(eval_rows))


# -- aggregation ----------------------------------------------------------------------------------
def collect(out: Path, study: StudySettings) -> list[dict]:
    """One row per (arm, seed, evaluated step) of the finished arm-seeds, with the arm-seed's
    training-log means (TRAIN_METRICS, prefixed ``train/``) and seconds."""
    rows = []
    for name in study.arms:
        for seed in study.seeds:
            arm_dir = out / "arms" / name / f"seed{seed}"
            if not (arm_dir / "done.json").is_file():
                continue
            done = json.loads((arm_dir / "done.json").read_text())
            logged = [r for r in _read_jsonl(arm_dir / "metrics.jsonl") if "train_runtime" not in r]
            train = {}
            for key in TRAIN_METRICS:
                values = [r[key] for r in logged if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
                train[f"train/{key}"] = statistics.fmean(values) if values else None
            for ev in _read_jsonl(arm_dir / "evals.jsonl"):
                rows.append(
                    {
                        "arm": name,
                        "seed": seed,
                        **{k: ev.get(k) for k in ("step", *EVAL_METRICS)},
                        "simulations": ev.get("simulations"),
                        **train,
                        "arm_seconds": done["seconds"],
                    }
                )
    return rows


def time_to_target(rows: list[dict], threshold: float) -> int | None:
    """First evaluated step whose held-out correct rate reaches ``threshold`` (rows of one arm-seed).

    >>> time_to_target([{"step": 0, "correct_rate": 0.1}, {"step": 10, "correct_rate": 0.6}], 0.5)
    10
    """
    hits = [r["step"] for r in sorted(rows, key=lambda r: r["step"]) if (r.get("correct_rate") or 0) >= threshold]
    return hits[0] if hits else None


def aggregate(rows: list[dict], study: StudySettings) -> dict[str, Any]:
    """Means and 95% intervals over seeds per arm and step; time-to-target; paired differences
    of the final-step metrics against the control and between the rubric and sparse arms."""
    arms: dict[str, Any] = {}
    final_step = max((r["step"] for r in rows), default=0)
    for name in study.arms:
        mine = [r for r in rows if r["arm"] == name]
        if not mine:
            continue
        seeds = sorted({r["seed"] for r in mine})
        per_step = {}
        for step in sorted({r["step"] for r in mine}):
            at = [r for r in mine if r["step"] == step]
            per_step[step] = {m: mean_ci([r[m] for r in at]) for m in (*EVAL_METRICS, "simulations")}
        ttt = [time_to_target([r for r in mine if r["seed"] == s], study.target_correct_rate) for s in seeds]
        first = {s: next(r for r in mine if r["seed"] == s) for s in seeds}
        arms[name] = {
            "seeds": seeds,
            "per_step": per_step,
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
    diffs = {}
    pairs = [(a, "none") for a in arms if a != "none"] + [
        ("rubric", "sparse"),
        ("rubric_gated", "sparse"),
        ("rubric_gated", "rubric"),
    ]
    for a, b in pairs:
        if a not in arms or b not in arms:
            continue
        common = sorted(set(arms[a]["seeds"]) & set(arms[b]["seeds"]))
        out = {}
        for metric in ("correct_rate", "mean_reward", "pass@k", "wrong_rewarded_rate"):
            values = []
            for s in common:
                va = [r[metric] for r in rows if r["arm"] == a and r["seed"] == s and r["step"] == final_step]
                vb = [r[metric] for r in rows if r["arm"] == b and r["seed"] == s and r["step"] == final_step]
                if va and vb and va[0] is not None and vb[0] is not None:
                    values.append(va[0] - vb[0])
            out[metric] = mean_ci(values)
        diffs[f"{a} - {b}"] = {"seeds": common, "step": final_step, **out}
    return {"final_step": final_step, "arms": arms, "differences": diffs}


def write_summary(out: Path, study: StudySettings, eval_prompts: int) -> Path:
    """per_step.csv, summary.json, summary.md and the plots, from whatever arm-seeds are done."""
    rows = collect(out, study)
    if not rows:
        raise RuntimeError(f"no finished arm-seed under {out / 'arms'}")
    with open(out / "per_step.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    agg = aggregate(rows, study)
    summary = {"study": dataclasses.asdict(study), "eval_prompts": eval_prompts, **agg}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    from rubriq.studies import plots

    plots.curves(agg, out / "curves.png", study)
    plots.training(out, study, out / "training.png")
    k, last = study.samples, agg["final_step"]
    lines = [
        f"# Convergence study ({', '.join(agg['arms'])})",
        "",
        f"{eval_prompts} held-out prompts x {k} samples; {len(study.seeds)} seeds; {study.steps} GRPO steps. "
        "Means over seeds with 95% t-intervals.",
        "",
        f"## Held-out metrics at step {last}",
        "",
    ]
    metric_rows = []
    for name, a in agg["arms"].items():
        p = a["per_step"].get(last) or a["per_step"][max(a["per_step"])]
        metric_rows.append(
            [
                name,
                str(len(a["seeds"])),
                format_ci(p["mean_reward"]),
                format_ci(p["correct_rate"]),
                format_ci(p["pass@k"]),
                format_ci(p["mean_t_correct"], 1),
                format_ci(p["wrong_rewarded_rate"]),
                format_ci(p["trivial_rate"]),
            ]
        )
    lines += markdown_table(
        ["arm", "seeds", "mean reward", "correct rate", f"pass@{k}", "mean T (correct)", "wrong rewarded", "trivial"],
        metric_rows,
    )
    lines += ["", f"## Time to target (held-out correct rate >= {study.target_correct_rate})", ""]
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
        ["arm", "reward", "reward std", "frac_reward_zero_std", "entropy", "completion length"],
        [
            [
                name,
                format_ci(t["train/reward"]),
                format_ci(t["train/reward_std"]),
                format_ci(t["train/frac_reward_zero_std"]),
                format_ci(t["train/entropy"]),
                format_ci(t["train/completions/mean_length"], 1),
            ]
            for name, t in ((name, a["train"]) for name, a in agg["arms"].items())
            if t.get("train/reward", (None,))[0] is not None
        ],
    )
    lines += ["", f"## Paired differences at step {last} (same seed)", ""]
    lines += markdown_table(
        ["pair", "correct rate", "mean reward", f"pass@{k}", "wrong rewarded"],
        [
            [
                pair,
                format_ci(d["correct_rate"]),
                format_ci(d["mean_reward"]),
                format_ci(d["pass@k"]),
                format_ci(d["wrong_rewarded_rate"]),
            ]
            for pair, d in agg["differences"].items()
        ],
    )
    lines += ["", "![held-out curves](curves.png)", "", "![training signal](training.png)", ""]
    path = out / "summary.md"
    path.write_text("\n".join(lines))
    return path


__all__ = [
    "ArmSettings",
    "StudySettings",
    "aggregate",
    "collect",
    "eval_seed",
    "held_out_metrics",
    "mean_ci",
    "run",
    "run_arm",
    "time_to_target",
    "write_summary",
]
