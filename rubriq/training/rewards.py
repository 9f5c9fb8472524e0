"""The rubric as TRL reward functions (GRPO), one per dimension, scored once per completion.

TRL's ``GRPOTrainer(reward_funcs=[...], args=GRPOConfig(reward_weights=[...]))`` sums the
functions with the weights and logs each one under ``rewards/<name>``; so RubriQ hands it one
function per rubric dimension, named after it, with the rubric weights: TRL's reward is then
exactly R = sum_d w_d S_d and every dimension is logged next to it.

All functions of one :class:`RubricRewards` share one cache: the first function called on a
batch evaluates it (in parallel, deduplicated, ``RubriQEvaluator.evaluate_batch``) and the
others read the cached results, so no completion is parsed or simulated twice.  The target
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

import json
import time
from collections import OrderedDict
from typing import Any, Callable

from rubriq.config import RubricConfig
from rubriq.evaluation.metrics import batch_metrics
from rubriq.evaluator import EvaluationResult, RubriQEvaluator
from rubriq.rubric.engine import DIMENSION_NAMES
from rubriq.targets import target_from_spec


def completion_text(completion: Any) -> str:
    """TRL passes strings (standard datasets) or message lists (conversational datasets)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict) and m.get("role") != "user")
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


class RubricRewards:
    """Per-dimension reward functions over a shared, bounded result cache."""

    def __init__(self, config: RubricConfig | None = None, workers: int | None = 1, cache_size: int = 65536) -> None:
        self.config = config or RubricConfig()
        self.workers = workers
        self.cache_size = cache_size
        self._evaluators: dict[str, RubriQEvaluator] = {}
        self._results: OrderedDict[tuple[str, str], EvaluationResult] = OrderedDict()
        self.stats = {"requests": 0, "evaluated": 0, "seconds": 0.0}

    # -- scoring ------------------------------------------------------------------------------
    def evaluator(self, spec: str | dict) -> RubriQEvaluator:
        key = spec if isinstance(spec, str) else json.dumps(spec, sort_keys=True)
        ev = self._evaluators.get(key)
        if ev is None:
            ev = self._evaluators[key] = RubriQEvaluator(target=target_from_spec(json.loads(key)), config=self.config)
        return ev

    def results(self, completions: list, target: list) -> list[EvaluationResult]:
        """Evaluation results for a batch (cached; each distinct (target, text) scored once)."""
        if len(target) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(target)} targets: the dataset needs a "
                             "'target' column (rubriq data build writes it)")
        start = time.perf_counter()
        texts = [completion_text(c) for c in completions]
        keys = [(t if isinstance(t, str) else json.dumps(t, sort_keys=True), x) for t, x in zip(target, texts)]
        self.stats["requests"] += len(keys)
        missing: dict[str, list[str]] = {}
        for spec, text in keys:
            if (spec, text) not in self._results:
                missing.setdefault(spec, [])
                if text not in missing[spec]:
                    missing[spec].append(text)
        for spec, group in missing.items():
            for text, result in zip(group, self.evaluator(spec).evaluate_batch(group, workers=self.workers)):
                self._results[(spec, text)] = result
                self.stats["evaluated"] += 1
        out = [self._results[k] for k in keys]
        while len(self._results) > self.cache_size:
            self._results.popitem(last=False)
        self.stats["seconds"] += time.perf_counter() - start
        return out

    def log_batch(self, results: list[EvaluationResult], target: list, log_metric: Callable | None,
                  prompts: list | None = None) -> None:
        """Report the batch metrics through TRL's ``log_metric(name, value)``; completions of
        the same prompt form one group (``wrong_rewarded_rate``)."""
        if log_metric is None:
            return
        t0s = [self.evaluator(t).target.t0 for t in target]
        groups = None if prompts is None else [json.dumps(p, sort_keys=True, default=str) for p in prompts]
        for name, value in batch_metrics([r.to_dict() for r in results], t0s,
                                         1 - self.config.fidelity.correct_threshold, groups).items():
            if value == value:  # undefined (NaN) metrics are not logged: TensorBoard refuses None
                log_metric(name, value)

    def _timed_results(self, completions: list, target: list, log_metric: Callable | None,
                       prompts: list | None = None) -> list[EvaluationResult]:
        before = self.stats["seconds"]
        results = self.results(completions, target)
        if log_metric is not None:
            self.log_batch(results, target, log_metric, prompts)
            log_metric("timing/reward_s", self.stats["seconds"] - before)
        return results

    # -- TRL reward functions -----------------------------------------------------------------
    def function(self, dimension: str, log: bool = False) -> Callable[..., list[float]]:
        """The reward function of one dimension (``clifford``, ``tcount``, ``hardware``,
        ``fidelity``, ``efficiency``), or ``total`` for the weighted rubric reward; with
        ``log=True`` it also reports the batch metrics (see the module docstring)."""
        if dimension not in DIMENSION_NAMES and dimension != "total":
            raise ValueError(f"unknown dimension {dimension!r}; use one of {DIMENSION_NAMES + ('total',)}")

        def reward(prompts=None, completions=None, target=None, log_metric=None, **_: Any) -> list[float]:
            if completions is None or target is None:
                raise ValueError("reward functions need completions= and target= (dataset column)")
            results = self._timed_results(list(completions), list(target), log_metric if log else None,
                                          None if prompts is None else list(prompts))
            if dimension == "total":
                return [float(r.reward) for r in results]
            return [float(r.scores[dimension]) for r in results]

        reward.__name__ = dimension
        reward.__qualname__ = f"rubriq_reward_{dimension}"
        return reward

    def _total_only(self) -> bool:
        """Whether R is not a fixed weighted sum of the dimensions (complexity-aware w_T differs
        per prompt; fidelity gating multiplies by S_F): then TRL gets R itself as one function."""
        return self.config.complexity.enabled or self.config.fidelity_gating != "none"

    def functions(self) -> list[Callable[..., list[float]]]:
        """Reward functions for TRL, with :meth:`weights` in the same order.

        With the complexity-aware weight (per-prompt w_T) or fidelity gating (R is not linear
        in the dimensions) the total is one function and the dimensions are logged with weight
        0, so TRL's reward is exactly R in every configuration.
        """
        if self._total_only():
            return [self.function("total", log=True)] + [self.function(d) for d in DIMENSION_NAMES]
        return [self.function(d, log=(i == 0)) for i, d in enumerate(DIMENSION_NAMES)]

    def weights(self) -> list[float]:
        if self._total_only():
            return [1.0] + [0.0] * len(DIMENSION_NAMES)
        w = self.config.weights.as_dict()
        return [w[d] for d in DIMENSION_NAMES]


