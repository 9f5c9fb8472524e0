"""Entangled-state targets: GHZ, W, the four Bell states and graph states (prepare from |0...0>).

GHZ, Bell and graph states are stabilizer states: ``clifford()`` returns their preparation
Clifford, and a Clifford candidate is scored exactly from tableaux at any width (``ghz`` goes to
1000 qubits).  The W state is not a stabilizer state for n >= 3 (its reference uses RY
rotations); it is simulated like the encodings.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from qiskit import QuantumCircuit

from rubriq.targets.base import Target, TargetError, completion_for, reference_clifford


class _StateTarget(Target):
    family = "state"
    kind = "state"

    def clifford(self):
        return self._clifford

    _clifford = functools.cached_property(reference_clifford)


class GHZTarget(_StateTarget):
    """(|0...0> + |1...1>) / sqrt(2)."""

    name = "ghz"
    min_qubits = 2
    max_qubits = 1000
    summary = "GHZ state (|0...0> + |1...1>)/sqrt(2); Clifford candidates checked exactly at any width"

    def description(self):
        n = self.num_qubits
        return (
            f"Synthesize a circuit that prepares, from |0...0>, the {n}-qubit GHZ state "
            f"(|0...0> + |1...1>)/sqrt(2) on q[0]..q[{n - 1}]."
        )

    def short_description(self):
        n = self.num_qubits
        return f"Prepare the {n}-qubit GHZ state (|0...0> + |1...1>)/sqrt(2) on q[0]..q[{n - 1}] from |0...0>."

    def _build_state(self):
        psi = np.zeros(self.dim)
        psi[0] = psi[-1] = 1.0
        return psi

    def _build_reference(self):
        qc = QuantumCircuit(self.num_qubits)
        qc.h(0)
        for k in range(self.num_qubits - 1):
            qc.cx(k, k + 1)
        return qc

    def completion_size(self):
        return completion_for(self.num_qubits)


class WStateTarget(_StateTarget):
    """(|10...0> + |01...0> + ... + |0...01>) / sqrt(n)."""

    name = "w_state"
    min_qubits = 2
    max_qubits = 12
    summary = "W state: equal superposition of the n basis states with a single 1"

    def description(self):
        n = self.num_qubits
        return (
            f"Synthesize a circuit that prepares, from |0...0>, the {n}-qubit W state: the equal superposition "
            f"(1/sqrt({n})) sum_k |2^k> of the {n} basis states in which exactly one of q[0]..q[{n - 1}] is 1."
        )

    def short_description(self):
        n = self.num_qubits
        return f"Prepare the {n}-qubit W state: equal superposition of the {n} basis states with exactly one qubit 1."

    def _build_state(self):
        psi = np.zeros(self.dim)
        psi[[1 << k for k in range(self.num_qubits)]] = 1.0
        return psi

    def _build_reference(self):
        """X on q[0], then for k = 0..n-2 move amplitude sqrt((n-k-1)/(n-k)) from q[k] to q[k+1]
        with a controlled RY and a CNOT back (the linear-depth construction)."""
        n = self.num_qubits
        qc = QuantumCircuit(n)
        qc.x(0)
        for k in range(n - 1):
            theta = 2 * math.acos(math.sqrt(1 / (n - k)))
            qc.cry(theta, k, k + 1)
            qc.cx(k + 1, k)
        return qc

    def clifford(self):
        return None


BELL_STATES = {
    "phi+": ((0, 3), (1, 1), "(|00> + |11>)/sqrt(2)"),
    "phi-": ((0, 3), (1, -1), "(|00> - |11>)/sqrt(2)"),
    "psi+": ((1, 2), (1, 1), "(|01> + |10>)/sqrt(2)"),
    "psi-": ((1, 2), (1, -1), "(|01> - |10>)/sqrt(2)"),
}
"""Bell state -> (basis indices, signs, ket text with q[1] written first, Qiskit's label order)."""


class BellTarget(_StateTarget):
    """One of the four Bell states on q[0], q[1]."""

    name = "bell"
    min_qubits = max_qubits = default_qubits = 2
    summary = "one of the four Bell states phi+, phi-, psi+, psi- on two qubits"
    parameters = {"which": "phi+, phi-, psi+ or psi- (default phi+)"}

    def _validate(self, params):
        which = params.get("which", "phi+")
        if which not in BELL_STATES:
            raise TargetError(f"bell: which must be one of {', '.join(BELL_STATES)}, got {which!r}")
        return {"which": which}

    def _ket(self) -> str:
        return BELL_STATES[self.params["which"]][2]

    def description(self):
        which = self.params["which"]
        return (
            f"Synthesize a circuit that prepares, from |00>, the Bell state |{which}> = {self._ket()} on q[0], q[1], "
            "kets written q[1]q[0] (so |01> has q[0] = 1)."
        )

    def short_description(self):
        return f"Prepare the Bell state {self._ket()} from |00> (kets written q[1]q[0])."

    def _build_state(self):
        (i, j), (a, b) = BELL_STATES[self.params["which"]][:2]
        psi = np.zeros(4)
        psi[i], psi[j] = a, b
        return psi

    def _build_reference(self):
        which = self.params["which"]
        qc = QuantumCircuit(2)
        if which.startswith("psi"):
            qc.x(0)
        if which.endswith("-"):
            qc.x(1)  # H |1> = |->: the sign lands on the term with q[1] = 1 after the CNOT
        qc.h(1)
        qc.cx(1, 0)
        return qc


def _edges(value: Any, n: int) -> list[list[int]]:
    if value is None:
        return [[k, k + 1] for k in range(n - 1)]
    if not isinstance(value, (list, tuple)):
        raise TargetError(f"graph_state: edges must be a list of [i, j] pairs, got {value!r}")
    out: set[tuple[int, int]] = set()
    for e in value:
        if (
            not isinstance(e, (list, tuple))
            or len(e) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < n for v in e)
            or e[0] == e[1]
        ):
            raise TargetError(f"graph_state: each edge is a pair of distinct qubits in [0, {n}), got {e!r}")
        out.add((min(e), max(e)))
    return [list(e) for e in sorted(out)]


