"""Rewrite targets: "this circuit, with fewer T gates, same unitary".

The target unitary is ``qiskit.quantum_info.Operator`` of the given circuit (measurements and
barriers stripped), i.e. exactly Qiskit's conventions; T0 is its T-count under the rubric's
gate table.  Rewrite prompts show the circuit, so they are as long as the circuit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rubriq.targets.base import Target, TargetError


class CircuitTarget(Target):
    name = "circuit"
    family = "circuit"
    kind = "unitary"
    summary = "the unitary of a given OpenQASM circuit (rewrite with fewer T gates)"
    parameters = {"qasm": "the circuit as an OpenQASM 2.0/3.0 string (required)"}

    def __init__(self, num_qubits: int | None = None, **params: Any) -> None:
        from rubriq.extract.qasm import QASMError, QASMLimits, load_qasm
        from rubriq.rubric.gates import strip_non_unitary

        qasm = params.get("qasm")
        if not isinstance(qasm, str) or not qasm.strip():
            raise TargetError("circuit: pass the target circuit as qasm=<OpenQASM string> (target_qasm=...)")
        try:
            # Targets come from datasets and users, not from the model: larger limits than
            # completions get (the classic suite has 48-qubit, 200 KB circuits).
            circuit = strip_non_unitary(load_qasm(qasm, QASMLimits(max_bytes=50_000_000, max_qubits=256)))
        except (QASMError, ValueError) as exc:
            raise TargetError(f"circuit: the target QASM does not load: {exc}") from None
        if num_qubits is not None and num_qubits != circuit.num_qubits:
            raise TargetError(f"circuit: num_qubits={num_qubits} but the target circuit has {circuit.num_qubits}")
        self.circuit = circuit
        super().__init__(circuit.num_qubits, **params)

    def description(self):
        return (f"Rewrite the following {self.num_qubits}-qubit circuit so that it implements the same unitary "
                f"(up to global phase) with fewer T gates:\n```qasm\n{self.params['qasm'].strip()}\n```\n")

    max_qubits = 256
    """Any width loads; fidelity is simulated up to fidelity.max_sampled_qubits (24), wider
    rewrites need fidelity.backend=qcec (certified equivalence)."""

    def _build_unitary(self):
        from qiskit.quantum_info import Operator

        return np.asarray(Operator(self.circuit).data)

    def apply(self, states):
        """Simulate the target circuit on the columns (exact); the dense unitary only when
        it is small (building it through Operator costs O(4^n) Python-level work)."""
        if self.num_qubits <= 8:
            return self.unitary() @ states
        from rubriq.rubric.gates import canonical_ops
        from rubriq.sim.exact import simulate

        return simulate(tuple(canonical_ops(self.circuit)), self.num_qubits, np.array(states, dtype=complex))

    def _build_reference(self):
        return self.circuit.copy()