def sparse_reward(rewards: RubricRewards, kind: str = "inverse_t") -> Callable[..., list[float]]:
    """One terminal scalar (the paper's sparse baselines), sharing ``rewards``' cache.

    It reports the batch metrics like the rubric's first function.
    ``inverse_t``: 1/T(c) for a functionally correct circuit (F_avg >= fidelity.correct_threshold),
    1 when T(c) = 0, else 0 (Sparse-PPO's terminal reward).  ``correct``: 1 if correct else 0.
    """
    if kind not in ("inverse_t", "correct"):
        raise ValueError("kind must be 'inverse_t' or 'correct'")
    threshold = rewards.config.fidelity.correct_threshold

    def reward(prompts=None, completions=None, target=None, log_metric=None, **_: Any) -> list[float]:
        out = []
        for r in rewards._timed_results(list(completions), list(target), log_metric,
                                        None if prompts is None else list(prompts)):
            ok = r.average_fidelity is not None and r.average_fidelity >= threshold and r.error is None
            if kind == "correct":
                out.append(1.0 if ok else 0.0)
            else:
                out.append(0.0 if not ok else (1.0 if r.t_count == 0 else 1.0 / r.t_count))
        return out

    reward.__name__ = f"sparse_{kind}"
    return reward


__all__ = ["RubricRewards", "completion_text", "sparse_reward"]
