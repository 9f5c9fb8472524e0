"""S_E: depth efficiency (paper eq. 12).

    S_E(c) = exp(-beta * D(c) / n^2),   beta = 0.5

D(c) is the depth of the circuit as written (measurements, resets and barriers stripped).  n is
the **target's** number of qubits when a target is known, the candidate's own width only
without one: with the candidate's width, declaring idle qubits would raise the score (the
textbook QFT-4 went from 0.698 to 0.717 in total reward with 8 idle qubits), an exploit a
policy under RL finds.

>>> from rubriq.circuit.facts import CircuitFacts
>>> facts = CircuitFacts.from_qasm('OPENQASM 2.0; include "qelib1.inc"; qreg q[2];'
...                                'h q[0]; cx q[0],q[1]; h q[1]; h q[1];')
>>> facts.depth, round(score(facts, ScoringContext()).value, 6)
(4, 0.606531)
"""

from __future__ import annotations

import math

from rubriq.circuit.facts import CircuitFacts
from rubriq.rubric.base import DimensionScore, ScoringContext


def score(facts: CircuitFacts, ctx: ScoringContext) -> DimensionScore:
    """Return S_E in (0, 1] with the depth and the width n used (the target's when known)."""
    n = max(ctx.target.num_qubits if ctx.target is not None else facts.num_qubits, 1)
    value = math.exp(-ctx.config.efficiency.beta * facts.depth / n**2)
    return DimensionScore(value, {"depth": facts.depth, "num_qubits": n, "circuit_qubits": facts.num_qubits})
