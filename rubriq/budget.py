"""A per-completion time budget, checked cooperatively by the long loops of an evaluation.

Signals cannot safely interrupt NumPy or Qiskit's Rust code, so the loops that can run long
(canonical decomposition, simulation) call :meth:`Deadline.check` between gates, and the
Python sandbox gets at most the remaining time.

>>> Deadline(None).remaining() is None
True
>>> Deadline(0.0).check("simulation")
Traceback (most recent call last):
...
rubriq.budget.BudgetExceeded: time budget of 0 s exhausted during simulation
"""

from __future__ import annotations

import time


class BudgetExceeded(RuntimeError):
    """The evaluation ran out of its time or memory budget."""


class Deadline:
    """A wall-clock deadline (``None`` seconds: never); long loops call ``check()`` between steps."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.end = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float | None:
        return None if self.end is None else self.end - time.monotonic()

    def within(self, seconds: float) -> Deadline:
        """A deadline that ends ``seconds`` from now, or at this one's end if that is sooner.

        >>> Deadline(10.0).within(1.0).remaining() <= 1.0
        True
        """
        sub = Deadline(seconds)
        if self.end is not None and (sub.end is None or self.end < sub.end):
            sub.end, sub.seconds = self.end, self.seconds
        return sub

    def expired(self) -> bool:
        return self.end is not None and time.monotonic() >= self.end

    def check(self, stage: str) -> None:
        if self.end is not None and time.monotonic() >= self.end:
            raise BudgetExceeded(f"time budget of {self.seconds:g} s exhausted during {stage}")


NO_DEADLINE = Deadline(None)
