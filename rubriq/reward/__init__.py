"""The reward functions RubriQ hands to TRL, local and remote, each with TRL's uniform signature
``f(prompts, completions, target, log_metric=None, **columns) -> list[float]``
(:class:`~rubriq.reward.base.RewardFunction`).

- :mod:`~rubriq.reward.rubric`: :class:`RubricRewards`, the rubric reward R (as the engine
  computes it: :func:`rubriq.rubric.engine.score_facts` is its one definition) and its five
  dimensions as TRL reward functions over one scorer;
- :mod:`~rubriq.reward.sparse`: :class:`SparseReward`, the paper's sparse baselines (1/T(c) of a
  correct circuit, or correct as 0/1);
- :mod:`~rubriq.reward.remote`: :class:`RemoteRubricRewards`, the same functions scored by
  ``rubriq serve`` (through :class:`~rubriq.serve.client.RubriQClient`).

>>> rewards = RubricRewards()
>>> trainer = GRPOTrainer(..., reward_funcs=rewards.functions(),   # doctest: +SKIP
...                       args=GRPOConfig(reward_weights=rewards.weights(), ...))
"""

from __future__ import annotations

from rubriq.reward.base import RewardFunction, completion_text
from rubriq.reward.remote import RemoteRubricRewards
from rubriq.reward.rubric import TOTAL, DimensionReward, RubricRewards
from rubriq.reward.sparse import SPARSE_KINDS, SparseReward, sparse_reward

__all__ = [
    "SPARSE_KINDS",
    "TOTAL",
    "DimensionReward",
    "RemoteRubricRewards",
    "RewardFunction",
    "RubricRewards",
    "SparseReward",
    "completion_text",
    "sparse_reward",
]
