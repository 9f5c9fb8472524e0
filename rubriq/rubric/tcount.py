"""S_T: the T-count score (paper eq. 8).

    S_T(c) = exp(-alpha_T * T(c)),   alpha_T = 0.05

T(c) is a fact of the circuit, defined once in :mod:`rubriq.circuit.tcount` (gate costs, the
arbitrary-rotation bound 3*ceil(log2(1/eps)) = 102 at eps = 1e-10); this module turns it into
the score and holds compression C = T0/T.

Relative mode (``tcount.mode: relative``, not in the paper) scores a rewrite against its input:
for a target that is a circuit of T-count T0 with a recorded best T-count T_best (the target's
``t_best``, 0 when it records none),

    S_T(c) = clip((T0 - T(c)) / (T0 - T_best), 0, 1)

so a copy of the input (T = T0) earns no T credit and the recorded optimum earns all of it;
when T0 <= T_best there is nothing to remove and S_T = 1 for T <= T0, else 0.  Other targets
(synthesis) keep the absolute score.  In the absolute mode a rewrite that removes two of four T
gates gains exp(-0.1) - exp(-0.2) = 0.086 of S_T; in the relative mode, with T_best = 2, all of it.

>>> from rubriq.circuit.facts import CircuitFacts
>>> facts = CircuitFacts.from_qasm('OPENQASM 2.0; include "qelib1.inc"; qreg q[3];'
...                                'ccx q[0],q[1],q[2]; t q[0]; rz(0.3) q[1];')
>>> result = score(facts, ScoringContext())
>>> result.details["t_count"], round(result.value, 6)
(110, 0.004087)
>>> relative_score(4, t0=5, t_best=1), relative_score(5, t0=5, t_best=1), relative_score(0, t0=5, t_best=1)
(0.25, 0.0, 1.0)
"""

from __future__ import annotations

import math

from rubriq.circuit.facts import CircuitFacts
from rubriq.circuit.gates import ROTATION_GATES
from rubriq.circuit.tcount import gate_t_cost, rotation_t_cost
from rubriq.rubric.base import DimensionScore, ScoringContext


def relative_score(t: int, t0: int, t_best: int = 0) -> float:
    """S_T relative to a rewrite's input: clip((T0 - T) / (T0 - T_best), 0, 1); when T0 <= T_best
    (nothing to remove), 1 for T <= T0 and 0 above."""
    if t0 <= t_best:
        return 1.0 if t <= t0 else 0.0
    return min(1.0, max(0.0, (t0 - t) / (t0 - t_best)))


def score(facts: CircuitFacts, ctx: ScoringContext) -> DimensionScore:
    """Return S_T in [0, 1] with the T-count and the number of arbitrary rotations (and, in the
    relative mode for a circuit target, its T0 and T_best)."""
    cfg = ctx.config.tcount
    arbitrary = rotation_t_cost(cfg.epsilon)
    costs = [gate_t_cost(op, cfg) for op in facts.ops]
    total = sum(costs)
    n_arbitrary = sum(1 for op, c in zip(facts.ops, costs, strict=True) if op.name in ROTATION_GATES and c == arbitrary)
    details: dict = {"t_count": total, "arbitrary_rotations": n_arbitrary}
    target = ctx.target
    if cfg.mode == "relative" and target is not None and target.family == "circuit":
        t0, t_best = target.t0, int(target.params.get("t_best", 0))
        details.update(t0=t0, t_best=t_best, mode="relative")
        return DimensionScore(relative_score(total, t0, t_best), details)
    return DimensionScore(math.exp(-cfg.alpha * total), details)


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
