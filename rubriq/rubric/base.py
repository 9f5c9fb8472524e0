"""The uniform signature shared by every rubric dimension.

A dimension is a plain, pure, deterministic function::

    def score(facts: CircuitFacts, ctx: ScoringContext) -> DimensionScore

``facts`` describes the candidate circuit (computed once), ``ctx`` carries the target and the
configuration.  ``DimensionScore.value`` lies in [0, 1]; ``details`` holds the numbers a
researcher wants to see next to it (T-count, per-backend breakdown, F_avg ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rubriq.config import RubricConfig

if TYPE_CHECKING:  # pragma: no cover
    from rubriq.circuit.facts import CircuitFacts
    from rubriq.targets.base import Target


@dataclass(frozen=True)
class ScoringContext:
    """What a dimension may know besides the circuit."""

    config: RubricConfig = field(default_factory=RubricConfig)
    target: Target | None = None
    deadline: Any = None
    """Optional ``rubriq.budget.Deadline`` that long computations check."""


@dataclass(frozen=True)
class DimensionScore:
    """One dimension's score in [0, 1] and the details it was computed from."""

    value: float
    details: dict[str, Any] = field(default_factory=dict)


class Dimension(Protocol):
    """The uniform signature of a rubric dimension: ``score(facts, ctx) -> DimensionScore``."""

    def __call__(self, facts: CircuitFacts, ctx: ScoringContext) -> DimensionScore: ...
