"""Clifford+T primitives: small gates with exact, known T-counts (the learning study's targets).

========================  =========================================  ==========================
target                    unitary (wires in order)                   reference T-count
========================  =========================================  ==========================
``toffoli``               flip c when a = b = 1                      7 (optimal without ancillas)
``ccz``                   phase -1 when a = b = c = 1                7 (optimal)
``cs``                    phase i when a = b = 1                     3 (optimal)
``ch``                    H on t when c = 1                          2 (optimal)
``peres``                 c ^= a b, then b ^= a                      7 (= Toffoli's: a CNOT is free)
``mcx``                   flip q[k] when q[0..k-1] are all 1         8k - 9 with one clean ancilla
``mcz``                   phase -1 on |1...1>                        8k - 9 with one clean ancilla
========================  =========================================  ==========================

The two-/three-qubit gates act on ``wires`` of an n-qubit register (default q[0], q[1], q[2]),
so one gate on other qubits is another target (a generalization test); wires that the gate
treats alike (the controls of a Toffoli, all wires of a CCZ or CS) are stored sorted, so one
unitary has one spec.  Every unitary is built analytically (a permutation or a diagonal
embedded on the wires); every reference is written out in Clifford+T.  Optimality: Toffoli and
CCZ 7 (Amy, Maslov, Mosca, Roetteler, arXiv:1206.0758, by exhaustive search), CS 3 and CH 2
(non-Clifford gates with T-count below these do not exist: same search); the multi-controlled
counts are Qiskit's constructions (an upper bound, not a proven optimum).

Without ancillas no multi-controlled X or Z with k >= 3 controls is exactly Clifford+T: every
Clifford+T circuit on n >= 4 qubits has determinant 1 (each gate's determinant is raised to a
power 2^(n-2) or more), C^kX has determinant -1, and a global phase would have to be e^(i pi/16)
times a power of e^(i pi/8), which Clifford+T matrices (entries in Z[1/sqrt2, i]) cannot carry
(Giles and Selinger, arXiv:1212.0506).  So ``ancillas=0`` asks for an ancilla-free circuit whose
reference uses small-angle rotations (a large T0), and ``ancillas=1`` (the default) allows one
clean ancilla q[k+1] (Qiskit's ``synth_mcx_1_clean_kg24``).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from qiskit import QuantumCircuit

from rubriq.targets.base import Target, TargetError


def embed(gate: np.ndarray, wires: list[int], n: int) -> np.ndarray:
    """The n-qubit unitary of ``gate`` acting on ``wires`` (wires[k] is bit k of the gate's
    own index, Qiskit's order) and the identity elsewhere.

    >>> cx = np.array([[1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0], [0, 1, 0, 0]])  # control bit 0
    >>> embed(cx, [1, 0], 2)[:, 2].nonzero()[0].tolist()  # control q[1] set, q[0] flips: |2> -> |3>
    [3]
    """
    dim, m = 2**n, len(wires)
    x = np.arange(dim)
    local = np.zeros(dim, dtype=np.int64)
    mask = 0
    for k, w in enumerate(wires):
        local |= ((x >> w) & 1) << k
        mask |= 1 << w
    rest = x & ~mask
    u = np.zeros((dim, dim), dtype=complex)
    for y in range(2**m):
        spread = sum(((y >> k) & 1) << w for k, w in enumerate(wires))
        u[rest | spread, x] = gate[y, local]
    return u


def _permutation(m: int, f) -> np.ndarray:
    """The permutation matrix |x> -> |f(x)> on m qubits."""
    u = np.zeros((2**m, 2**m))
    for x in range(2**m):
        u[f(x), x] = 1.0
    return u


def _bit(x: int, k: int) -> int:
    return (x >> k) & 1


def _toffoli_body(qc: QuantumCircuit, a: int, b: int, c: int, final_cx: bool = True) -> None:
    """CCZ on (a, b, c) in 7 T gates and 6 (or 7) CNOTs (Nielsen and Chuang, fig. 4.9 without
    the Hadamards on c); ``final_cx=False`` leaves out the last CNOT(a, b), i.e. appends
    CNOT(a, b) to the CCZ (the Peres gate's extra CNOT cancels it)."""
    qc.cx(b, c)
    qc.tdg(c)
    qc.cx(a, c)
    qc.t(c)
    qc.cx(b, c)
    qc.tdg(c)
    qc.cx(a, c)
    qc.t(b)
    qc.t(c)
    qc.cx(a, b)
    qc.t(a)
    qc.tdg(b)
    if final_cx:
        qc.cx(a, b)


class _WiredGate(Target):
    """A fixed small gate on ``wires`` of an n-qubit register."""

    family = "primitive"
    kind = "unitary"
    max_qubits = 8
    arity: ClassVar[int]
    interchangeable: ClassVar[int] = 0
    """How many leading wires the gate treats alike (sorted in the spec)."""
    gate_name: ClassVar[str]
    known_t_count: ClassVar[int]
    """The T-count of the reference (the known optimum for these gates)."""

    def __init__(self, num_qubits: int | None = None, **params: Any) -> None:
        if num_qubits is None:
            num_qubits = self.default_width(params)
        super().__init__(num_qubits, **params)  # type: ignore[arg-type]

    @classmethod
    def default_width(cls, params: dict[str, Any]) -> int | None:
        wires = params.get("wires")
        if isinstance(wires, (list, tuple)) and wires and all(isinstance(w, int) for w in wires):
            return max(cls.arity, max(wires) + 1)
        return cls.arity

    @classmethod
    def wire_help(cls) -> str:
        return f"the {cls.arity} qubits the gate acts on, in order (default {list(range(cls.arity))})"

    def _validate(self, params):
        wires = params.get("wires", list(range(self.arity)))
        if (
            not isinstance(wires, (list, tuple))
            or len(wires) != self.arity
            or any(isinstance(w, bool) or not isinstance(w, int) or not 0 <= w < self.num_qubits for w in wires)
            or len(set(wires)) != self.arity
        ):
            raise TargetError(
                f"{self.name}: wires must be {self.arity} distinct qubits in [0, {self.num_qubits}), got {wires!r}"
            )
        wires = sorted(wires[: self.interchangeable]) + list(wires[self.interchangeable :])
        return {"wires": [int(w) for w in wires]}

    @property
    def wires(self) -> list[int]:
        return self.params["wires"]

    def q(self, k: int) -> str:
        return f"q[{self.wires[k]}]"

    def _others(self) -> str:
        n = self.num_qubits
        if n == self.arity:
            return ""
        return f" The register has {n} qubits q[0]..q[{n - 1}]; the others are left unchanged."

    def gate_matrix(self) -> np.ndarray:
        raise NotImplementedError

    def gate_circuit(self) -> QuantumCircuit:
        raise NotImplementedError

    def _build_unitary(self):
        return embed(self.gate_matrix(), self.wires, self.num_qubits)

    def _build_reference(self):
        qc = QuantumCircuit(self.num_qubits)
        qc.compose(self.gate_circuit(), qubits=self.wires, inplace=True)
        return qc

    def clifford(self):
        return None  # T-count > 0: none of these is Clifford


class ToffoliTarget(_WiredGate):
    """The Toffoli (CCX) gate."""

    name = "toffoli"
    summary = "Toffoli (CCX): flip the target when both controls are 1 (T-count 7)"
    arity, interchangeable, gate_name, known_t_count = 3, 2, "Toffoli", 7
    min_qubits = 3
    parameters = {"wires": "control, control, target qubits (default [0, 1, 2])"}

    def gate_matrix(self):
        return _permutation(3, lambda x: x ^ (4 if _bit(x, 0) and _bit(x, 1) else 0))

    def gate_circuit(self):
        qc = QuantumCircuit(3)
        qc.h(2)
        _toffoli_body(qc, 0, 1, 2)
        qc.h(2)
        return qc

    def description(self):
        return (
            f"Synthesize the Toffoli gate (CCX) with controls {self.q(0)}, {self.q(1)} and target {self.q(2)}: "
            f"flip {self.q(2)} exactly when {self.q(0)} = {self.q(1)} = 1.{self._others()} Use the gate set "
            "Clifford+T (h, s, sdg, cx, t, tdg, x, z); do not use ccx itself."
        )

    def short_description(self):
        return f"Toffoli gate: flip {self.q(2)} when {self.q(0)} and {self.q(1)} are 1, in Clifford+T gates."


class CCZTarget(_WiredGate):
    """The doubly-controlled Z gate."""

    name = "ccz"
    summary = "CCZ: phase -1 on |111> of three qubits (T-count 7)"
    arity, interchangeable, gate_name, known_t_count = 3, 3, "CCZ", 7
    min_qubits = 3
    parameters = {"wires": "the three qubits (symmetric; default [0, 1, 2])"}

    def gate_matrix(self):
        return np.diag([-1.0 if x == 7 else 1.0 for x in range(8)])

    def gate_circuit(self):
        qc = QuantumCircuit(3)
        _toffoli_body(qc, 0, 1, 2)
        return qc

    def description(self):
        return (
            f"Synthesize the CCZ gate on {self.q(0)}, {self.q(1)}, {self.q(2)}: multiply the amplitude by -1 "
            f"exactly when all three are 1.{self._others()} Use the gate set Clifford+T (h, s, sdg, cx, cz, t, tdg); "
            "do not use ccz or ccx."
        )

    def short_description(self):
        return f"CCZ gate: phase -1 when {self.q(0)}, {self.q(1)} and {self.q(2)} are all 1, in Clifford+T gates."


class CSTarget(_WiredGate):
    """The controlled-S gate."""

    name = "cs"
    summary = "controlled-S: phase i on |11> of two qubits (T-count 3)"
    arity, interchangeable, gate_name, known_t_count = 2, 2, "controlled-S", 3
    min_qubits = 2
    parameters = {"wires": "the two qubits (symmetric; default [0, 1])"}

    def gate_matrix(self):
        return np.diag([1, 1, 1, 1j])

    def gate_circuit(self):
        qc = QuantumCircuit(2)
        qc.t(0)
        qc.t(1)
        qc.cx(0, 1)
        qc.tdg(1)
        qc.cx(0, 1)
        return qc

    def description(self):
        return (
            f"Synthesize the controlled-S gate on {self.q(0)} and {self.q(1)}: multiply the amplitude by i "
            f"exactly when both are 1 (diag(1, 1, 1, i)).{self._others()} Use Clifford+T gates "
            "(h, s, sdg, cx, t, tdg); do not use cs, cp or crz."
        )

    def short_description(self):
        return f"Controlled-S gate: phase i when {self.q(0)} and {self.q(1)} are both 1, in Clifford+T gates."


class CHTarget(_WiredGate):
    """The controlled-Hadamard gate."""

    name = "ch"
    summary = "controlled-H: Hadamard on the target when the control is 1 (T-count 2)"
    arity, gate_name, known_t_count = 2, "controlled-H", 2
    min_qubits = 2
    parameters = {"wires": "control, target qubits (default [0, 1])"}

    def gate_matrix(self):
        h = np.array([[1, 1], [1, -1]]) / np.sqrt(2)
        u = np.eye(4, dtype=complex)
        u[np.ix_([1, 3], [1, 3])] = h  # control bit 0 set: H on bit 1
        return u

    def gate_circuit(self):
        qc = QuantumCircuit(2)
        qc.s(1)
        qc.h(1)
        qc.t(1)
        qc.cx(0, 1)
        qc.tdg(1)
        qc.h(1)
        qc.sdg(1)
        return qc

    def description(self):
        return (
            f"Synthesize the controlled-Hadamard gate with control {self.q(0)} and target {self.q(1)}: apply H "
            f"to {self.q(1)} exactly when {self.q(0)} = 1.{self._others()} Use Clifford+T gates "
            "(h, s, sdg, cx, t, tdg); do not use ch."
        )

    def short_description(self):
        return f"Controlled-H gate: apply H to {self.q(1)} when {self.q(0)} is 1, in Clifford+T gates."


class PeresTarget(_WiredGate):
    """The Peres gate: a Toffoli followed by a CNOT."""

    name = "peres"
    summary = "Peres gate: c ^= a AND b, then b ^= a (Toffoli then CNOT; T-count 7)"
    arity, gate_name, known_t_count = 3, "Peres", 7
    min_qubits = 3
    parameters = {"wires": "a, b, c qubits (default [0, 1, 2])"}

    def gate_matrix(self):
        def peres(x: int) -> int:
            a, b, c = _bit(x, 0), _bit(x, 1), _bit(x, 2)
            return a | ((a ^ b) << 1) | ((c ^ (a & b)) << 2)

        return _permutation(3, peres)

    def gate_circuit(self):
        qc = QuantumCircuit(3)
        qc.h(2)
        _toffoli_body(qc, 0, 1, 2, final_cx=False)  # Toffoli's last CNOT(a, b) cancels the Peres CNOT
        qc.h(2)
        return qc

    def description(self):
        a, b, c = self.q(0), self.q(1), self.q(2)
        return (
            f"Synthesize the Peres gate on a = {a}, b = {b}, c = {c}: |a, b, c> -> |a, a XOR b, c XOR (a AND b)> "
            f"(a Toffoli with controls {a}, {b} and target {c}, then a CNOT from {a} to {b}).{self._others()} "
            "Use Clifford+T gates (h, s, sdg, cx, t, tdg); do not use ccx."
        )

    def short_description(self):
        a, b, c = self.q(0), self.q(1), self.q(2)
        return f"Peres gate: flip {c} when {a} and {b} are 1, then flip {b} when {a} is 1, in Clifford+T gates."


class _MultiControlled(Target):
    family = "multi_controlled"
    kind = "unitary"
    min_qubits = 4
    max_qubits = 9
    parameters = {
        "ancillas": "0: no ancilla (no exact Clifford+T circuit exists; the reference uses rotations); "
        "1: one clean ancilla q[k+1] allowed, T0 = 8k - 9 (default 1)"
    }
    letter: ClassVar[str]

    def _validate(self, params):
        ancillas = params.get("ancillas", 1)
        if ancillas not in (0, 1) or isinstance(ancillas, bool):
            raise TargetError(f"{self.name}: ancillas must be 0 or 1, got {ancillas!r}")
        if ancillas:
            # The reference uses a clean ancilla, so it is wider than the target: qcec compares
            # whole unitaries (ancilla included), so candidates are simulated, not certified
            # against it.
            self.reference_is_exact = False
        return {"ancillas": int(ancillas)}

    @property
    def controls(self) -> int:
        return self.num_qubits - 1

    def _ancilla_text(self, short: bool = False) -> str:
        k = self.controls
        if self.params["ancillas"]:
            if short:
                return f" You may use one ancilla q[{k + 1}] (starts and ends in 0)."
            return f" You may use one extra qubit q[{k + 1}] as a clean ancilla: it starts in |0> and must end in |0>."
        if short:
            return " Use no ancilla (rotations allowed)."
        return (
            " Use no ancilla qubits: the circuit acts on these qubits only (no exact Clifford+T circuit "
            "exists without an ancilla, so rotations are allowed)."
        )

    def _gate_set(self, short: bool = False) -> str:
        if not self.params["ancillas"]:
            return "" if short else " Prefer Clifford+T gates."
        return " in Clifford+T gates" if short else " Use Clifford+T gates (h, s, sdg, cx, cz, t, tdg, x)."

    def _mcx_reference(self) -> QuantumCircuit:
        from qiskit.synthesis import synth_mcx_1_clean_kg24, synth_mcx_noaux_v24

        k = self.controls
        if self.params["ancillas"]:
            circuit = synth_mcx_1_clean_kg24(k)  # controls 0..k-1, target k, clean ancilla k+1
        else:
            circuit = synth_mcx_noaux_v24(k)
        return circuit.decompose(reps=8)

    @property
    def known_t_count(self) -> int | None:
        """T-count of the one-ancilla reference, 8k - 9 (None without an ancilla: rotations)."""
        return 8 * self.controls - 9 if self.params["ancillas"] else None


class MCXTarget(_MultiControlled):
    """X on q[k] controlled by q[0..k-1]."""

    name = "mcx"
    summary = "multi-controlled X: flip q[k] when q[0..k-1] are all 1 (k = num_qubits - 1 >= 3)"

    def _build_unitary(self):
        k = self.controls
        full = 2**k - 1
        return _permutation(k + 1, lambda x: x ^ (1 << k) if x & full == full else x)

    def _build_reference(self):
        return self._mcx_reference()

    def description(self):
        k = self.controls
        return (
            f"Synthesize the {k}-controlled X gate on {k + 1} qubits: flip the target q[{k}] exactly when the "
            f"controls q[0]..q[{k - 1}] are all 1.{self._ancilla_text()}{self._gate_set()} "
            "Do not use mcx, c3x, c4x or ccx."
        )

    def short_description(self):
        k = self.controls
        return (
            f"{k}-controlled X: flip q[{k}] when q[0]..q[{k - 1}] are all 1{self._gate_set(True)}."
            f"{self._ancilla_text(short=True)}"
        )


class MCZTarget(_MultiControlled):
    """Z on |1...1> of n qubits."""

    name = "mcz"
    summary = "multi-controlled Z: phase -1 on |1...1> of n qubits (k = num_qubits - 1 >= 3 controls)"

    def _build_unitary(self):
        d = np.ones(self.dim)
        d[-1] = -1.0
        return np.diag(d)

    def _build_reference(self):
        k = self.controls
        qc = QuantumCircuit(k + 1 + self.params["ancillas"])
        qc.h(k)
        qc.compose(self._mcx_reference(), inplace=True)
        qc.h(k)
        return qc

    def description(self):
        n = self.num_qubits
        return (
            f"Synthesize the {n}-qubit multi-controlled Z gate: multiply the amplitude by -1 exactly when "
            f"q[0]..q[{n - 1}] are all 1.{self._ancilla_text()}{self._gate_set()} Do not use mcx, mcp or ccz."
        )

    def short_description(self):
        n = self.num_qubits
        return (
            f"{n}-qubit multi-controlled Z: phase -1 when q[0]..q[{n - 1}] are all 1{self._gate_set(True)}."
            f"{self._ancilla_text(short=True)}"
        )


PRIMITIVES: tuple[type[Target], ...] = (
    ToffoliTarget,
    CCZTarget,
    CSTarget,
    CHTarget,
    PeresTarget,
    MCXTarget,
    MCZTarget,
)
