"""The one bounded cache RubriQ uses (results by text, scores by circuit, results by target),
and :func:`cache_root`, the one folder on disk where RubriQ keeps what it caches between runs.

``functools.lru_cache`` caches function calls, not values put in by hand with a size bound and
hit counting, which is what the evaluators need; ``OrderedDict`` gives the LRU order.

>>> cache = LRUCache(2)
>>> cache["a"] = 1; cache["b"] = 2; _ = cache.get("a"); cache["c"] = 3
>>> sorted(cache.keys()), "b" in cache
(['a', 'c'], False)
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """At most ``maxsize`` entries (0: none are kept); reading or writing an entry makes it the
    most recent.  Safe to share between threads (an evaluator scoring completions concurrently)."""

    def __init__(self, maxsize: int, on_evict: Callable[[V], None] | None = None) -> None:
        if maxsize < 0:
            raise ValueError(f"maxsize must be >= 0 (0: keep nothing), got {maxsize}")
        self.maxsize = maxsize
        self.on_evict = on_evict
        """Called with each value pushed out (an evaluator's worker processes are closed)."""
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.RLock()

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value of ``key`` (now the most recent), or ``default``."""
        with self._lock:
            if key not in self._data:
                return default
            self._data.move_to_end(key)
            return self._data[key]

    def __getitem__(self, key: K) -> V:
        with self._lock:
            value = self._data[key]
            self._data.move_to_end(key)
            return value

    def __setitem__(self, key: K, value: V) -> None:
        evicted = []
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                evicted.append(self._data.popitem(last=False)[1])
        if self.on_evict is not None:
            for item in evicted:
                self.on_evict(item)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def keys(self):
        """The keys, least recent first."""
        return self._data.keys()

    def clear(self) -> None:
        """Forget every entry (no eviction callback)."""
        with self._lock:
            self._data.clear()


def cache_root() -> Path:
    """RubriQ's folder on disk for what it downloads, converts or caches between runs (the
    embedded model, endpoint completions, the fetched T-count suite): ``$RUBRIQ_CACHE``, or
    ``~/.cache/rubriq``."""
    return Path(os.environ.get("RUBRIQ_CACHE", Path.home() / ".cache" / "rubriq"))
