"""Arithmetic targets: ripple-carry (Cuccaro) and QFT (Draper) adders, a constant adder and an
integer comparator.  Every unitary is the analytic permutation; references come from Qiskit's
circuit library and synthesis (``adder_ripple_c04``: Cuccaro et al.'s ripple-carry adder,
``adder_qft_d00``: Draper's QFT adder, ``IntegerComparatorGate``, and ``QFTGate`` for the
constant adder), decomposed.

Registers are little-endian integers: a = sum_k a_k 2^k with a_k on the register's k-th qubit.
"""

from __future__ import annotations

import math

import numpy as np
from qiskit import QuantumCircuit

from rubriq.targets.base import Target, TargetError


def _permutation(dim: int, f) -> np.ndarray:
    u = np.zeros((dim, dim))
    for x in range(dim):
        u[f(x), x] = 1.0
    return u


def _int_param(name: str, key: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise TargetError(f"{name}: {key} must be an integer in [{low}, {high}), got {value!r}")
    return value


class _Arithmetic(Target):
    family = "arithmetic"
    kind = "unitary"
    reference_is_exact = True


class CuccaroAdderTarget(_Arithmetic):
    """|c_in, a, b, z> -> |c_in, a, (a + b + c_in) mod 2^n, z XOR carry-out> (2n + 2 qubits)."""

    name = "cuccaro_adder"
    min_qubits = 4
    max_qubits = 14
    summary = "ripple-carry adder (Cuccaro/CDKM): b <- a + b + c_in mod 2^n, carry out; 2n + 2 qubits"

    def _validate(self, params):
        if self.num_qubits % 2:
            raise TargetError(f"cuccaro_adder: num_qubits must be 2n + 2 (even), got {self.num_qubits}")
        return params

    @property
    def n(self) -> int:
        return (self.num_qubits - 2) // 2

    def _layout(self) -> str:
        n = self.n
        return f"c_in on q[0], a on q[1]..q[{n}], b on q[{n + 1}]..q[{2 * n}], carry-out z on q[{2 * n + 1}]"

    def description(self):
        n = self.n
        return (
            f"Synthesize an in-place {n}-bit ripple-carry adder on {2 * n + 2} qubits ({self._layout()}, registers "
            f"little-endian): |c_in, a, b, z> -> |c_in, a, s, z XOR c_out> with s = (a + b + c_in) mod 2^{n} and "
            f"c_out the carry out of bit {n - 1} (the Cuccaro/CDKM adder)."
        )

    def short_description(self):
        return f"{self.n}-bit ripple-carry adder: b <- a + b + c_in, z ^= carry ({self._layout()})."

    def _build_unitary(self):
        n = self.n
        mask = 2**n - 1

        def add(v: int) -> int:
            cin, a, b, z = v & 1, (v >> 1) & mask, (v >> (n + 1)) & mask, (v >> (2 * n + 1)) & 1
            total = a + b + cin
            return cin | (a << 1) | ((total & mask) << (n + 1)) | ((z ^ (total >> n)) << (2 * n + 1))

        return _permutation(self.dim, add)

    def _build_reference(self):
        from qiskit.synthesis import adder_ripple_c04

        return adder_ripple_c04(self.n, kind="full").decompose(reps=4)  # Cuccaro et al. 2004 (CDKM)


class DraperAdderTarget(_Arithmetic):
    """|a, b> -> |a, (a + b) mod 2^n> through the QFT (2n qubits)."""

    name = "draper_adder"
    min_qubits = 2
    max_qubits = 12
    summary = "QFT adder (Draper): |a, b> -> |a, a + b mod 2^n>; 2n qubits"

    def _validate(self, params):
        if self.num_qubits % 2:
            raise TargetError(f"draper_adder: num_qubits must be 2n (even), got {self.num_qubits}")
        return params

    @property
    def n(self) -> int:
        return self.num_qubits // 2

    def description(self):
        n = self.n
        return (
            f"Synthesize an in-place {n}-bit modular adder on {2 * n} qubits: |a>|b> -> |a>|(a + b) mod 2^{n}> with a on "
            f"q[0]..q[{n - 1}] and b on q[{n}]..q[{2 * n - 1}] (little-endian), e.g. as Draper's adder: QFT on b, "
            "controlled phase rotations from a, inverse QFT."
        )

    def short_description(self):
        n = self.n
        return f"{n}-bit adder: b <- (a + b) mod 2^{n}, a on q[0]..q[{n - 1}], b on q[{n}]..q[{2 * n - 1}]."

    def _build_unitary(self):
        n = self.n
        mask = 2**n - 1
        return _permutation(self.dim, lambda v: (v & mask) | ((((v & mask) + (v >> n)) & mask) << n))

    def _build_reference(self):
        from qiskit.synthesis import adder_qft_d00

        return adder_qft_d00(self.n, kind="fixed").decompose(reps=4)  # Draper 2000


class ConstantAdderTarget(_Arithmetic):
    """|x> -> |(x + c) mod 2^n>."""

    name = "constant_adder"
    min_qubits = 1
    max_qubits = 12
    summary = "add a constant: |x> -> |x + c mod 2^n>"
    parameters = {"constant": "the integer c in [0, 2^n) (default: seeded)"}

    def _validate(self, params):
        c = params.get("constant")
        if c is None:
            c = int(np.random.default_rng(self.num_qubits).integers(1, self.dim)) if self.dim > 1 else 1
        return {"constant": _int_param(self.name, "constant", c, 0, self.dim)}

    def description(self):
        n, c = self.num_qubits, self.params["constant"]
        return (
            f"Synthesize the {n}-qubit constant adder |x> -> |(x + {c}) mod 2^{n}> (x the little-endian integer on "
            f"q[0]..q[{n - 1}])."
        )

    def short_description(self):
        n = self.num_qubits
        return f"Add {self.params['constant']} mod 2^{n} to the integer on q[0]..q[{n - 1}]."

    def _build_unitary(self):
        c = self.params["constant"]
        return _permutation(self.dim, lambda x: (x + c) % self.dim)

    def _build_reference(self):
        """QFT, a phase 2 pi c 2^k / 2^n on qubit k (QFT|x> picks up exp(2 pi i c y / 2^n)), QFT^dagger."""
        from qiskit.circuit.library import QFTGate

        n, c = self.num_qubits, self.params["constant"]
        qc = QuantumCircuit(n)
        qc.append(QFTGate(n), range(n))
        for k in range(n):
            angle = math.remainder(2 * math.pi * c * 2**k / 2**n, 2 * math.pi)
            if abs(angle) > 1e-12:
                qc.p(angle, k)
        qc.append(QFTGate(n).inverse(), range(n))
        return qc.decompose(reps=4)


class ComparatorTarget(_Arithmetic):
    """|x>|r> -> |x>|r XOR [x >= value]> (Qiskit's IntegerComparatorGate)."""

    name = "comparator"
    min_qubits = 2
    max_qubits = 11
    summary = "integer comparator: flip the result qubit when x >= value (or x < value)"
    parameters = {
        "value": "the integer compared with, in [0, 2^n] (default: seeded)",
        "geq": "true: flag x >= value; false: x < value (default true)",
    }

    @property
    def n(self) -> int:
        return self.num_qubits - 1

    def _validate(self, params):
        v = params.get("value")
        if v is None:
            v = int(np.random.default_rng(self.n).integers(1, 2**self.n))
        v = _int_param(self.name, "value", v, 0, 2**self.n + 1)
        geq = params.get("geq", True)
        if not isinstance(geq, bool):
            raise TargetError(f"comparator: geq must be true or false, got {geq!r}")
        return {"value": v, "geq": geq}

    def _relation(self) -> str:
        return ">=" if self.params["geq"] else "<"

    def description(self):
        n, v = self.n, self.params["value"]
        return (
            f"Synthesize a {self.num_qubits}-qubit integer comparator: flip the result qubit q[{n}] exactly when the "
            f"little-endian integer x on q[0]..q[{n - 1}] satisfies x {self._relation()} {v}; x is left unchanged."
        )

    def short_description(self):
        n = self.n
        return f"Comparator: flip q[{n}] when the integer on q[0]..q[{n - 1}] is {self._relation()} {self.params['value']}."

    def _build_unitary(self):
        n, v = self.n, self.params["value"]
        low = 2**n - 1

        def compare(x: int) -> int:
            hit = (x & low) >= v if self.params["geq"] else (x & low) < v
            return x ^ (int(hit) << n)

        return _permutation(self.dim, compare)

    def _build_reference(self):
        from qiskit.circuit.library import IntegerComparatorGate

        qc = QuantumCircuit(self.num_qubits)
        qc.append(IntegerComparatorGate(self.n, self.params["value"], geq=self.params["geq"]), range(self.num_qubits))
        return qc.decompose(reps=8)


ARITHMETIC: tuple[type[Target], ...] = (CuccaroAdderTarget, DraperAdderTarget, ConstantAdderTarget, ComparatorTarget)
