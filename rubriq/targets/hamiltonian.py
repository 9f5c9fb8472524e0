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
    couplings = "XYZ"
    """The exchange terms P_i P_(i+1), P in ``couplings``, each with coefficient J."""
    chain = "Heisenberg XXX chain"

    def hamiltonian(self):
        n, j = self.num_qubits, self.params["J"]
        terms = [(p + p, [i, i + 1], j) for i in range(n - 1) for p in self.couplings]
        return SparsePauliOp.from_sparse_list(terms, num_qubits=n)

    def description(self):
        n, p = self.num_qubits, self.params
        pairs = " + ".join(f"{q}_i {q}_(i+1)" for q in self.couplings)
        return (
            f"Synthesize the time evolution exp(-i H t) for t = {p['t']:g} of the {n}-qubit {self.chain} "
            f"H = {p['J']:g} * sum_(i=0..{n - 2}) ({pairs}) with open boundaries."
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


class XYTarget(HeisenbergTarget):
    """exp(-iHt) of the open XY chain (the Heisenberg chain without its ZZ terms)."""

    name = "xy"
    summary = "exp(-iHt), H = J sum_i (X_i X_i+1 + Y_i Y_i+1) (XY chain)"
    couplings = "XY"
    chain = "XY chain"

    def short_description(self):
        n, p = self.num_qubits, self.params
        return (
            f"Implement exp(-iHt), t = {p['t']:g}, H = {p['J']:g} sum_i (X_i X_i+1 + Y_i Y_i+1) on a {n}-qubit "
            "open chain."
        )


class QAOATarget(Target):
    """One QAOA layer exp(-i beta sum_k X_k) exp(-i gamma sum_(i,j) in E Z_i Z_j) for a graph."""

    name = "qaoa"
    family = "qaoa"
    kind = "unitary"
    min_qubits = 2
    max_qubits = 20
    summary = "one QAOA layer exp(-i beta sum X) exp(-i gamma sum_E Z_i Z_j) for a graph (MaxCut cost)"
    parameters = {
        "edges": "list of [i, j] qubit pairs (default: the ring 0-1-...-(n-1)-0)",
        "gamma": "cost angle (default 0.4)",
        "beta": "mixer angle (default 0.3)",
    }

    def _validate(self, params):
        from rubriq.targets.states import _edges

        n = self.num_qubits
        default = [[k, (k + 1) % n] for k in range(n)] if n > 2 else [[0, 1]]
        edges = _edges(params.get("edges", default), n)
        if not edges:
            raise TargetError("qaoa: the graph needs at least one edge")
        return {
            "edges": edges,
            "gamma": check_number("qaoa: gamma", params.get("gamma", 0.4)),
            "beta": check_number("qaoa: beta", params.get("beta", 0.3)),
        }

    def _edge_text(self) -> str:
        return ", ".join(f"({i},{j})" for i, j in self.params["edges"])

    def description(self):
        n, p = self.num_qubits, self.params
        return (
            f"Synthesize one {n}-qubit QAOA layer U = exp(-i beta B) exp(-i gamma C) with gamma = {p['gamma']:g}, "
            f"beta = {p['beta']:g}, cost C = sum over the edges {self._edge_text()} of Z_i Z_j and mixer "
            f"B = sum_k X_k (no initial Hadamards)."
        )

    def short_description(self):
        p = self.params
        return (
            f"One QAOA layer: exp(-i {p['gamma']:g} Z_i Z_j) for edges {self._edge_text()}, then "
            f"exp(-i {p['beta']:g} X_k) on every qubit."
        )

    def _cost_diagonal(self):
        import numpy as np

        x = np.arange(self.dim)
        c = np.zeros(self.dim)
        for i, j in self.params["edges"]:
            c += 1 - 2 * (((x >> i) & 1) ^ ((x >> j) & 1))
        return c

    def _mixer(self):
        import math

        import numpy as np

        b = self.params["beta"]
        rx = np.array([[math.cos(b), -1j * math.sin(b)], [-1j * math.sin(b), math.cos(b)]])
        out = np.array([[1.0 + 0j]])
        for _ in range(self.num_qubits):
            out = np.kron(rx, out)
        return out

    def _build_unitary(self):
        import numpy as np

        return self._mixer() @ np.diag(np.exp(-1j * self.params["gamma"] * self._cost_diagonal()))

    def apply(self, states, deadline=None):
        import numpy as np

        if self.num_qubits <= self.max_dense_qubits:
            return self.unitary() @ states
        out = np.exp(-1j * self.params["gamma"] * self._cost_diagonal())[:, None] * states
        b = self.params["beta"]
        c, s = np.cos(b), -1j * np.sin(b)
        for k in range(self.num_qubits):  # RX(2 beta) on qubit k
            shaped = out.reshape(-1, 2, 2**k, out.shape[1])
            a0, a1 = shaped[:, 0].copy(), shaped[:, 1].copy()
            shaped[:, 0], shaped[:, 1] = c * a0 + s * a1, s * a0 + c * a1
        return out

    def _build_reference(self):
        from qiskit import QuantumCircuit

        p = self.params
        qc = QuantumCircuit(self.num_qubits)
        for i, j in p["edges"]:
            qc.rzz(2 * p["gamma"], i, j)
        qc.rx(2 * p["beta"], range(self.num_qubits))
        return qc
