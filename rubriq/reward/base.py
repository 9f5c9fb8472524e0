"""What every RubriQ reward function shares: TRL's uniform signature and the completion's text.

A reward function for TRL's ``GRPOTrainer(reward_funcs=[...])`` is called with the batch's
``prompts`` and ``completions`` and every other dataset column as a keyword (RubriQ's rows carry
the target's JSON spec as ``target``), plus ``log_metric`` (TRL >= 1.0); it returns one float per
completion.  :class:`RewardFunction` is that signature; ``__name__`` is what TRL logs the
function's mean and standard deviation under (``rewards/<__name__>/mean``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class RewardFunction(Protocol):
    """TRL's reward-function signature, as every reward of :mod:`rubriq.reward` implements it:
    ``f(prompts, completions, target, log_metric=None, **columns) -> list[float]``, one value
    per completion."""

    __name__: str

    def __call__(
        self,
        prompts: list | None = None,
        completions: list | None = None,
        target: list | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        **columns: Any,
    ) -> list[float]: ...


def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string (standard datasets), or the non-user messages'
    contents of a message list (conversational datasets) joined.

    >>> completion_text([{"role": "assistant", "content": "qreg q[1];"}])
    'qreg q[1];'
    >>> completion_text("qreg q[1];")
    'qreg q[1];'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(m.get("content", "") for m in completion if isinstance(m, dict) and m.get("role") != "user")
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


__all__ = ["RewardFunction", "completion_text"]
