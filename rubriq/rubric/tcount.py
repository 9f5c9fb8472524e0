"""S_T: the T-count score (paper eq. 8).

    S_T(c) = exp(-alpha_T * T(c)),   alpha_T = 0.05

T(c) is a fact of the circuit, defined once in :mod:`rubriq.circuit.tcount` (gate costs, the
arbitrary-rotation bound 3*ceil(log2(1/eps)) = 102 at eps = 1e-10); this module turns it into
the score and holds compression C = T0/T.

>>> from rubriq.circuit.facts import CircuitFacts
>>> facts = CircuitFacts.from_qasm('OPENQASM 2.0; include "qelib1.inc"; qreg q[3];'
...                                'ccx q[0],q[1],q[2]; t q[0]; rz(0.3) q[1];')
>>> result = score(facts, ScoringContext())
>>> result.details["t_count"], round(result.value, 6)
(110, 0.004087)
"""

from __future__ import annotations

import math

from rubriq.circuit.facts import CircuitFacts
from rubriq.circuit.gates import ROTATION_GATES
from rubriq.circuit.tcount import gate_t_cost, rotation_t_cost
from rubriq.rubric.base import DimensionScore, ScoringContext


def score(facts: CircuitFacts, ctx: ScoringContext) -> DimensionScore:
    """Return S_T in (0, 1] with the T-count and the number of arbitrary rotations."""
    cfg = ctx.config.tcount
    arbitrary = rotation_t_cost(cfg.epsilon)
    costs = [gate_t_cost(op, cfg) for op in facts.ops]
    total = sum(costs)
    n_arbitrary = sum(1 for op, c in zip(facts.ops, costs, strict=True) if op.name in ROTATION_GATES and c == arbitrary)
    return DimensionScore(math.exp(-cfg.alpha * total), {"t_count": total, "arbitrary_rotations": n_arbitrary})


def compression(t0: int | None, t: int | None) -> float | None:
    """T-gate compression C = T0 / T(c): the one definition (docs/metrics.md), used by the
    metrics, the baselines, the reports and the study.  ``None`` when undefined (no circuit,
    unknown T0, or T0 = 0: nothing to compress); ``inf`` when every T gate is gone (T = 0 < T0),
    which averages never include (they count such circuits apart).

    >>> compression(21, 14), compression(21, 0), compression(0, 3), compression(21, None)
    (1.5, inf, None, None)
    """
    if t is None or t0 is None or t0 <= 0:
        return None
    return math.inf if t == 0 else t0 / t
