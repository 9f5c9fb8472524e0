"""What GRPO's groups hold during training: the logs that say why a policy does or does not learn
to remove T gates.

GRPO learns from a group of completions of one prompt only through their advantages
A_i = (r_i - mean_g r) / (std_g r + 1e-4) (TRL's default ``scale_rewards: group``, with Bessel's
correction, as ``trl.trainer.utils.nanstd`` computes it).  A correct reduction (correct with
T < T0) can only be reinforced in a group that holds one, and only as much as its advantage over
the group's copies and wrong answers.  :func:`batch_groups` reads one training batch (every
completion's outcome and the arm's own reward) and returns:

* ``groups`` and ``groups_with_reduction``: how many groups, and the fraction holding a correct reduction;
* ``adv_reduction``, ``adv_copy``, ``adv_wrong``, ``adv_other_correct``: the mean advantage of
  each outcome *in the groups that hold a correct reduction* (None where none occurs);
* ``reduction_rate``, ``copy_rate``, ``wrong_rate``, ``other_correct_rate``: the outcomes of
  the batch's samples.

:func:`window_means` averages them over windows of steps for the pilot tables
(``groups.jsonl`` of an arm-seed, one row per step, beside TRL's ``metrics.jsonl``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

OUTCOMES = ("reduction", "copy", "wrong", "other_correct")
"""What a sample of a rewrite prompt did (:func:`rubriq.studies.analysis.rewrite_outcome`)."""


def advantages(rewards: Sequence[float]) -> list[float]:
    """GRPO's advantages of one group, as TRL computes them by default (group mean and
    standard deviation with Bessel's correction, 1e-4 added to the deviation).

    >>> [round(a, 4) for a in advantages([1.0, 0.0, 0.0, 0.0])]
    [1.4997, -0.4999, -0.4999, -0.4999]
    >>> advantages([0.5, 0.5])
    [0.0, 0.0]
    """
    if len(rewards) < 2:
        return [0.0 for _ in rewards]
    mean, std = statistics.fmean(rewards), statistics.stdev(rewards)
    return [(r - mean) / (std + 1e-4) for r in rewards]


def batch_groups(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The group statistics of one training batch; ``rows`` are its completions, each with
    ``group`` (its prompt), ``outcome`` (one of :data:`OUTCOMES`, None for a synthesis prompt)
    and ``train_reward`` (the arm's reward); each row also gets its ``advantage``.

    >>> rows = [{"group": "p", "outcome": o, "train_reward": r} for o, r in
    ...         [("reduction", 1.0), ("copy", 1.0), ("wrong", 0.0), ("wrong", 0.0)]]
    >>> rows += [{"group": "q", "outcome": "wrong", "train_reward": 0.0} for _ in range(4)]
    >>> g = batch_groups(rows)
    >>> g["groups"], g["groups_with_reduction"], round(g["adv_reduction"], 3), round(g["adv_copy"], 3)
    (2, 0.5, 0.866, 0.866)
    >>> round(g["adv_wrong"], 3), g["adv_other_correct"], g["reduction_rate"], g["wrong_rate"]
    (-0.866, None, 0.125, 0.75)
    """
    by_group: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        by_group.setdefault(row["group"], []).append(row)
    for members in by_group.values():
        for row, a in zip(members, advantages([float(m["train_reward"]) for m in members]), strict=True):
            row["advantage"] = a
    with_reduction = [m for m in by_group.values() if any(r["outcome"] == "reduction" for r in m)]
    out: dict[str, Any] = {
        "groups": len(by_group),
        "groups_with_reduction": len(with_reduction) / len(by_group) if by_group else None,
    }
    in_mixed = [r for m in with_reduction for r in m]
    for outcome in OUTCOMES:
        adv = [r["advantage"] for r in in_mixed if r["outcome"] == outcome]
        out[f"adv_{outcome}"] = statistics.fmean(adv) if adv else None
    rewrites = [r for r in rows if r["outcome"] is not None]
    for outcome in OUTCOMES:
        out[f"{outcome}_rate"] = sum(r["outcome"] == outcome for r in rewrites) / len(rewrites) if rewrites else None
    return out


def window_means(rows: Sequence[dict[str, Any]], keys: Sequence[str], window: int) -> list[dict[str, Any]]:
    """Means of ``keys`` over consecutive windows of ``window`` steps (rows with ``step``; a
    key's missing, None or non-finite values are left out of its mean), one row per window with
    its first and last step.

    >>> rows = [{"step": s, "x": float(s), "y": None if s % 2 else 1.0} for s in range(1, 5)]
    >>> window_means(rows, ["x", "y"], 2)
    [{'steps': '1-2', 'x': 1.5, 'y': 1.0}, {'steps': '3-4', 'x': 3.5, 'y': 1.0}]
    """
    out = []
    rows = sorted(rows, key=lambda r: r["step"])
    for start in range(0, len(rows), window):
        chunk = rows[start : start + window]
        row: dict[str, Any] = {"steps": f"{chunk[0]['step']}-{chunk[-1]['step']}"}
        for key in keys:
            values = [
                float(r[key]) for r in chunk if isinstance(r.get(key), (int, float)) and math.isfinite(float(r[key]))
            ]
            row[key] = statistics.fmean(values) if values else None
        out.append(row)
    return out


__all__ = ["OUTCOMES", "advantages", "batch_groups", "window_means"]
