"""T(c): the T-count of a circuit, a fact of its gates (read by the rubric's S_T, the targets'
T0, the suites, the datasets and the baselines alike).

    T(c) = sum_g T(g)

with T(g) from the gate table of :mod:`rubriq.circuit.gates`:

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
>>> t_count(facts.ops)
110
"""

from __future__ import annotations

import math
from collections.abc import Iterable

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


def t_count(ops: Iterable[Op], cfg: TCountConfig = TCountConfig()) -> int:
    """T(c): the summed T-cost of canonical gates."""
    return sum(gate_t_cost(op, cfg) for op in ops)
