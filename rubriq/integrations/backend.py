"""Where the adapters score: in this process (a :class:`~rubriq.evaluator.batch.BatchScorer`, the
default) or through ``rubriq serve`` (a :class:`~rubriq.serve.client.RubriQClient`), with
the same answer either way: one dict per completion, ``EvaluationResult.to_dict()`` plus
``correct`` and ``t0`` (:func:`rubriq.serve.protocol.result_dict`).

:func:`backend` picks one from its arguments or the environment (``RUBRIQ_URL``,
``RUBRIQ_API_KEY``, ``RUBRIQ_CONFIG``: a rubric YAML for in-process scoring, ``RUBRIQ_WORKERS``)
and keeps it for the process, since the frameworks call a reward function, not a constructor.
A process forked from one that scored (verl's PrimeRewardManager scores in a process pool) starts
with no backend and builds its own: the parent's open connection, scoring pool and locks are the
parent's.  (In-process scoring in such a child needs a parent that has not scored in-process
itself: numba's OpenMP threads do not survive a fork, and numba ends a child that uses them.)
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from rubriq.serve.client import URL_ENV, RubriQClient

CONFIG_ENV = "RUBRIQ_CONFIG"
WORKERS_ENV = "RUBRIQ_WORKERS"


class LocalBackend:
    """Score in this process: one BatchScorer (one cache; ``workers`` > 1: one process pool).
    Thread-safe (verl and OpenRLHF call reward functions from several threads)."""

    def __init__(self, config: Any = None, workers: int = 1) -> None:
        from rubriq.config import RubricConfig
        from rubriq.evaluator.batch import BatchScorer

        if isinstance(config, (str, os.PathLike)):
            config = RubricConfig.from_yaml(str(config))
        self.scorer = BatchScorer(config, workers=workers)
        self._lock = threading.Lock()

    def score(self, completions: list[str], targets: list[str | dict]) -> list[dict[str, Any]]:
        from rubriq.serve.protocol import result_dict

        with self._lock:
            results = self.scorer.results(list(completions), list(targets))
            threshold = self.scorer.config.fidelity.correct_threshold
            return [
                result_dict(r, threshold, _t0(self.scorer.evaluator(t).target))
                for r, t in zip(results, targets, strict=True)
            ]

    def close(self) -> None:
        self.scorer.close()


class RemoteBackend:
    """Score through ``rubriq serve`` at ``url`` (retries, split batches: :class:`RubriQClient`)."""

    def __init__(self, url: str, api_key: str | None = None, **client: Any) -> None:
        self.client = RubriQClient(url, api_key, **client)

    def score(self, completions: list[str], targets: list[str | dict]) -> list[dict[str, Any]]:
        return self.client.score(completions, targets)

    def close(self) -> None:
        self.client.close()


def _t0(target: Any) -> int | None:
    try:
        return int(target.t0)
    except Exception:  # noqa: BLE001 - a target without a reference T-count
        return None


_BACKENDS: dict[tuple, Any] = {}
_LOCK = threading.Lock()
_INHERITED: list[Any] = []  # a forked child's copies of its parent's backends: kept, never used or closed


def _after_fork_in_child() -> None:
    global _BACKENDS, _LOCK
    _INHERITED.extend(_BACKENDS.values())
    _BACKENDS, _LOCK = {}, threading.Lock()  # the parent's lock may have been held by another thread


os.register_at_fork(after_in_child=_after_fork_in_child)


def backend(url: str | None = None, api_key: str | None = None, config: str | None = None, workers: int | None = None):
    """The process's backend for these settings (built once): remote when ``url`` (or
    ``RUBRIQ_URL``) is set, else in-process with ``config`` (or ``RUBRIQ_CONFIG``)."""
    url = url or os.environ.get(URL_ENV) or None
    config = config or os.environ.get(CONFIG_ENV) or None
    if workers is None:
        workers = int(os.environ.get(WORKERS_ENV, "1"))
    key = (url, api_key, config, workers)
    with _LOCK:
        found = _BACKENDS.get(key)
        if found is None:
            found = RemoteBackend(url, api_key) if url else LocalBackend(config, workers)
            _BACKENDS[key] = found
        return found


EXAMPLE_TARGET = '{"algorithm": "qft", "do_swaps": true, "inverse": false, "num_qubits": 4}'
"""What a target spec looks like (a row's ``target`` column), for error messages."""


def target_of(label: Any) -> str | dict:
    """A target spec from what a framework passes as the ground truth / label: the dataset's
    JSON string, a dict, or a dict holding it under ``target`` or ``ground_truth``.  Anything
    else (an empty label, text that is not a JSON object with an ``algorithm``) is a ValueError
    that shows it and what a spec looks like; whether the algorithm exists is the scorer's check.

    >>> target_of({"ground_truth": '{"algorithm": "qft", "num_qubits": 2}'})
    '{"algorithm": "qft", "num_qubits": 2}'
    >>> target_of("")
    Traceback (most recent call last):
    ...
    ValueError: got '' where RubriQ needs a target spec: the JSON of a row's target column, e.g. {"algorithm": "qft", "do_swaps": true, "inverse": false, "num_qubits": 4}
    """
    if isinstance(label, dict):
        for name in ("target", "ground_truth"):
            if name in label and "algorithm" not in label:
                return target_of(label[name])
        if "algorithm" in label:
            return label
    elif isinstance(label, (str, bytes)):
        text = label.decode() if isinstance(label, bytes) else str(label)  # str(): numpy's str_ too
        try:
            spec = json.loads(text)
        except ValueError:
            spec = None
        if isinstance(spec, dict) and "algorithm" in spec:
            return text
    shown = repr(label) if len(repr(label)) <= 120 else repr(label)[:117] + "..."
    raise ValueError(
        f"got {shown} where RubriQ needs a target spec: the JSON of a row's target column, e.g. {EXAMPLE_TARGET}"
    )