class GraphStateTarget(_StateTarget):
    """The graph state of a graph: H on every qubit, then CZ on every edge."""

    name = "graph_state"
    min_qubits = 2
    max_qubits = 200
    summary = "graph state |G> = prod_(i,j) in E CZ_ij |+>^n for a given graph (stabilizer state)"
    parameters = {"edges": "list of [i, j] qubit pairs (default: the path 0-1-...-(n-1))"}

    def _validate(self, params):
        return {"edges": _edges(params.get("edges"), self.num_qubits)}

    def _edge_text(self) -> str:
        return ", ".join(f"({i},{j})" for i, j in self.params["edges"]) or "none"

    def description(self):
        n = self.num_qubits
        return (
            f"Synthesize a circuit that prepares, from |0...0>, the {n}-qubit graph state of the graph with "
            f"vertices q[0]..q[{n - 1}] and edges {self._edge_text()}: |G> = (prod over edges (i,j) of CZ_ij) "
            f"|+>^{n}, i.e. the state stabilized by X_v prod_(u adjacent to v) Z_u for every vertex v."
        )

    def short_description(self):
        return (
            f"Prepare the {self.num_qubits}-qubit graph state with edges {self._edge_text()}: "
            "H on every qubit, then CZ on every edge."
        )

    def _build_state(self):
        n = self.num_qubits
        x = np.arange(self.dim)
        sign = np.zeros(self.dim, dtype=np.int64)
        for i, j in self.params["edges"]:
            sign ^= ((x >> i) & 1) & ((x >> j) & 1)
        return (1.0 - 2.0 * sign) / math.sqrt(2**n)

    def _build_reference(self):
        qc = QuantumCircuit(self.num_qubits)
        qc.h(range(self.num_qubits))
        for i, j in self.params["edges"]:
            qc.cz(i, j)
        return qc

    def completion_size(self):
        return (40 * (self.num_qubits + len(self.params["edges"])) + 200, 4 * len(self.params["edges"]) + 64)


STATES: tuple[type[Target], ...] = (GHZTarget, WStateTarget, BellTarget, GraphStateTarget)
