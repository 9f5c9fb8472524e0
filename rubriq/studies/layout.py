"""Where a study's files live under its output folder ``OUT``, and reading them back::

    OUT/study.json            the settings it ran with      OUT/data/        the prompt splits
    OUT/filter.json           the difficulty filter's pilot OUT/data_filtered/ the kept training prompts
    OUT/sft/model/            the warm-start                OUT/sft/fingerprint.json  SHA-256 of its weights
    OUT/step0/seedS.json      the shared step-0 evaluation  OUT/step0/records_seedS.jsonl  its scored samples
    OUT/arms/ARM/seedS/       metrics.jsonl (training log), evals.jsonl (one line per
                              evaluation), records_stepN.jsonl (scored samples),
                              train_scores.jsonl (every training completion's scores), final/
                              (the trained policy), done.json (written last: the arm-seed is finished)
    OUT/per_step.csv  OUT/summary.json  OUT/summary.md  OUT/curves.png  OUT/training.png
    OUT/logs/ARM_seedS.log    each arm-seed's output when run with ``workers > 1``

An evaluation of another prompt set than the held-out split (``split`` ``train``: the fixed
sample of training prompts; a further held-out tier: its name) writes the same files with its
split as a prefix (``step0/train_seedS.json``, ``train_records_stepN.jsonl``); a tier's prompts
are in ``OUT/tiers/NAME/test.jsonl``.
"""

from __future__ import annotations

import json
from pathlib import Path


def read_jsonl(path: Path) -> list[dict]:
    """The rows of a JSONL file ([] if there is none)."""
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def append_jsonl(path: Path, row: dict) -> None:
    """Append one row (the folder is created)."""
    from rubriq.training.callbacks import append_jsonl as append

    path.parent.mkdir(parents=True, exist_ok=True)
    append(path, row)


def prefix(split: str) -> str:
    """The file-name prefix of an evaluated prompt set: none for the held-out split (``test``)."""
    return "" if split == "test" else f"{split}_"


def arm_dir(out: Path, name: str, seed: int) -> Path:
    """``OUT/arms/ARM/seedS``."""
    return out / "arms" / name / f"seed{seed}"


def step0_path(out: Path, split: str, seed: int) -> Path:
    """The shared step-0 evaluation of one seed (every arm's first row)."""
    return out / "step0" / f"{prefix(split)}seed{seed}.json"


def step0_records(out: Path, split: str, seed: int) -> Path:
    """The scored samples of the step-0 evaluation."""
    return out / "step0" / f"{prefix(split)}records_seed{seed}.jsonl"


def step_records(folder: Path, split: str, step: int) -> Path:
    """The scored samples of an arm-seed's evaluation at a later step."""
    return folder / f"{prefix(split)}records_step{step}.jsonl"


def eval_records(out: Path, study, name: str, seed: int, split: str, step: int) -> Path:
    """The scored samples behind one evaluation row: at step 0, and at every step of the
    control (its policy never changes), the shared step-0 samples."""
    if step == 0 or study.arms[name].reward == "none":
        return step0_records(out, split, seed)
    return step_records(arm_dir(out, name, seed), split, step)


def finished_arm_seeds(out: Path, study, name: str) -> list[tuple[int, Path]]:
    """(seed, folder) of the arm's finished arm-seeds (``done.json`` written): every table and plot
    reads only these, so a stopped arm-seed's partial files never enter them."""
    dirs = [(seed, arm_dir(out, name, seed)) for seed in study.seeds]
    return [(seed, d) for seed, d in dirs if (d / "done.json").is_file()]


__all__ = [
    "append_jsonl",
    "arm_dir",
    "eval_records",
    "finished_arm_seeds",
    "prefix",
    "read_jsonl",
    "step0_path",
    "step0_records",
    "step_records",
]
