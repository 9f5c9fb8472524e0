"""The rubric reward R for TRL (GRPO), and each of its five dimensions, scored once per completion.

R is defined once, by the rubric engine (:func:`rubriq.rubric.engine.score_facts`, paper eq. 6,
with the complexity-aware weight and fidelity gating where configured); these functions read it
and never recompute it.  :meth:`RubricRewards.functions` hands TRL R itself as one function
(``total``, weight 1) and the five dimensions beside it with weight 0: TRL's
``GRPOTrainer(reward_funcs=..., args=GRPOConfig(reward_weights=...))`` then optimizes exactly
the engine's R in every configuration, and logs each dimension as ``rewards/<dimension>/mean``
next to ``rewards/total/mean``.

All functions of one :class:`RubricRewards` share one scorer (``rubriq.evaluator.batch.
BatchScorer``: one cache, one worker pool): the first function called on a batch scores it
(deduplicated, in parallel with ``reward.workers`` > 1) and the others read the cached
results, so no completion is parsed or simulated twice.  The functions are small callable
objects (:class:`DimensionReward`) that pickle with their scorer's settings, the way TRL's own
rewards are classes where they must cross a process boundary.  The target reaches the reward
through the dataset's ``target`` column (the JSON spec written by ``rubriq data build``).

The ``total`` function also reports the batch metrics of docs/metrics.md (parse rate, correct
rate, mean fidelity, mean T-count, compression over correct circuits, violation rate,
wrong_rewarded_rate and trivial_rate per GRPO group, the fraction of each error type) through
TRL's ``log_metric`` keyword, and the seconds spent scoring as ``timing/reward_s``.

>>> rewards = RubricRewards()
>>> spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
>>> h = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];'
>>> [f.__name__ for f in rewards.functions()], rewards.weights()
(['total', 'clifford', 'tcount', 'hardware', 'fidelity', 'efficiency'], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
>>> [round(v, 12) for v in rewards.function("fidelity")(prompts=["p"], completions=[h], target=[spec])]
[1.0]

R of H for QFT-1 with the paper's weights: 0.2 S_C + 0.15 S_T + 0.15 S_H + 0.4 S_F + 0.1 S_E =
0.2 + 0.15 + 0.15 * 0.8 + 0.4 + 0.1 exp(-1/2) (one Clifford gate, no T, F = 1); no circuit: 0.

>>> total = rewards.function("total")
>>> [round(v, 12) for v in total(prompts=["p", "p"], completions=[h, "no circuit"], target=[spec, spec])]
[0.930653065971, 0.0]
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rubriq.config import RubricConfig
from rubriq.evaluation.metrics import batch_metrics
from rubriq.evaluator import EvaluationResult
from rubriq.evaluator.batch import BatchScorer
from rubriq.reward.base import completion_text
from rubriq.rubric.engine import DIMENSION_NAMES

TOTAL = "total"
"""The name of R's function (TRL logs ``rewards/total/mean``)."""


