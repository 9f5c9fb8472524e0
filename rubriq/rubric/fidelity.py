"""S_F: functional correctness (paper eq. 11).

For unitary targets U_A on d = 2^n qubits and the candidate's (ancilla-projected) unitary U_c:

    F_process = |Tr(U_A^+ U_c)|^2 / d^2          F_avg = (d F_process + 1) / (d + 1)

S_F is F_process by default (``fidelity.metric``): it is 0 for a circuit orthogonal to the
target, whereas F_avg never drops below 1/(d+1), which would pay garbage a floor reward.  Both
are reported; F_avg is the paper's correctness metric (F_avg >= 0.99).

For state-preparation targets (the encodings) S_F = |<psi_target|U_c|0>|^2.

How it is computed (exact engine, sampled estimator above 12 qubits, torch/CUDA-Q/qcec
backends) is ``fidelity.backend``'s choice (``rubriq.sim``).

Width mismatch (see ``rubriq.sim.exact``): a narrower circuit acts as the identity on the
target's missing qubits; a wider circuit's extra qubits are ancillas that start in |0> and must
end in |0> (clean ancillas).  Both fidelities are invariant to global phase.

>>> from rubriq.circuit.facts import CircuitFacts
>>> from rubriq.targets import make_target
>>> facts = CircuitFacts.from_qasm('OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; h q[0];')
>>> ctx = ScoringContext(target=make_target("qft", num_qubits=1))
>>> round(score(facts, ctx).value, 12)
1.0
"""

from __future__ import annotations

from rubriq.circuit.facts import CircuitFacts
from rubriq.rubric.base import DimensionScore, ScoringContext
from rubriq.sim import compute_fidelity


def score(facts: CircuitFacts, ctx: ScoringContext) -> DimensionScore:
    """Return S_F in [0, 1] with F_process, F_avg and the fidelity kind."""
    target, cfg = ctx.target, ctx.config.fidelity
    if target is None:
        raise ValueError("the fidelity dimension needs a target")
    result = compute_fidelity(facts, target, cfg, ctx.deadline, ctx.config.budget.memory_mb)
    value = result.process_fidelity if cfg.metric == "process" else result.average_fidelity
    return DimensionScore(
        value,
        {
            "kind": result.kind,
            "process_fidelity": result.process_fidelity,
            "average_fidelity": result.average_fidelity,
            "method": result.method,
            "interval": result.interval,
            "verdict": result.verdict,
            "note": result.note,
        },
    )
