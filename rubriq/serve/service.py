"""The scoring behind the routes: one :class:`~rubriq.evaluator.batch.BatchScorer` (one worker
pool, one result cache) shared by every request, a bounded number of accepted items, and an
answer for every accepted item.

- **Admission**: a request is accepted whole or not at all.  Accepting it must keep the items
  accepted and not finished at or below ``max_pending``; else :class:`Overloaded` (the route
  answers 503 with ``Retry-After``, estimated from the recent scoring rate), so the backlog is
  bounded and nothing accepted is dropped.
- **Sharing**: identical (completion, target, rubric) items of concurrent requests are scored
  once; each is one asyncio task awaited by every request that holds it.
- **Failures**: a completion's own failure is a typed result (``error_type``: parse, sandbox,
  budget ...), never an exception; a scoring process that dies (``BrokenProcessPool``) costs its
  items one retry on a fresh pool, then they answer ``error_type="internal"``.
- **Cancellation**: a request cancelled (its client went away) releases its items; an item no
  other request holds is cancelled too (it leaves the queue if it had not started).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import math
import time
from concurrent.futures import Future
from typing import Any

from rubriq.config import RubricConfig
from rubriq.evaluator.batch import BatchScorer, config_key
from rubriq.serve.metrics import Metrics
from rubriq.serve.protocol import Item, Limits, ScoreRequest, Targets, failed_dict, result_dict
from rubriq.serve.settings import ServeSettings

log = logging.getLogger(__name__)

RATE_WINDOW_S = 10.0
"""The window of the scoring rate that ``Retry-After`` is estimated from."""
ATTEMPTS = 2
"""Tries per item when its scoring process dies (scoring is deterministic: a retry is safe)."""


class Overloaded(RuntimeError):
    """The request does not fit in the queue; retry after ``retry_after`` seconds."""

    def __init__(self, pending: int, size: int, limit: int, retry_after: int) -> None:
        super().__init__(
            f"{pending} items pending; {size} more would pass the server's --max-pending {limit}: retry after "
            f"{retry_after} s"
        )
        self.retry_after = retry_after


class _Shared:
    """One item being scored and the number of requests waiting for it."""

    __slots__ = ("task", "holders", "abandoned")

    def __init__(self, task: asyncio.Task) -> None:
        self.task, self.holders, self.abandoned = task, 0, False


class ScoringService:
    """What ``POST /v1/score`` runs; one per app (and per Ray replica)."""

    def __init__(self, settings: ServeSettings, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.config = RubricConfig.from_yaml(settings.config) if settings.config else RubricConfig()
        self.scorer = BatchScorer(self.config, workers=settings.scoring_workers)
        self.limits = Limits(max_items=settings.max_items, max_completion_bytes=settings.max_completion_kb * 1024)
        self.targets = Targets(self.config, self.limits)
        self.pending = 0
        self._shared: dict[tuple[str, str, str], _Shared] = {}
        self._answered: collections.deque[tuple[float, int]] = collections.deque()  # (when, items)
        self.metrics = metrics

    # -- admission --------------------------------------------------------------------------------
    def admit(self, size: int) -> None:
        """Count ``size`` items in, or raise :class:`Overloaded`."""
        limit = self.settings.max_pending
        if self.pending + size > limit:
            raise Overloaded(self.pending, size, limit, self.retry_after(size))
        self.pending += size

    def release(self, size: int) -> None:
        self.pending -= size

    def retry_after(self, size: int) -> int:
        """Seconds until ``size`` more items would likely fit: the excess over the limit at the
        rate items were answered over the last :data:`RATE_WINDOW_S` seconds, between 1 and 60."""
        excess = self.pending + size - self.settings.max_pending
        now = time.monotonic()
        while self._answered and now - self._answered[0][0] > RATE_WINDOW_S:
            self._answered.popleft()
        if not self._answered:
            return 1
        span = max(1.0, now - self._answered[0][0])
        rate = sum(n for _, n in self._answered) / span
        return int(min(60, max(1, math.ceil(excess / rate))))

    def _observe(self, items: int) -> None:
        now = time.monotonic()
        self._answered.append((now, items))
        while now - self._answered[0][0] > RATE_WINDOW_S:
            self._answered.popleft()

    # -- scoring ----------------------------------------------------------------------------------
    async def score(self, request: ScoreRequest) -> list[dict[str, Any]]:
        """One answer per item of an admitted request, in order."""
        config = request.config
        settings = "" if config is None else config_key(config)
        threshold = (config or self.config).fidelity.correct_threshold
        keys = [(settings, item.spec, item.completion) for item in request.items]
        held: list[_Shared] = []
        try:
            tasks, items = {}, {}
            for key, item in zip(keys, request.items, strict=True):
                if key not in tasks:
                    shared = self._hold(key, item, config)
                    held.append(shared)
                    tasks[key], items[key] = shared.task, item
            done = await asyncio.gather(*(asyncio.shield(t) for t in tasks.values()), return_exceptions=True)
            by_key: dict[tuple[str, str, str], Any] = {}
            for key, result in zip(tasks, done, strict=True):
                item = items[key]
                if isinstance(result, asyncio.CancelledError):
                    # another request gave this item up (it was the last to wait for it) just as this
                    # one joined: this request was not cancelled, so it scores the item itself
                    shared = self._hold(key, item, config)
                    held.append(shared)
                    result = await asyncio.shield(shared.task)
                elif isinstance(result, BaseException):
                    raise result
                by_key[key] = result
        finally:
            for shared in held:
                shared.holders -= 1
                if shared.holders <= 0 and not shared.task.done():
                    shared.abandoned = True  # never handed to a later request
                    shared.task.cancel()
        self._observe(len(keys))
        out = []
        for key, item in zip(keys, request.items, strict=True):
            result = by_key[key]  # a dict: the item could not be scored (failed_dict)
            answer = result if isinstance(result, dict) else result_dict(result, threshold, item.t0)
            out.append(answer)
            if self.metrics is not None:
                self.metrics.items.labels(answer.get("error_type") or "none").inc()
        return out

    def _hold(self, key: tuple[str, str, str], item: Any, config: Any) -> _Shared:
        """The scoring of ``key``, shared with the requests already waiting for it, or a new one
        (also when the one there was given up: a cancelled task must not answer a new request)."""
        shared = self._shared.get(key)
        if shared is None or shared.abandoned or shared.task.cancelled():
            shared = self._shared[key] = _Shared(asyncio.ensure_future(self._score_one(key, item, config)))
            shared.task.add_done_callback(functools.partial(self._forget, key, shared))
        shared.holders += 1
        return shared

    def _forget(self, key: tuple[str, str, str], shared: _Shared, _task: object = None) -> None:
        if self._shared.get(key) is shared:
            del self._shared[key]

    async def _score_one(self, key: tuple[str, str, str], item: Item, config: RubricConfig | None) -> Any:
        """The EvaluationResult of one item (or a failed answer after :data:`ATTEMPTS`)."""
        error: BaseException | None = None
        for attempt in range(1, ATTEMPTS + 1):
            future = self.scorer.submit(item.completion, item.spec, config)
            if self.metrics is not None and future.done() and attempt == 1 and not future.exception():
                self.metrics.cache_hits.inc()
            try:
                return await _wait(future)
            except asyncio.CancelledError:
                future.cancel()
                raise
            except Exception as exc:  # noqa: BLE001 - the worker process died, not the completion's fault
                error = exc
                log.warning(
                    "scoring process failed on an item (attempt %d of %d): %s: %s",
                    attempt,
                    ATTEMPTS,
                    type(exc).__name__,
                    exc,
                )
        return failed_dict(
            "internal",
            f"the scoring process died {ATTEMPTS} times on this item ({type(error).__name__}: {error}); "
            "please report it",
            item.spec,
            item.t0,
        )

    def warm_up(self) -> None:
        """Start the worker pool now (a first request should not pay for the processes' start)."""
        spec = '{"algorithm": "qft", "do_swaps": true, "inverse": false, "num_qubits": 1}'
        for k in range(max(1, self.scorer.workers or 1)):
            self.scorer.submit(f'OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0]; // warm-up {k}', spec)

    def close(self) -> None:
        for shared in list(self._shared.values()):
            shared.task.cancel()
        self.scorer.close()


async def _wait(future: Future) -> Any:
    """Await a concurrent future without chaining cancellation to it (``asyncio.wrap_future``
    would cancel the shared future when one waiter is cancelled)."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future = loop.create_future()

    def settle(f: Future) -> None:
        def set_it() -> None:
            if waiter.done():
                return
            if f.cancelled():
                waiter.cancel()
            elif f.exception() is not None:
                waiter.set_exception(f.exception())  # type: ignore[arg-type]
            else:
                waiter.set_result(f.result())

        try:
            loop.call_soon_threadsafe(set_it)
        except RuntimeError:  # the loop is closed (shutdown): nobody waits any more
            pass

    future.add_done_callback(settle)
    return await waiter
