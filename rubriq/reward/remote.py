"""The rubric's TRL reward functions, scored by ``rubriq serve``: :class:`RemoteRubricRewards` is
:class:`~rubriq.reward.rubric.RubricRewards` with the scoring sent to a server, so TRL's
``GRPOTrainer`` gets the same functions (R as ``total`` with weight 1, each dimension logged
beside it), the same logging (TRL's ``rewards/<name>/mean`` and ``/std``, the batch metrics and
``timing/reward_s``, here the seconds spent waiting for the server), while the CPUs that score
are the server's.

R is the server's (its engine's, in each answer's ``reward``), so TRL's reward is exactly the
server's R; the server's rubric (``GET /v1/rubric``) gives the correctness threshold the batch
metrics use.  Each distinct (target, completion) of a batch is sent once and kept in the
functions' shared cache (transient answers, ``budget`` and ``sandbox``, are not kept): the six
functions of a batch cost one request.

>>> rewards = RemoteRubricRewards("http://127.0.0.1:8000")              # doctest: +SKIP
>>> GRPOTrainer(..., reward_funcs=rewards.functions(),                    # doctest: +SKIP
...             args=GRPOConfig(reward_weights=rewards.weights(), ...))
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from rubriq.cache import LRUCache
from rubriq.config import RubricConfig
from rubriq.evaluator.batch import spec_key
from rubriq.evaluator.result import EvaluationResult, is_cacheable
from rubriq.reward.base import completion_text
from rubriq.reward.rubric import RubricRewards
from rubriq.serve.client import RubriQClient


class RemoteRubricRewards(RubricRewards):
    """The rubric's TRL reward functions over a RubriQ server (``url``, ``api_key``; client
    options as :class:`~rubriq.serve.client.RubriQClient`'s)."""

    def __init__(self, url: str, api_key: str | None = None, cache_size: int = 65536, **client: Any) -> None:
        self._remote = (url, api_key, cache_size, client)
        self.client = RubriQClient(url, api_key, **client)
        super().__init__(RubricConfig.from_dict(self.client.rubric()), workers=1, cache_size=cache_size)
        self._t0s: LRUCache[str, int | None] = LRUCache(max(1024, cache_size // 16))

    def __getstate__(self) -> dict:
        return {"remote": self._remote}

    def __setstate__(self, state: dict) -> None:
        url, api_key, cache_size, client = state["remote"]
        self.__init__(url, api_key, cache_size, **client)  # type: ignore[misc]

    def results(self, completions: list, target: list) -> list[EvaluationResult]:
        start = time.perf_counter()
        texts = [completion_text(c) for c in completions]
        specs = list(target)
        if len(specs) != len(texts):
            raise ValueError(f"{len(texts)} completions but {len(specs)} targets")
        keys = [(spec_key(s), t) for s, t in zip(specs, texts, strict=True)]
        self.stats["requests"] += len(keys)
        todo = [k for k in dict.fromkeys(keys) if k not in self._results]
        batch = {k: self._results[k] for k in dict.fromkeys(keys) if k in self._results}
        if todo:
            answers = self.client.score([t for _, t in todo], [s for s, _ in todo])
            for key, answer in zip(todo, answers, strict=True):
                self._t0s[key[0]] = answer.get("t0")
                batch[key] = result = result_from_dict(answer)
                if is_cacheable(result):  # a budget or sandbox answer is asked again next time
                    self._results[key] = result
                self.stats["evaluated"] += 1
        self.stats["seconds"] += time.perf_counter() - start  # timing/reward_s: the wait for the server
        return [batch[k] for k in keys]

    def t0(self, spec: str | dict) -> int | None:
        key = spec_key(spec)
        if key not in self._t0s:  # pragma: no cover - every scored target's T0 came with its result
            return super().t0(spec)
        return self._t0s[key]

    def close(self) -> None:
        self.client.close()
        super().close()


_FIELDS = {f.name for f in dataclasses.fields(EvaluationResult)} - {"circuit"}


def result_from_dict(data: dict[str, Any]) -> EvaluationResult:
    """An :class:`EvaluationResult` from its ``to_dict()`` (a server's answer; extra keys such
    as ``correct`` and ``t0`` are dropped).

    >>> result_from_dict({"reward": 0.5, "parsed": True, "correct": False, "t0": 3}).reward
    0.5
    """
    values = {k: v for k, v in data.items() if k in _FIELDS}
    if isinstance(values.get("fidelity_interval"), list):
        values["fidelity_interval"] = tuple(values["fidelity_interval"])
    return EvaluationResult(**values)


__all__ = ["RemoteRubricRewards", "result_from_dict"]
