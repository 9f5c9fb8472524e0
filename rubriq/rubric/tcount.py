"""S_T: the T-count score (paper eq. 8).

    S_T(c) = exp(-alpha_T * T(c)),   alpha_T = 0.05,   T(c) = sum_g T(g)

with T(g) from the gate table of ``rubriq.circuit.gates``:

* Clifford gates (and rotations by multiples of pi/2): 0;
* t, tdg, and any rotation by an odd multiple of pi/4: 1;
* ccx, ccz, cswap: 7 (the standard ancilla-free 7-T decompositions);
* any other rotation: 3 * ceil(log2(1/eps)), the Ross-Selinger / gridsynth bound for a
  z-rotation to precision eps (default eps = 1e-10: 3 * 34 = 102).

Note on the paper: its text says an arbitrary rotation costs "~50 T gates", but its own
formula 3*ceil(log2(1/eps)) gives 102 at its eps = 1e-10 (50 would correspond to eps ~ 1e-5).
We implement the formula; set ``tcount.epsilon`` to change the cost.

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
from rubriq.circuit.gates import (
    CLIFFORD_GATES,
    ROTATION_GATES,
    T_GATES,
    TOFFOLI_LIKE_GATES,
    TOFFOLI_T_COST,
    Op,
    multiple_of,
)
from rubriq.config import TCountConfig
from rubriq.rubric.base import DimensionScore, ScoringContext


def rotation_t_cost(epsilon: float) -> int:
    """T-cost of one arbitrary rotation synthesized to precision eps: 3*ceil(log2(1/eps)).

    >>> rotation_t_cost(1e-10)
    102
    """
    if not 0 < epsilon < 1:
        raise ValueError(f"epsilon must lie in (0, 1), got {epsilon}")
    return 3 * math.ceil(math.log2(1.0 / epsilon))


def gate_t_cost(op: Op, cfg: TCountConfig = TCountConfig()) -> int:
    """T(g) of one canonical gate."""
    if op.name in CLIFFORD_GATES:
        return 0
    if op.name in T_GATES:
        return 1
    if op.name in TOFFOLI_LIKE_GATES:
        return TOFFOLI_T_COST
    if op.name in ROTATION_GATES:
        theta = op.params[0]
        if multiple_of(theta, math.pi / 2, cfg.angle_tol) is not None:
            return 0
        if multiple_of(theta, math.pi / 4, cfg.angle_tol) is not None:
            return 1
        return rotation_t_cost(cfg.epsilon)
    raise ValueError(f"{op.name!r} is not a gate of the rubric's table")


def t_count(ops, cfg: TCountConfig = TCountConfig()) -> int:
    """T(c): the summed T-cost of canonical gates."""
    return sum(gate_t_cost(op, cfg) for op in ops)


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
