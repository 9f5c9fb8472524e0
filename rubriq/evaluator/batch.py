"""Scoring many completions against many targets: one cache, one worker pool, one ``close()``.

:class:`BatchScorer` is what training (the TRL reward functions), evaluation (``rubriq
evaluate``, the quickstart, the convergence study) and the hardware pipeline use when
completions come with their own targets (a dataset's ``target`` column): each distinct
(target, text) is scored once, results are kept in a bounded LRU cache, and with ``workers``
> 1 the distinct texts of a batch are spread over **one** process pool owned by the scorer
(each worker keeps an evaluator per target), closed by :meth:`close` or by ``with``.

:meth:`BatchScorer.submit` is the same scorer one item at a time, for a server: a future per
(text, target, rubric settings), answered from the cache, the pool (``workers`` > 1) or one
scoring thread (``workers`` = 1), so that items of concurrent requests interleave and a pending
one can be cancelled.  Evaluators are kept per (target, settings) in a bounded cache
(:data:`MAX_EVALUATORS`), here and in each worker.

>>> spec = '{"algorithm": "qft", "num_qubits": 1, "inverse": false, "do_swaps": true}'
>>> with BatchScorer() as scorer:
...     [round(r.process_fidelity, 12) for r in scorer.results(
...         ['OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];', "no circuit"], [spec, spec])[:1]]
[1.0]
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from rubriq.cache import LRUCache
from rubriq.config import RubricConfig
from rubriq.evaluator import RubriQEvaluator, spawn_pool
from rubriq.evaluator.result import EvaluationResult, is_cacheable
from rubriq.targets import target_from_spec

log = logging.getLogger(__name__)

MAX_EVALUATORS = 256
"""Evaluators kept per scorer and per worker process (one per target and rubric settings; a
rewrite target holds its dense unitary, up to 16 MB): the least recent is closed beyond."""


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
        self._evaluators: LRUCache[str, RubriQEvaluator] = LRUCache(MAX_EVALUATORS, on_evict=_close)
        self._results: LRUCache[tuple[str, str], EvaluationResult] = LRUCache(cache_size)
        self._pool: Any = None
        self._pool_workers = 0
        self._thread: Any = None  # submit()'s scoring thread when workers == 1
        self._lock = threading.Lock()  # the cache and the pool, for submit() from any thread
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

    def evaluator(self, spec: str | dict, config: RubricConfig | None = None) -> RubriQEvaluator:
        """The evaluator of one target spec (built once), under this scorer's config or ``config``."""
        key = spec_key(spec)
        settings = "" if config is None or config == self.config else config_key(config)
        ev = self._evaluators.get(settings + key)
        if ev is None:
            ev = RubriQEvaluator(target=target_from_spec(json.loads(key)), config=config or self.config)
            self._evaluators[settings + key] = ev
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
            self.close()
            self._pool = spawn_pool(workers, _worker_init, (self.config.to_dict(),))
            self._pool_workers = workers
        return self._pool

    # -- one item at a time (rubriq.serve) ---------------------------------------------------
    def submit(self, text: str, spec: str | dict, config: RubricConfig | None = None) -> Future[EvaluationResult]:
        """A future of the result of ``text`` against ``spec`` (under ``config``, default this
        scorer's): done at once on a cache hit, else scored by the worker pool (``workers`` >
        1) or by this scorer's one scoring thread (``workers`` = 1, or ``None``) and cached unless
        it is transient (``budget``, ``sandbox``: :func:`~rubriq.evaluator.result.is_cacheable`).
        Thread-safe; a future not yet started can be cancelled.  Its exception, if any, is an
        infrastructure failure (a worker process died: ``BrokenProcessPool``), never the
        completion's fault; the next submit starts a fresh pool.  Do not mix with
        :meth:`results` from another thread (the in-process evaluators are not thread-safe).
        Its result has no ``circuit`` (a server answers ``to_dict()``, which has none).
        """
        settings = "" if config is None or config == self.config else config_key(config)
        key = (settings + spec_key(spec), text)
        with self._lock:
            self.stats["requests"] += 1
            hit = self._results.get(key)
            if hit is not None:
                done: Future[EvaluationResult] = Future()
                done.set_result(hit)
                return done
            item = (settings, spec_key(spec), text)
            if (self.workers or 1) > 1:
                try:
                    future = self._executor(self.workers or 1).submit(_worker_score_with, item, False)
                except BrokenProcessPool:  # a worker died earlier: a fresh pool for this item
                    log.warning("scoring pool broken (a worker process died); starting a fresh one")
                    broken, self._pool = self._pool, None
                    broken.shutdown(wait=False, cancel_futures=True)
                    future = self._executor(self.workers or 1).submit(_worker_score_with, item, False)
            else:
                if self._thread is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._thread = ThreadPoolExecutor(1, thread_name_prefix="rubriq-score")
                future = self._thread.submit(self._score_here, item, config)
        future.add_done_callback(lambda f: self._store(key, f))
        return future

    def _score_here(self, item: tuple[str, str, str], config: RubricConfig | None) -> EvaluationResult:
        _, spec, text = item
        return _without_circuit(self.evaluator(spec, config).evaluate(text))

    def _store(self, key: tuple[str, str], future: Future) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        result = future.result()
        with self._lock:
            self.stats["evaluated"] += 1
            if is_cacheable(result):  # a budget or sandbox result describes the moment, not the text
                self._results[key] = result

    def close(self) -> None:
        """Stop the worker processes, the scoring thread and every evaluator's helpers (the qcec
        worker)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        if self._thread is not None:
            self._thread.shutdown(cancel_futures=True)
            self._thread = None
        for key in list(self._evaluators.keys()):
            _close(self._evaluators[key])


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def config_key(config: RubricConfig) -> str:
    """The cache-key prefix of rubric settings other than a scorer's own (sorted JSON)."""
    return json.dumps(config.to_dict(), sort_keys=True, default=list)


def _close(evaluator: RubriQEvaluator) -> None:
    evaluator.close()


_WORKER: dict[str, Any] = {}


def _worker_init(config: dict) -> None:
    _WORKER["config"] = RubricConfig.from_dict(config)
    _WORKER["evaluators"] = LRUCache(MAX_EVALUATORS, on_evict=_close)


def _worker_score(item: tuple[str, str]) -> EvaluationResult:
    spec, text = item
    return _worker_score_with(("", spec, text))


def _without_circuit(result: EvaluationResult) -> EvaluationResult:
    """The result without its QuantumCircuit (what crosses a process boundary for nothing when
    only ``to_dict()`` is wanted); the evaluator's own cache keeps the full result."""
    if result.circuit is None:
        return result
    return dataclasses.replace(result, circuit=None)


def _worker_score_with(item: tuple[str, str, str], circuit: bool = True) -> EvaluationResult:
    """Score (settings, spec, text) in a pool worker; ``settings`` is "" (the pool's config) or a
    :func:`config_key`; ``circuit=False``: the result without its circuit."""
    settings, spec, text = item
    evaluators = _WORKER["evaluators"]
    ev = evaluators.get(settings + spec)
    if ev is None:
        config = RubricConfig.from_dict(json.loads(settings)) if settings else _WORKER["config"]
        ev = RubriQEvaluator(target=target_from_spec(json.loads(spec)), config=config)
        evaluators[settings + spec] = ev
    result = ev.evaluate(text)
    return result if circuit else _without_circuit(result)
