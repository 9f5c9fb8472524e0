"""A study's settings: the YAML, field by field (:class:`StudySettings`, one :class:`ArmSettings`
per arm), and the names of what a study measures (:data:`EVAL_METRICS`, :data:`TRAIN_METRICS`).

Every other stage reads these; none writes them back.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rubriq.config import ConfigError, RubricConfig, deep_merge, from_dict, load_yaml_mapping
from rubriq.models.sampling import SamplingSpec, read_section, write_section

if TYPE_CHECKING:
    from rubriq.training.config import TrainSettings

DEFAULT_ARMS: dict[str, dict[str, Any]] = {
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
    "compression",
    "gap_closed",
    "reached_pyzx",
    "t_gap_pyzx",
    "rewrite_correct_rate",
    "synthesis_correct_rate",
    "rewrite_copy_rate",
    "rewrite_reduction_rate",
    "rewrite_wrong_rate",
)
"""Metrics per evaluation (``pass@k`` for k = ``samples``; ``gap_closed``, ``reached_pyzx`` and
``t_gap_pyzx`` on prompts with a recorded PyZX optimum, the other ``rewrite_`` ones on rewrite
prompts (a circuit to improve), else None).  Of the rewrite samples, ``rewrite_copy_rate`` is the
fraction that is correct and the input verbatim, ``rewrite_reduction_rate`` correct with fewer T
than the input (T < T0), ``rewrite_wrong_rate`` not correct (:func:`rubriq.studies.analysis.rewrite_copies`)."""
REWRITE_OUTCOMES = ("rewrite_copy_rate", "rewrite_reduction_rate", "rewrite_wrong_rate")
"""What became of the rewrite samples: copied, reduced, broken (a correct sample that is neither
a verbatim copy nor has fewer T, e.g. a reordered copy, is none of the three)."""
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


STUDY_SAMPLING_KEYS = {
    "samples": "samples",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_new_tokens": "max_new_tokens",
}
"""A study YAML's (and an SFT-curve YAML's) keys that are :class:`SamplingSpec` fields."""
STUDY_SAMPLING = SamplingSpec(samples=4, temperature=0.0, top_p=0.0, max_new_tokens=0)
"""A study's sampling unless its YAML says otherwise: 4 samples, the rest the training's
(:func:`held_out_sampling`)."""


def held_out_sampling(own: SamplingSpec, settings: TrainSettings) -> SamplingSpec:
    """The one rule for how a study, its pilot and the SFT curve sample: ``own`` (the study's or
    the curve's spec), each of ``temperature``, ``top_p`` and ``max_new_tokens`` left at 0
    taken from the training config ``settings``
    (:meth:`TrainSettings.sampling <rubriq.training.config.TrainSettings.sampling>`: "the
    training temperature"); ``samples``, ``top_k`` and ``seed`` are ``own``'s.

    >>> from rubriq.training.config import TrainSettings
    >>> train = TrainSettings.from_dict({"grpo": {"temperature": 0.8, "max_completion_length": 192}})
    >>> spec = held_out_sampling(SamplingSpec(samples=8, temperature=0.0, top_p=0.0, max_new_tokens=0), train)
    >>> spec.samples, spec.temperature, spec.top_p, spec.max_new_tokens, spec.top_k
    (8, 0.8, 1.0, 192, None)
    """
    training = settings.sampling()
    return own.replace(
        temperature=own.temperature or training.temperature,
        top_p=own.top_p or training.top_p,
        max_new_tokens=own.max_new_tokens or training.max_new_tokens,
    )


@dataclass(frozen=True)
class ArmSettings:
    """One reward to train with."""

    reward: Literal["rubric", "sparse_inverse_t", "sparse_correct", "none"] = "rubric"
    """rubric: the rubric (with the overrides below); sparse_inverse_t: Sparse-GRPO (1/T if
    correct); sparse_correct: 1 if correct (the plain verifiable reward); none: no RL (control)."""
    rubric: dict = field(default_factory=dict)
    """Rubric fields that differ from the training config's (e.g. ``fidelity_gating``, or a
    nested section's fields: ``{fidelity: {correct_threshold: 0.95}}``), merged key by key."""

    def __post_init__(self) -> None:
        if not isinstance(self.rubric, dict):
            raise ConfigError(f"an arm's rubric maps RubricConfig fields to values, got {self.rubric!r}")

    def rubric_config(self, base: RubricConfig) -> RubricConfig:
        """The arm's rubric: ``base`` (the training config's) with :attr:`rubric` merged into it,
        nested sections key by key (``{"fidelity": {"correct_threshold": 0.95}}`` changes that
        one field and keeps the rest of ``base.fidelity``).

        >>> arm = ArmSettings(rubric={"fidelity": {"samples": 8}})
        >>> base = RubricConfig.from_dict({"fidelity": {"correct_threshold": 0.95}})
        >>> cfg = arm.rubric_config(base)
        >>> cfg.fidelity.samples, cfg.fidelity.correct_threshold, cfg.weights == base.weights
        (8, 0.95, True)
        """
        if not self.rubric:
            return base
        return RubricConfig.from_dict(deep_merge(dataclasses.asdict(base), self.rubric))


@dataclass(frozen=True)
class TierSettings:
    """A further held-out prompt set, evaluated like the held-out split: one of the study's own
    splits, a split of another dataset folder, or prompts built for it."""

    split: str = "test"
    """The split to read (of ``dataset``, else of the study's dataset ``OUT/data``)."""
    dataset: str = ""
    """A dataset folder (one ``SPLIT.jsonl`` per split, as ``rubriq data build`` and
    ``rubriq.data.prompts.save_splits`` write them), relative to the study YAML; "": the study's."""
    build: dict = field(default_factory=dict)
    """``data.build`` fields that differ from the training config's (e.g. other
    ``small_rewrites``): every prompt they build is the tier (built once into ``OUT/tiers/NAME``)."""
    steps: tuple[int, ...] = ()
    """The steps this tier is evaluated at besides step 0 (each one of the study's evaluated
    steps); (): every evaluated step."""


TIER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def _portable(path: str) -> str:
    """``path`` relative to the working folder when it lies in it, else as it is.

    >>> import os
    >>> _portable(os.path.join(os.getcwd(), "configs", "t.yaml")) == os.path.join("configs", "t.yaml")
    True
    >>> _portable("/elsewhere/t.yaml")
    '/elsewhere/t.yaml'
    """
    import os

    root = os.getcwd()
    if os.path.isabs(path) and os.path.commonpath([root, path]) == root:
        return os.path.relpath(path, root)
    return path


@dataclass(frozen=True)
class StudySettings:
    """A convergence study; YAML maps onto it one to one (``configs/studies/``)."""

    train_config: str
    """Training YAML (model, data, LoRA, SFT, GRPO settings), relative to the study file."""
    output_dir: str = "runs/studies/convergence"
    arms: dict = field(default_factory=lambda: {name: ArmSettings(**arm) for name, arm in DEFAULT_ARMS.items()})
    """Arm name -> :class:`ArmSettings` fields."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """GRPO seeds (sampling and data order); the warm-start is shared."""
    steps: int = 30
    """GRPO steps per arm-seed."""
    eval_every: int = 10
    sampling: SamplingSpec = field(default_factory=lambda: STUDY_SAMPLING)
    """How the held-out prompts are sampled (:func:`held_out_sampling`): ``samples`` completions
    per prompt (the k of pass@k), ``temperature``, ``top_p`` and ``max_new_tokens`` 0: the
    training's (:meth:`TrainSettings.sampling <rubriq.training.config.TrainSettings.sampling>`).
    In YAML the keys ``samples``, ``temperature``, ``top_p``, ``top_k``, ``max_new_tokens``."""
    batch_size: int = 16
    split: str = "test"
    max_prompts: int = 0
    """Evaluate on at most this many held-out prompts (0: all)."""
    target_correct_rate: float = 0.5
    """Time-to-target threshold on the held-out correct rate (F_avg >= fidelity.correct_threshold)."""
    primary_metric: str = "correct_rate"
    """The held-out metric the study is judged on (an EVAL_METRICS name), named before it runs."""
    target_value: float | None = None
    """Time-to-target threshold on ``primary_metric`` (None: ``target_correct_rate``)."""
    eval_at: tuple[int, ...] = ()
    """Evaluated steps (0 and ``steps`` always are); (): every ``eval_every`` steps."""
    train_eval_prompts: int = 0
    """Also evaluate a fixed sample of this many training prompts at every evaluated step."""
    filter_prompts: bool = False
    """Drop training prompts whose pilot group has all-equal rewards under every arm's reward."""
    filter_samples: int = 4
    """Pilot completions per training prompt for ``filter_prompts`` (the GRPO group size)."""
    warm_start_model: str = ""
    """A pre-built warm-start every arm starts from instead of training one: a model folder in
    Hugging Face format (config.json, ``*.safetensors`` weights, the tokenizer), or a PEFT adapter
    folder (``adapter_config.json``: merged into its base in ``OUT/sft/model`` once), relative to
    the study YAML or absolute. "": train it (SFT) into ``OUT/sft/model``."""
    eval_tiers: dict = field(default_factory=dict)
    """More held-out tiers, name -> :class:`TierSettings` fields: each is evaluated at every
    evaluated step with the same ``samples`` (and ``max_prompts``) as the held-out split, and
    reported on its own; ``evals.jsonl`` rows carry the name as ``split``.  None of a tier's
    targets may be a training target."""
    primary_tier: str = "test"
    """The prompts ``primary_metric`` is judged on (time-to-target, the paired differences):
    ``test``, the held-out ``split``, or a name of ``eval_tiers``."""
    same_eval_seed: bool = False
    """True: every evaluation of a prompt set draws with the same seed at every step (that of
    step 0), so that changes over steps are measured with common random numbers, as changes
    between arms are (a policy that did not change gives the same samples). False: a seed per
    step (:func:`rubriq.studies.evaluate.eval_seed`), as the studies run before 2026-12-06."""
    results_dir: str = ""
    """A folder (relative to the working directory, like ``output_dir``) that keeps the study's
    finished units for good: each finished arm-seed's files (records, logs, ``done.json``, its
    adapter's SHA-256; no weights) with the shared step-0 evaluations and the prompt filter are
    copied there as it ends, and copied back at the start of a run, so that a run on a new
    machine with only that folder skips the arm-seeds it holds (:mod:`rubriq.studies.units`).
    "": none (the output folder only)."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.eval_every < 1:
            raise ConfigError("steps and eval_every must be >= 1")
        if self.primary_metric not in EVAL_METRICS:
            raise ConfigError(f"primary_metric must be one of {', '.join(EVAL_METRICS)}, got {self.primary_metric!r}")
        if any(not 0 < s <= self.steps for s in self.eval_at):
            raise ConfigError(f"eval_at steps must lie in [1, {self.steps}], got {list(self.eval_at)}")
        if self.train_eval_prompts < 0 or self.filter_samples < 2:
            raise ConfigError("train_eval_prompts must be >= 0 and filter_samples >= 2")
        if self.sampling.samples < 2:
            raise ConfigError("samples must be >= 2: the study evaluates by sampling, not greedy decoding")
        if self.sampling.seed != 0:
            raise ConfigError("the study's sampling seed is eval_seed(seed, step) (rubriq/studies/evaluate.py)")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds must be distinct and not empty, got {list(self.seeds)}")
        if not self.arms:
            raise ConfigError("a study needs at least one arm")
        for name, arm in self.arms.items():
            if not isinstance(arm, ArmSettings):
                raise ConfigError(f"arm {name!r} is not an ArmSettings")
        for name, tier in self.eval_tiers.items():
            if not isinstance(tier, TierSettings):
                raise ConfigError(f"eval tier {name!r} is not a TierSettings")
            if not TIER_NAME.fullmatch(name) or name in ("test", "train"):
                raise ConfigError(
                    f"eval tier name {name!r}: letters, digits, '_' and '-', and not 'test' (the held-out "
                    "split) or 'train' (the training-prompt sample)"
                )
            if tier.dataset and tier.build:
                raise ConfigError(f"eval tier {name!r}: give dataset (a folder) or build (prompts to build), not both")
            if tier.build and tier.split != "test":
                raise ConfigError(
                    f"eval tier {name!r}: with build, every prompt built is the tier (no split to choose)"
                )
            if not tier.dataset and not tier.build and tier.split == "train":
                raise ConfigError(f"eval tier {name!r}: the study's train split is not held out")
            stray = sorted(set(tier.steps) - set(self.eval_steps()) - {0})
            if stray:
                raise ConfigError(
                    f"eval tier {name!r}: steps {stray} are not evaluated steps of the study ({self.eval_steps()})"
                )
        if self.primary_tier != "test" and self.primary_tier not in self.eval_tiers:
            raise ConfigError(
                f"primary_tier must be 'test' (the held-out split) or a name of eval_tiers "
                f"({', '.join(self.eval_tiers) or 'none'}), got {self.primary_tier!r}"
            )

    @classmethod
    def from_yaml(cls, path: str | Path) -> StudySettings:
        path = Path(path)
        data = load_yaml_mapping(path)
        arms = data.get("arms", DEFAULT_ARMS)
        if not isinstance(arms, dict):
            raise ConfigError(f"{path}: arms must map names to settings")
        data["arms"] = {str(name): from_dict(ArmSettings, arm or {}) for name, arm in arms.items()}
        tiers = data.get("eval_tiers") or {}
        if not isinstance(tiers, dict):
            raise ConfigError(f"{path}: eval_tiers must map names to settings")
        data["eval_tiers"] = {}
        for name, fields in tiers.items():
            tier = from_dict(TierSettings, fields or {})
            if tier.dataset:
                tier = dataclasses.replace(tier, dataset=str((path.parent / tier.dataset).resolve()))
            data["eval_tiers"][str(name)] = tier
        if "train_config" not in data:
            raise ConfigError(f"{path}: train_config (a training YAML) is required")
        data["train_config"] = str((path.parent / data["train_config"]).resolve())
        if data.get("warm_start_model"):
            data["warm_start_model"] = str((path.parent / str(data["warm_start_model"])).resolve())
        return read_section(cls, data, STUDY_SAMPLING, STUDY_SAMPLING_KEYS, str(path))

    def to_record(self) -> dict[str, Any]:
        """The settings as ``study.json`` and ``summary.json`` record them: the YAML's keys, the
        sampling ones flat in their place (``top_k`` only when set). The YAML's paths are
        recorded relative to the working folder when they lie in it (the checkout's root when run
        as documented), so a record does not depend on where the repository was cloned."""
        record = write_section(self, STUDY_SAMPLING_KEYS, deep=True)
        for key in ("train_config", "warm_start_model"):
            if record.get(key):
                record[key] = _portable(record[key])
        return record

    def held_out_sampling(self, settings: TrainSettings) -> SamplingSpec:
        """How this study samples its held-out prompts: :func:`held_out_sampling` of its
        sampling and the training config ``settings``."""
        return held_out_sampling(self.sampling, settings)

    def eval_steps(self) -> list[int]:
        """0, eval_every, 2 eval_every, ... and the last step (or 0, ``eval_at`` and the last step)."""
        if self.eval_at:
            return sorted({0, *self.eval_at, self.steps})
        return sorted({0, *range(self.eval_every, self.steps + 1, self.eval_every), self.steps})

    def tier_steps(self, split: str) -> list[int]:
        """The evaluated steps of prompt set ``split`` (a tier's ``steps`` and 0; else every one).

        >>> study = StudySettings(train_config="t.yaml", steps=100, eval_at=(50,),
        ...                       eval_tiers={"hard": TierSettings(split="hard", steps=(100,))})
        >>> study.tier_steps("test"), study.tier_steps("train"), study.tier_steps("hard")
        ([0, 50, 100], [0, 50, 100], [0, 100])
        """
        tier = self.eval_tiers.get(split)
        if tier is None or not tier.steps:
            return self.eval_steps()
        return sorted({0, *tier.steps})

    def tiers(self) -> list[str]:
        """The held-out prompt sets in report order: ``test`` (the held-out split), then ``eval_tiers``."""
        return ["test", *self.eval_tiers]

    @property
    def threshold(self) -> float:
        """The time-to-target threshold on ``primary_metric``."""
        return self.target_correct_rate if self.target_value is None else float(self.target_value)


__all__ = [
    "DEFAULT_ARMS",
    "EVAL_METRICS",
    "REWRITE_OUTCOMES",
    "TRAIN_METRICS",
    "ArmSettings",
    "StudySettings",
    "TierSettings",
]
