"""RubriQ's own verl reward manager: the reward loop's responses scored in batches.

From verl 0.7 on, ``main_ppo`` scores in reward-loop workers that call their reward manager's
``run_single`` once per response, concurrently (a whole chunk of the batch at once, or each
rollout as it finishes); a ``custom_reward_function`` is then called once per response, and
the batch reward manager of older releases is gone (``Unknown reward manager: batch``).
:class:`RubriQRewardManager` is a reward-loop manager (verl's ``RewardManagerBase``) that
collects the responses arriving together in one worker and scores them in one call: one
``BatchScorer`` batch in-process (deduplicated, spread over ``workers`` processes) or one
``POST /v1/score`` through ``rubriq serve``.  verl selects it with
``reward.reward_manager.source=importlib``, ``reward.reward_manager.module.path=
pkg://rubriq.integrations.verl_manager`` and ``reward.reward_manager.name=RubriQRewardManager``
(docs/integrations.md).  Its answer per response is the one of
:func:`rubriq.integrations.verl.compute_score`: ``reward_score`` = R, and the dimensions,
``acc`` and ``parsed`` as ``reward_extra_info``.

Options, from ``reward.reward_kwargs`` (``+reward.reward_kwargs.url=http://scorer:8000``):
``url``, ``api_key``, ``config``, ``workers`` (as the environment's ``RUBRIQ_URL``,
``RUBRIQ_API_KEY``, ``RUBRIQ_CONFIG``, ``RUBRIQ_WORKERS``), ``batch_wait_s`` (how long the first
response of a batch waits for others, default 0.05 s) and ``max_batch`` (default 1024).

This module imports verl (the class is verl's subclass); :mod:`rubriq.integrations.verl` does not.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from rubriq.integrations.backend import backend
from rubriq.integrations.verl import ground_truth_spec, row

log = logging.getLogger(__name__)


class RubriQRewardManager(RewardManagerBase):
    """verl's reward-loop manager for RubriQ: ``run_single`` per response, scored in batches."""

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
        **_: Any,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        options = dict(config.reward.get("reward_kwargs") or {})
        known = {"url", "api_key", "config", "workers", "batch_wait_s", "max_batch"}
        if set(options) - known:
            log.warning(
                "RubriQRewardManager ignores reward.reward_kwargs %s (it takes %s)",
                sorted(set(options) - known),
                sorted(known),
            )
        custom = config.reward.get("custom_reward_function") or {}
        if custom.get("path"):
            log.warning(
                "RubriQRewardManager scores with RubriQ; reward.custom_reward_function.path=%s is not used",
                custom["path"],
            )
        self.backend = backend(
            options.get("url"), options.get("api_key"), options.get("config"), options.get("workers")
        )
        self.batches = Batches(
            self.backend.score, float(options.get("batch_wait_s", 0.05)), int(options.get("max_batch", 1024))
        )

    async def run_single(self, data: Any) -> dict:
        item = data[-1:][0]  # multi-sequence outputs: the last sequence, as verl's naive manager
        response_ids = item.batch["responses"]
        length = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        # decoded here, not in a thread: the responses of a chunk then all reach the batch
        # before its first wait ends (a decode is a fraction of a millisecond)
        tokenizer: Any = self.tokenizer
        text = tokenizer.decode(response_ids[:length], skip_special_tokens=True)
        target = ground_truth_spec(item.non_tensor_batch["reward_model"]["ground_truth"])
        scores = row(await self.batches.score(text, target))
        return {"reward_score": scores["score"], "reward_extra_info": dict(scores)}


class Batches:
    """Concurrent ``score(text, target)`` calls of one event loop, scored together: the first of
    a batch waits ``wait_s`` for others (or until ``max_items`` are in), then one call of
    ``score_many(texts, targets)`` in a thread scores them all; each caller gets its own result,
    or the batch's exception."""

    def __init__(self, score_many: Any, wait_s: float = 0.05, max_items: int = 1024) -> None:
        if wait_s < 0 or max_items < 1:
            raise ValueError("batch_wait_s must be >= 0 and max_batch >= 1")
        self.score_many, self.wait_s, self.max_items = score_many, wait_s, max_items
        self._pending: list[tuple[str, Any, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self.sizes: list[int] = []
        """The size of every batch scored (for tests and logs)."""

    async def score(self, text: str, target: Any) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((text, target, future))
        if len(self._pending) >= self.max_items:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.wait_s, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if not batch:
            return
        self.sizes.append(len(batch))
        loop = asyncio.get_running_loop()
        done = loop.run_in_executor(None, self.score_many, [t for t, _, _ in batch], [g for _, g, _ in batch])

        def hand_out(outcome: asyncio.Future) -> None:
            error = outcome.exception()
            results = [] if error is not None else outcome.result()
            if error is None and len(results) != len(batch):
                error = RuntimeError(f"{len(results)} results for a batch of {len(batch)}")
            for i, (_, _, future) in enumerate(batch):
                if future.done():  # its caller was cancelled
                    continue
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(results[i])

        done.add_done_callback(hand_out)


__all__ = ["Batches", "RubriQRewardManager"]
