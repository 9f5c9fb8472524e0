"""Stage 1, the data: the training settings rooted in the study's folder and the prompts every
arm trains and is evaluated on.

The training config's dataset is built once into ``OUT/data`` (its ``data.build``; split by
target, so no held-out target is ever trained on) and read back on every later run.  Each
further held-out tier (``eval_tiers``) is written once into ``OUT/tiers/NAME/test.jsonl``, from a
split of the study's dataset, a split of another dataset folder, or built from the training
config's ``data.build`` with the tier's changes; a tier that shares a target with the training
prompts is refused.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
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
    tiers: dict[str, list[dict]] = field(default_factory=dict)
    """The further held-out tiers' prompts, by name (each at most ``max_prompts``)."""


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
    tiers = {name: tier_rows(study, name, settings, out, train_rows) for name in study.eval_tiers}
    return StudyData(settings, train_rows, eval_rows, tiers)


def tier_folder(out: Path, name: str) -> Path:
    """``OUT/tiers/NAME``: the tier's prompts as evaluated (``test.jsonl``)."""
    return out / "tiers" / name


def tier_rows(study, name: str, settings, out: Path, train_rows: list[dict]) -> list[dict]:
    """The prompts of tier ``name``, written to :func:`tier_folder` the first time and read from
    there afterwards (at most ``max_prompts``)."""
    from rubriq.config import deep_merge
    from rubriq.data.prompts import load_split, save_splits, target_key
    from rubriq.training.train_rubriq import load_rows

    tier, folder = study.eval_tiers[name], tier_folder(out, name)
    if not (folder / "test.jsonl").is_file():
        if tier.build:
            # every built prompt is the tier: nothing held back for training or validation
            build = {**deep_merge(dict(settings.data.build or {}), tier.build), "held_out": {}, "fractions": [0.0, 1.0]}
            data = dataclasses.replace(settings.data, dataset=str(folder), build=build, max_rows=0)
            rows = load_rows(dataclasses.replace(settings, data=data), "test")
        else:
            source = Path(tier.dataset) if tier.dataset else out / "data"
            try:
                rows = load_split(source, tier.split)
            except FileNotFoundError as exc:
                raise ConfigError(f"eval tier {name!r}: {exc}") from None
            save_splits({"test": rows}, folder)
        train = {target_key(r) for r in train_rows}
        shared = sorted({target_key(r) for r in rows} & train)
        if shared:
            import shutil

            shutil.rmtree(folder)
            raise ConfigError(
                f"eval tier {name!r}: {len(shared)} of its targets are training targets (e.g. {shared[0][:120]}); "
                "a held-out tier must share none (with build, leave out the training config's families)"
            )
    rows = load_split(folder, "test")
    if study.max_prompts:
        rows = rows[: study.max_prompts]
    if not rows:
        raise ConfigError(f"eval tier {name!r} has no prompts ({folder / 'test.jsonl'})")
    return rows


__all__ = ["StudyData", "prepare_data", "tier_folder", "tier_rows"]
