"""The old place of the rubric's TRL reward functions: they are in :mod:`rubriq.reward`
(``rubriq.training.rewards.RubricRewards`` and the rest still import from here)."""

from __future__ import annotations

from rubriq.reward import DimensionReward, RubricRewards, SparseReward, completion_text, sparse_reward

__all__ = ["DimensionReward", "RubricRewards", "SparseReward", "completion_text", "sparse_reward"]
