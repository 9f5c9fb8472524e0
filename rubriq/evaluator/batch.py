"""Scoring many completions against many targets: one cache, one worker pool, one ``close()``.

:class:`BatchScorer` is what training (the TRL reward functions), evaluation (``rubriq
evaluate``, the quickstart, the convergence study) and the hardware pipeline use when
completions come with their own targets (a dataset's ``target`` column): each distinct
(target, text) is scored once, results are kept in a bounded LRU cache, and with ``workers``
> 1 the distinct texts of a batch are spread over **one** process pool owned by the scorer
(each worker keeps an evaluator per target), closed by :meth:`close` or by ``with``.

>>> spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
>>> with BatchScorer() as scorer:
...     [round(r.process_fidelity, 12) for r in scorer.results(
...         ['OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];', "no circuit"], [spec, spec])[:1]]
[1.0]
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from rubriq.cache import LRUCache
from rubriq.config import RubricConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.evaluator.result import EvaluationResult, is_cacheable
from rubriq.targets import target_from_spec

log = logging.getLogger(__name__)


def spec_key(spec: str | dict) -> str:
    """The cache key of a target spec: a dataset's ``target`` column is already sorted JSON and
    is used as it is (the reward path calls this for every completion of every function); a
    dict is dumped with sorted keys.

    >>> spec_key({"num_qubits": 2, "algorithm": "qft"})
    '{"algorithm": "qft", "num_qubits": 2}'
    """
    return spec if isinstance(spec, str) else json.dumps(spec, sort_keys=True)


class BatchScorer:
    """Rubric results for (completion, target spec) pairs, each distinct pair scored once."""

    def __init__(self, config: RubricConfig | None = None, workers: int | None = 1, cache_size: int = 65536) -> None:
        self.config = config or RubricConfig()
        self.workers = workers
        self.cache_size = cache_size
        self._evaluators: dict[str, RubriQEvaluator] = {}
        self._results: LRUCache[tuple[str, str], EvaluationResult] = LRUCache(cache_size)
        self._pool: Any = None
        self._pool_workers = 0
        self.stats = {"requests": 0, "evaluated": 0, "seconds": 0.0}

    # picklable (a reward function that crosses a process boundary carries its scorer): the
    # cache, the evaluators and the pool are rebuilt on the other side
    def __getstate__(self) -> dict:
        return {"config": self.config, "workers": self.workers, "cache_size": self.cache_size}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"], state["workers"], state["cache_size"])  # type: ignore[misc]

    def __enter__(self) -> BatchScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def evaluator(self, spec: str | dict) -> RubriQEvaluator:
        """The evaluator of one target spec (built once)."""
        key = spec_key(spec)
        ev = self._evaluators.get(key)
        if ev is None:
            ev = self._evaluators[key] = RubriQEvaluator(target=target_from_spec(json.loads(key)), config=self.config)
        return ev

    def results(self, texts: list[str], specs: list[str | dict]) -> list[EvaluationResult]:
        """One result per (text, spec), in order; each distinct pair scored once."""
        if len(specs) != len(texts):
            raise ValueError(
                f"{len(texts)} completions but {len(specs)} targets: the dataset needs a 'target' column "
                "(rubriq data build writes it)"
            )
        start = time.perf_counter()
        keys = [(spec_key(s), t) for s, t in zip(specs, texts, strict=True)]
        self.stats["requests"] += len(keys)
        batch = {k: self._results[k] for k in dict.fromkeys(keys) if k in self._results}
        todo = [k for k in dict.fromkeys(keys) if k not in batch]
        for key, result in zip(todo, self._score(todo) if todo else [], strict=True):
            batch[key] = result  # the batch holds its own results, whatever the cache keeps
            if is_cacheable(result):  # a busy or broken sandbox is not remembered for the text
                self._results[key] = result
            self.stats["evaluated"] += 1
        out = [batch[k] for k in keys]
        self.stats["seconds"] += time.perf_counter() - start
        return out

    def _score(self, todo: list[tuple[str, str]]) -> list[EvaluationResult]:
        workers = self.workers if self.workers is not None else (_cores() if len(todo) >= 8 else 1)
        if workers > 1 and len(todo) > 1:
            try:
                return list(self._executor(workers).map(_worker_score, todo, chunksize=1))
            except Exception as exc:  # noqa: BLE001 - a broken pool must not stop training: finish here
                log.warning("scoring pool failed (%s: %s); scoring in this process", type(exc).__name__, exc)
                self.close()
        return [self.evaluator(spec).evaluate(text) for spec, text in todo]

    def _executor(self, workers: int):
        if self._pool is None or self._pool_workers != workers:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self.close()
            self._pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
                initargs=(self.config.to_dict(),),
            )
            self._pool_workers = workers
        return self._pool

    def close(self) -> None:
        """Stop the worker processes and every evaluator's helpers (the qcec worker)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        for ev in self._evaluators.values():
            ev.close()


def _cores() -> int:
    import os

    return os.cpu_count() or 1


_WORKER: dict[str, Any] = {}


def _worker_init(config: dict) -> None:
    _WORKER["config"] = RubricConfig.from_dict(config)
    _WORKER["evaluators"] = {}


def _worker_score(item: tuple[str, str]) -> EvaluationResult:
    spec, text = item
    evaluators = _WORKER["evaluators"]
    if spec not in evaluators:
        evaluators[spec] = RubriQEvaluator(target=target_from_spec(json.loads(spec)), config=_WORKER["config"])
    return evaluators[spec].evaluate(text)
