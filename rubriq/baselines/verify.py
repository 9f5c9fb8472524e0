"""Equivalence of an optimized circuit with its input: never count an unverified output.

Up to ``exact_qubits`` (10) the unitaries are compared exactly with RubriQ's engine
(F_process >= 1 - 1e-9, global phase ignored); wider circuits go to mqt.qcec (decision
diagrams / ZX).  Verdicts: ``exact``, ``qcec``, ``not_equivalent``, ``unverified``.
"""

from __future__ import annotations

import numpy as np
from qiskit import QuantumCircuit

from rubriq.circuit.gates import TRUSTED_MAX_GATES, canonical_ops
from rubriq.sim.exact import simulate, unitary_fidelity


def verify(
    original: QuantumCircuit, optimized: QuantumCircuit, exact_qubits: int = 10, qcec_timeout_s: float = 120.0
) -> tuple[str, str]:
    """(verdict, detail): ``exact`` or ``qcec`` when ``optimized`` equals ``original`` up to global phase."""
    if original.num_qubits != optimized.num_qubits:
        return "not_equivalent", f"width {original.num_qubits} -> {optimized.num_qubits}"
    n = original.num_qubits
    if n <= exact_qubits:
        u = simulate(tuple(canonical_ops(original, max_gates=TRUSTED_MAX_GATES)), n, np.eye(2**n, dtype=complex))
        f = unitary_fidelity(
            tuple(canonical_ops(optimized, max_gates=TRUSTED_MAX_GATES)), n, u, exact_qubits
        ).process_fidelity
        return ("exact", f"F={f:.12f}") if f >= 1 - 1e-9 else ("not_equivalent", f"F={f:.6f}")
    try:
        from rubriq.sim.certify import certify

        verdict = certify(original, optimized, timeout_s=qcec_timeout_s)
    except Exception as exc:  # qcec missing or failing: flagged, never counted
        return "unverified", f"{type(exc).__name__}: {exc}"
    if verdict.verdict == "equivalent":
        return "qcec", verdict.detail
    if verdict.verdict == "not_equivalent":
        return "not_equivalent", verdict.detail
    return "unverified", verdict.detail