class RubricRewards(BatchScorer):
    """The rubric's TRL reward functions over one :class:`BatchScorer` (shared cache and pool)."""

    def __init__(self, config: RubricConfig | None = None, workers: int | None = 1, cache_size: int = 65536) -> None:
        super().__init__(config, workers, cache_size)
        self.on_batch: Callable[[list[EvaluationResult], list, list | None, list[str]], None] | None = None
        """Called with (results, targets, prompts, completion texts) once per training batch
        (studies record every training completion's five scores and what became of it with it);
        not pickled (unpickling re-runs __init__)."""

    def results(self, completions: list, target: list) -> list[EvaluationResult]:
        """Evaluation results for a batch of TRL completions (cached; each distinct (target,
        text) scored once)."""
        return super().results([completion_text(c) for c in completions], list(target))

    def log_batch(
        self, results: list[EvaluationResult], target: list, log_metric: Callable | None, prompts: list | None = None
    ) -> None:
        """Report the batch metrics through TRL's ``log_metric(name, value)``; completions of
        the same prompt form one group (``wrong_rewarded_rate``)."""
        if log_metric is None:
            return
        t0s: list[int | None] = [self.t0(t) for t in target]
        groups = None if prompts is None else [json.dumps(p, sort_keys=True, default=str) for p in prompts]
        for name, value in batch_metrics(
            [r.to_dict() for r in results], t0s, 1 - self.config.fidelity.correct_threshold, groups
        ).items():
            if value == value:  # undefined (NaN) metrics are not logged: TensorBoard refuses None
                log_metric(name, value)

    def t0(self, spec: str | dict) -> int | None:
        """The reference T-count of a target (its evaluator's)."""
        return self.evaluator(spec).target.t0

    def timed_results(
        self, completions: list, target: list, log_metric: Callable | None, prompts: list | None = None
    ) -> list[EvaluationResult]:
        """:meth:`results`, and with ``log_metric`` the batch metrics and ``timing/reward_s``."""
        before = self.stats["seconds"]
        results = self.results(completions, target)
        if log_metric is not None:
            self.log_batch(results, target, log_metric, prompts)
            log_metric("timing/reward_s", self.stats["seconds"] - before)
            if self.on_batch is not None:
                self.on_batch(results, list(target), prompts, [completion_text(c) for c in completions])
        return results

    # -- TRL reward functions -----------------------------------------------------------------
    def function(self, dimension: str, log: bool = False) -> DimensionReward:
        """The reward function of one dimension (``clifford``, ``tcount``, ``hardware``,
        ``fidelity``, ``efficiency``), or ``total`` for the rubric reward R; with ``log=True``
        it also reports the batch metrics (see the module docstring)."""
        return DimensionReward(self, dimension, log)

    def functions(self) -> list[DimensionReward]:
        """Reward functions for TRL, with :meth:`weights` in the same order: R (``total``, the
        engine's, reporting the batch metrics) and the five dimensions, logged beside it."""
        return [self.function(TOTAL, log=True)] + [self.function(d) for d in DIMENSION_NAMES]

    def weights(self) -> list[float]:
        """TRL's ``reward_weights`` for :meth:`functions`: 1 for R, 0 for each dimension (logged,
        not summed: TRL's reward is R itself)."""
        return [1.0] + [0.0] * len(DIMENSION_NAMES)


class DimensionReward:
    """One rubric dimension, or ``total`` (R itself, as the engine computed it), as a TRL reward
    function with TRL's uniform signature ``f(prompts, completions, target, log_metric=None,
    **columns) -> list[float]``; returns one score in [0, 1] per completion (0 where nothing
    could be scored).

    >>> spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
    >>> DimensionReward(RubricRewards(), "clifford")(completions=["no circuit"], target=[spec])
    [0.0]
    """

    def __init__(self, rewards: RubricRewards, dimension: str, log: bool = False) -> None:
        if dimension not in DIMENSION_NAMES and dimension != TOTAL:
            raise ValueError(f"unknown dimension {dimension!r}; use one of {DIMENSION_NAMES + (TOTAL,)}")
        self.rewards, self.dimension, self.log = rewards, dimension, log
        self.__name__ = dimension  # TRL logs rewards/<__name__>
        self.__qualname__ = f"rubriq_reward_{dimension}"

    def __call__(self, prompts=None, completions=None, target=None, log_metric=None, **_: Any) -> list[float]:
        if completions is None or target is None:
            raise ValueError("reward functions need completions= and target= (dataset column)")
        results = self.rewards.timed_results(
            list(completions),
            list(target),
            log_metric if self.log else None,
            None if prompts is None else list(prompts),
        )
        if self.dimension == TOTAL:
            return [float(r.reward) for r in results]
        return [float(r.scores[self.dimension]) for r in results]


__all__ = ["TOTAL", "DimensionReward", "RubricRewards"]
