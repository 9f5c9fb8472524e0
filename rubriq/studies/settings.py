"""A study's settings: the YAML, field by field (:class:`StudySettings`, one :class:`ArmSettings`
per arm), and the names of what a study measures (:data:`EVAL_METRICS`, :data:`TRAIN_METRICS`).

Every other stage reads these; none writes them back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rubriq.config import ConfigError, RubricConfig, from_dict, load_yaml_mapping

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
    "compression",
    "gap_closed",
    "reached_pyzx",
    "t_gap_pyzx",
    "rewrite_correct_rate",
    "synthesis_correct_rate",
)
"""Metrics per evaluation (``pass@k`` for k = ``samples``; the rewrite ones on prompts with a
recorded PyZX optimum, else None)."""
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
    """rubric: the rubric (with the overrides below); sparse_inverse_t: Sparse-GRPO (1/T if
    correct); sparse_correct: 1 if correct (the plain verifiable reward); none: no RL (control)."""
    rubric: dict = field(default_factory=dict)
    """Rubric fields that differ from the training config's (e.g. ``fidelity_gating``)."""

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
        from rubriq.training.config import deep_merge

        if not self.rubric:
            return base
        return RubricConfig.from_dict(deep_merge(dataclasses.asdict(base), self.rubric))


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

    def __post_init__(self) -> None:
        if self.steps < 1 or self.eval_every < 1:
            raise ConfigError("steps and eval_every must be >= 1")
        if self.primary_metric not in EVAL_METRICS:
            raise ConfigError(f"primary_metric must be one of {', '.join(EVAL_METRICS)}, got {self.primary_metric!r}")
        if any(not 0 < s <= self.steps for s in self.eval_at):
            raise ConfigError(f"eval_at steps must lie in [1, {self.steps}], got {list(self.eval_at)}")
        if self.train_eval_prompts < 0 or self.filter_samples < 2:
            raise ConfigError("train_eval_prompts must be >= 0 and filter_samples >= 2")
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
        """0, eval_every, 2 eval_every, ... and the last step (or 0, ``eval_at`` and the last step)."""
        if self.eval_at:
            return sorted({0, *self.eval_at, self.steps})
        return sorted({0, *range(self.eval_every, self.steps + 1, self.eval_every), self.steps})

    @property
    def threshold(self) -> float:
        """The time-to-target threshold on ``primary_metric``."""
        return self.target_correct_rate if self.target_value is None else float(self.target_value)


__all__ = ["DEFAULT_ARMS", "EVAL_METRICS", "TRAIN_METRICS", "ArmSettings", "StudySettings"]
