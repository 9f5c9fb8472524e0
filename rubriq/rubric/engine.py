"""The rubric engine: five dimensions, one weighted reward (paper eq. 6).

    R(c) = w_C S_C + w_T S_T + w_H S_H + w_F S_F + w_E S_E

With ``fidelity_gating: multiplicative`` (off by default) the non-fidelity terms are scaled by
S_F: R = w_F S_F + S_F sum_{d != F} w_d S_d.  With ``fidelity_gating: correct`` they count only
for a correct circuit (F_avg >= ``fidelity.correct_threshold``: ``sim.measures.meets_threshold``):
R = w_F S_F + [correct] sum_{d != F} w_d S_d.

The engine is a composition and nothing more: :data:`DIMENSIONS` lists the dimension
functions (cheapest first), :func:`score_facts` runs them on one ``CircuitFacts`` and sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rubriq.circuit.facts import CircuitFacts
from rubriq.rubric import clifford, efficiency, fidelity, hardware, tcount
from rubriq.rubric.base import Dimension, ScoringContext
from rubriq.rubric.weights import effective_weights
from rubriq.sim.measures import meets_threshold

DIMENSIONS: dict[str, Dimension] = {
    "clifford": clifford.score,
    "tcount": tcount.score,
    "efficiency": efficiency.score,
    "hardware": hardware.score,
    "fidelity": fidelity.score,
}
DIMENSION_NAMES = ("clifford", "tcount", "hardware", "fidelity", "efficiency")
"""The paper's order (w_C, w_T, w_H, w_F, w_E)."""


@dataclass(frozen=True)
class RubricScores:
    """The five dimension scores, their details and weights, and the reward R."""

    scores: dict[str, float]
    details: dict[str, dict[str, Any]]
    weights: dict[str, float]
    reward: float = field(default=0.0)


def score_facts(facts: CircuitFacts, ctx: ScoringContext) -> RubricScores:
    """Score every dimension of one circuit and combine them with the (effective) weights."""
    t0 = ctx.target.t0 if (ctx.target is not None and ctx.config.complexity.enabled) else None
    weights = effective_weights(ctx.config, t0)
    results = {name: fn(facts, ctx) for name, fn in DIMENSIONS.items()}
    scores = {name: float(results[name].value) for name in DIMENSION_NAMES}
    reward = sum(weights[name] * scores[name] for name in DIMENSION_NAMES)
    if ctx.config.fidelity_gating != "none":
        others = reward - weights["fidelity"] * scores["fidelity"]
        if ctx.config.fidelity_gating == "multiplicative":
            gate = scores["fidelity"]
        else:  # "correct"
            f_avg = results["fidelity"].details.get("average_fidelity")
            gate = 1.0 if meets_threshold(f_avg, ctx.config.fidelity.correct_threshold) else 0.0
        reward = weights["fidelity"] * scores["fidelity"] + gate * others
    return RubricScores(scores, {n: results[n].details for n in DIMENSION_NAMES}, weights, reward)
