"""S_C: the Clifford fraction (paper eq. 7).

    S_C(c) = |{g in c : g is Clifford}| / |c|

counted over the circuit's canonical gates (``rubriq.circuit.gates``), so that a gate is judged
by what it is, not how it was spelled: ``cp(pi/2)`` counts as its five table gates.  A
rotation rz/rx/ry/p/u1(theta) is Clifford iff theta/(pi/2) is an integer within
``tcount.angle_tol`` (1e-8).  An empty circuit has S_C = 1 (no non-Clifford gate).

>>> from rubriq.circuit.facts import CircuitFacts
>>> facts = CircuitFacts.from_qasm('OPENQASM 2.0; include "qelib1.inc"; qreg q[2];'
...                                'h q[0]; cx q[0],q[1]; t q[1]; rz(pi/2) q[0];')
>>> score(facts, ScoringContext()).value
0.75
"""

from __future__ import annotations

import math

from rubriq.circuit.facts import CircuitFacts
from rubriq.circuit.gates import CLIFFORD_GATES, ROTATION_GATES, Op, multiple_of
from rubriq.rubric.base import DimensionScore, ScoringContext


def is_clifford(op: Op, angle_tol: float = 1e-8) -> bool:
    """True for Clifford table gates and rotations by a multiple of pi/2."""
    if op.name in CLIFFORD_GATES:
        return True
    if op.name in ROTATION_GATES:
        return multiple_of(op.params[0], math.pi / 2, angle_tol) is not None
    return False


def score(facts: CircuitFacts, ctx: ScoringContext) -> DimensionScore:
    """Return S_C in [0, 1] with the Clifford and total gate counts."""
    tol = ctx.config.tcount.angle_tol
    total = len(facts.ops)
    clifford = sum(1 for op in facts.ops if is_clifford(op, tol))
    value = 1.0 if total == 0 else clifford / total
    return DimensionScore(value, {"clifford_gates": clifford, "total_gates": total})
