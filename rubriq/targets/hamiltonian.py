"""Hamiltonian-simulation targets: exact exp(-iHt) of 1D spin chains (open boundary)."""

from __future__ import annotations

import scipy.linalg
from qiskit.quantum_info import SparsePauliOp

from rubriq.targets.base import Target, TargetError, check_number


class _ChainTarget(Target):
    family = "hamiltonian"
    kind = "unitary"
    min_qubits = 2
    max_qubits = 20
    reference_is_exact = False

    def _validate(self, params):
        for key, default in self.defaults.items():
            params[key] = check_number(f"{self.name}: {key}", params.get(key, default))
        steps = params.get("trotter_steps", 4)
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 1000:
            raise TargetError(f"{self.name}: trotter_steps must be an integer in [1, 1000], got {steps!r}")
        params["trotter_steps"] = steps
        return params

    def hamiltonian(self) -> SparsePauliOp:
        raise NotImplementedError

    def _build_unitary(self):
        h = self.hamiltonian().to_matrix()
        return scipy.linalg.expm(-1j * self.params["t"] * h)

    def apply(self, states, deadline=None):
        if self.num_qubits <= self.max_dense_qubits:
            return self.unitary() @ states
        from scipy.sparse.linalg import expm_multiply

        h = self.hamiltonian().to_matrix(sparse=True)
        return expm_multiply(-1j * self.params["t"] * h, states)

    def _build_reference(self):
        """Second-order Suzuki-Trotter with ``trotter_steps`` steps: close to, not equal to, U."""
        from qiskit.circuit.library import PauliEvolutionGate
        from qiskit.synthesis import SuzukiTrotter

        gate = PauliEvolutionGate(
            self.hamiltonian(),
            time=self.params["t"],
            synthesis=SuzukiTrotter(order=2, reps=self.params["trotter_steps"]),
        )
        from qiskit import QuantumCircuit

        qc = QuantumCircuit(self.num_qubits)
        qc.append(gate, range(self.num_qubits))
        return qc.decompose()


class HeisenbergTarget(_ChainTarget):
    """exp(-iHt) of the open XXX Heisenberg chain."""

    name = "heisenberg"
    summary = "exp(-iHt), H = J sum_i (X_i X_i+1 + Y_i Y_i+1 + Z_i Z_i+1) (XXX chain)"
    parameters = {
        "J": "coupling (default 1.0)",
        "t": "evolution time (default 1.0)",
        "trotter_steps": "Trotter steps of the reference circuit only (default 4)",
    }
    defaults = {"J": 1.0, "t": 1.0}

    def hamiltonian(self):
        n, j = self.num_qubits, self.params["J"]
        terms = [(p + p, [i, i + 1], j) for i in range(n - 1) for p in "XYZ"]
        return SparsePauliOp.from_sparse_list(terms, num_qubits=n)

    def description(self):
        n, p = self.num_qubits, self.params
        return (
            f"Synthesize the time evolution exp(-i H t) for t = {p['t']:g} of the {n}-qubit Heisenberg XXX chain "
            f"H = {p['J']:g} * sum_(i=0..{n - 2}) (X_i X_(i+1) + Y_i Y_(i+1) + Z_i Z_(i+1)) with open boundaries."
        )


class TFIMTarget(_ChainTarget):
    """exp(-iHt) of the open transverse-field Ising chain."""

    name = "tfim"
    summary = "exp(-iHt), H = -J sum_i Z_i Z_i+1 - h sum_i X_i (transverse-field Ising chain)"
    parameters = {
        "J": "ZZ coupling (default 1.0)",
        "h": "transverse field (default 1.0)",
        "t": "evolution time (default 1.0)",
        "trotter_steps": "Trotter steps of the reference circuit only (default 4)",
    }
    defaults = {"J": 1.0, "h": 1.0, "t": 1.0}

    def hamiltonian(self):
        n, p = self.num_qubits, self.params
        terms = [("ZZ", [i, i + 1], -p["J"]) for i in range(n - 1)] + [("X", [i], -p["h"]) for i in range(n)]
        return SparsePauliOp.from_sparse_list(terms, num_qubits=n)

    def description(self):
        n, p = self.num_qubits, self.params
        return (
            f"Synthesize the time evolution exp(-i H t) for t = {p['t']:g} of the {n}-qubit transverse-field Ising "
            f"chain H = -{p['J']:g} * sum_(i=0..{n - 2}) Z_i Z_(i+1) - {p['h']:g} * sum_(i=0..{n - 1}) X_i "
            f"with open boundaries."
        )
