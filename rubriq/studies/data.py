"""Stage 1, the data: the training settings rooted in the study's folder and the prompts every
arm trains and is evaluated on.

The training config's dataset is built once into ``OUT/data`` (its ``data.build``; split by
target, so no held-out target is ever trained on) and read back on every later run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubriq.config import ConfigError


@dataclass(frozen=True)
class StudyData:
    """What the stages after this one train and evaluate on."""

    settings: Any
    """The training config (``TrainSettings``), its output and dataset in the study's folder."""
    train_rows: list[dict]
    """The training prompts (after the difficulty filter, once it has run)."""
    eval_rows: list[dict]
    """The held-out prompts (the study's ``split``, at most ``max_prompts``)."""


def prepare_data(study, out: Path) -> StudyData:
    """The training settings with ``output_dir`` OUT and ``data.dataset`` OUT/data, and the rows."""
    from rubriq.training.config import TrainSettings
    from rubriq.training.train_rubriq import load_rows

    settings = TrainSettings.from_yaml(study.train_config)
    if settings.algorithm != "grpo":
        raise ConfigError(f"{study.train_config}: the convergence study compares GRPO rewards (algorithm: grpo)")
    settings = dataclasses.replace(
        settings, output_dir=str(out), data=dataclasses.replace(settings.data, dataset=str(out / "data"))
    )
    train_rows = load_rows(settings)
    eval_rows = load_rows(settings, study.split)
    if study.max_prompts:
        eval_rows = eval_rows[: study.max_prompts]
    if not eval_rows:
        raise ConfigError(f"the {study.split!r} split of {out / 'data'} is empty: nothing held out to evaluate on")
    return StudyData(settings, train_rows, eval_rows)


__all__ = ["StudyData", "prepare_data"]
