"""The rubric as TRL reward functions (GRPO), one per dimension, scored once per completion.

TRL's ``GRPOTrainer(reward_funcs=[...], args=GRPOConfig(reward_weights=[...]))`` sums the
functions with the weights and logs each one under ``rewards/<name>``; so RubriQ hands it one
function per rubric dimension, named after it, with the rubric weights: TRL's reward is then
exactly R = sum_d w_d S_d and every dimension is logged next to it.

All functions of one :class:`RubricRewards` share one scorer (``rubriq.evaluator.batch.
BatchScorer``: one cache, one worker pool): the first function called on a batch scores it
(deduplicated, in parallel with ``reward.workers`` > 1) and the others read the cached
results, so no completion is parsed or simulated twice.  The functions are small callable
objects (:class:`DimensionReward`, :class:`SparseReward`) that pickle with their scorer's
settings, the way TRL's own rewards are classes where they must cross a process boundary.  The target
reaches the reward through the dataset's ``target`` column (the JSON spec written by
``rubriq data build``), which TRL passes to reward functions as a keyword argument.

Each function has TRL's uniform signature ``f(prompts, completions, **columns) -> list[float]``.
The first function of :meth:`RubricRewards.functions` also reports the batch metrics of
docs/metrics.md (parse rate, correct rate, mean fidelity, mean T-count, compression over
correct circuits, violation rate, wrong_rewarded_rate and trivial_rate per GRPO group, the
fraction of each error type) through TRL's ``log_metric`` keyword, and the seconds spent
scoring as ``timing/reward_s``.

>>> rewards = RubricRewards()
>>> spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
>>> fidelity = rewards.function("fidelity")
>>> [round(v, 12) for v in fidelity(prompts=["p"], target=[spec],
...                                  completions=['OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];'])]
[1.0]
>>> rewards.function("clifford")(prompts=["p"], completions=["no circuit"], target=[spec])
[0.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rubriq.config import RubricConfig
from rubriq.evaluation.metrics import batch_metrics
from rubriq.evaluator import EvaluationResult
from rubriq.evaluator.batch import BatchScorer
from rubriq.evaluator.result import is_correct
from rubriq.rubric.engine import DIMENSION_NAMES


def completion_text(completion: Any) -> str:
    """TRL passes strings (standard datasets) or message lists (conversational datasets).

    >>> completion_text([{"role": "assistant", "content": "qreg q[1];"}])
    'qreg q[1];'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict) and m.get("role") != "user")
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


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
        import json

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
        ``fidelity``, ``efficiency``), or ``total`` for the weighted rubric reward; with
        ``log=True`` it also reports the batch metrics (see the module docstring)."""
        return DimensionReward(self, dimension, log)

    def _total_only(self) -> bool:
        """Whether R is not a fixed weighted sum of the dimensions (complexity-aware w_T differs
        per prompt; fidelity gating multiplies by S_F): then TRL gets R itself as one function."""
        return self.config.complexity.enabled or self.config.fidelity_gating != "none"

    def functions(self) -> list[DimensionReward]:
        """Reward functions for TRL, with :meth:`weights` in the same order.

        With the complexity-aware weight (per-prompt w_T) or fidelity gating (R is not linear
        in the dimensions) the total is one function and the dimensions are logged with weight
        0, so TRL's reward is exactly R in every configuration.
        """
        if self._total_only():
            return [self.function("total", log=True)] + [self.function(d) for d in DIMENSION_NAMES]
        return [self.function(d, log=(i == 0)) for i, d in enumerate(DIMENSION_NAMES)]

    def weights(self) -> list[float]:
        """TRL's ``reward_weights`` for :meth:`functions`, in the same order."""
        if self._total_only():
            return [1.0] + [0.0] * len(DIMENSION_NAMES)
        w = self.config.weights.as_dict()
        return [w[d] for d in DIMENSION_NAMES]


class DimensionReward:
    """One rubric dimension (or ``total``, R itself) as a TRL reward function with TRL's uniform
    signature ``f(prompts, completions, target, log_metric=None, **columns) -> list[float]``;
    returns one score in [0, 1] per completion."""

    def __init__(self, rewards: RubricRewards, dimension: str, log: bool = False) -> None:
        if dimension not in DIMENSION_NAMES and dimension != "total":
            raise ValueError(f"unknown dimension {dimension!r}; use one of {DIMENSION_NAMES + ('total',)}")
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
        if self.dimension == "total":
            return [float(r.reward) for r in results]
        return [float(r.scores[self.dimension]) for r in results]


class SparseReward:
    """One terminal scalar (the paper's sparse baselines), sharing ``rewards``' scorer; it
    reports the batch metrics like the rubric's first function.

    ``inverse_t``: 1/T(c) for a functionally correct circuit (F_avg >= fidelity.correct_threshold),
    1 when T(c) = 0, else 0 (Sparse-PPO's terminal reward).  ``correct``: 1 if correct else 0.
    """

    def __init__(self, rewards: RubricRewards, kind: str = "inverse_t") -> None:
        if kind not in ("inverse_t", "correct"):
            raise ValueError("kind must be 'inverse_t' or 'correct'")
        self.rewards, self.kind = rewards, kind
        self.__name__ = f"sparse_{kind}"

    def __call__(self, prompts=None, completions=None, target=None, log_metric=None, **_: Any) -> list[float]:
        threshold = self.rewards.config.fidelity.correct_threshold
        out = []
        for r in self.rewards.timed_results(
            list(completions or ()), list(target or ()), log_metric, None if prompts is None else list(prompts)
        ):
            ok = is_correct(r, threshold)
            if self.kind == "correct":
                out.append(1.0 if ok else 0.0)
            else:
                out.append(0.0 if not ok or r.t_count is None else (1.0 if r.t_count == 0 else 1.0 / r.t_count))
        return out


def sparse_reward(rewards: RubricRewards, kind: str = "inverse_t") -> SparseReward:
    """:class:`SparseReward` of ``kind`` over ``rewards``' scorer."""
    return SparseReward(rewards, kind)


__all__ = ["DimensionReward", "RubricRewards", "SparseReward", "completion_text", "sparse_reward"]
