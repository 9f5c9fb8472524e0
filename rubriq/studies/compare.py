"""Whether two arm-seeds are the same run (``rubriq study compare RUN_A RUN_B``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rubriq.config import ConfigError
from rubriq.studies.layout import read_jsonl


def _timing(key: str) -> bool:
    """Keys whose values are wall times or rates, which no two runs share."""
    return any(part in key for part in ("time", "timing", "seconds", "per_s", "runtime"))


def compare_arm_seeds(a: str | Path, b: str | Path) -> dict[str, dict[str, Any]]:
    """Whether two arm-seed folders (``OUT/arms/ARM/seedS``) hold the same run, file by file:
    TRL's log per step and the evaluations (every value but wall times and rates), every training
    completion's five scores, and every scored held-out and training-prompt sample.

    Returns ``{file: {"rows": (n_a, n_b), "equal": rows equal, "first_difference": (row, key) or None}}``
    over the ``.jsonl`` files either folder has and ``done.json`` (one row: arm, seed, steps,
    simulations, warm-start); a file only one of them has shows 0 rows on the other side.
    Two runs from the same warm-start, seed and settings are equal here when the CPU arithmetic
    is; a different warm-start shows as a difference from the first step on."""
    a, b = Path(a), Path(b)
    for folder in (a, b):
        if not (folder / "done.json").is_file() and not (folder / "metrics.jsonl").is_file():
            raise ConfigError(f"{folder}: not an arm-seed folder (no done.json or metrics.jsonl)")
    names = sorted({p.name for folder in (a, b) for p in folder.glob("*.jsonl")})
    result: dict[str, dict[str, Any]] = {}
    for name in ["done.json", *names]:
        if name == "done.json":
            ra, rb = ([json.loads(f.read_text())] if f.is_file() else [] for f in (a / name, b / name))
        else:
            ra, rb = read_jsonl(a / name), read_jsonl(b / name)
        equal, first = 0, None
        for i, (x, y) in enumerate(zip(ra, rb, strict=False)):  # the shorter one: a missing row
            keys = [k for k in dict.fromkeys((*x, *y)) if not _timing(k)]
            bad = next((k for k in keys if x.get(k) != y.get(k)), None)
            if bad is None:
                equal += 1
            elif first is None:
                first = (i, bad)
        if first is None and len(ra) != len(rb):
            first = (min(len(ra), len(rb)), None)
        result[name] = {"rows": (len(ra), len(rb)), "equal": equal, "first_difference": first}
    return result


__all__ = ["compare_arm_seeds"]
