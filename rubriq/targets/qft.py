"""Quantum Fourier transform and quantum phase estimation targets (analytic unitaries)."""

from __future__ import annotations

import math

import numpy as np
from qiskit import QuantumCircuit

from rubriq.targets.base import Target, TargetError, bit_reversal, check_number


def qft_matrix(n: int, do_swaps: bool = True, inverse: bool = False) -> np.ndarray:
    """QFT on n qubits in Qiskit's convention: QFT|x> = 2^{-n/2} sum_y e^{2 pi i x y / 2^n} |y>.

    Without the final swaps the output register is bit-reversed: the matrix is R . QFT.
    """
    dim = 2**n
    x = np.arange(dim)
    u = np.exp(2j * np.pi * np.outer(x, x) / dim) / math.sqrt(dim)
    if not do_swaps:
        u = u[np.argsort(bit_reversal(n)), :]
    return u.conj().T if inverse else u


def apply_qft(states: np.ndarray, n: int, do_swaps: bool = True, inverse: bool = False) -> np.ndarray:
    """qft_matrix(n, do_swaps, inverse) @ states through the FFT (O(2^n n) per column).

    QFT psi = sqrt(N) ifft(psi) (numpy's ifft carries exp(+2 pi i x y / N) / N).
    """
    dim = 2**n
    reverse = bit_reversal(n)
    if not inverse:
        out = np.fft.ifft(states, axis=0) * math.sqrt(dim)
        return out if do_swaps else out[reverse]
    if not do_swaps:
        states = states[reverse]
    return np.fft.fft(states, axis=0) / math.sqrt(dim)


class QFTTarget(Target):
    """The quantum Fourier transform (Qiskit's convention), optionally inverse or without swaps."""

    name = "qft"
    family = "qft"
    kind = "unitary"
    max_qubits = 24
    summary = "Quantum Fourier transform (Qiskit convention), optionally inverse / without swaps"
    parameters = {
        "inverse": "implement QFT^dagger instead of QFT (default false)",
        "do_swaps": "include the final qubit-reversal swaps (default true)",
    }

    def _validate(self, params):
        for key, default in (("inverse", False), ("do_swaps", True)):
            value = params.get(key, default)
            if not isinstance(value, bool):
                raise TargetError(f"qft: {key} must be true or false, got {value!r}")
            params[key] = value
        return params

    def description(self) -> str:
        n = self.num_qubits
        what = (
            "inverse quantum Fourier transform (QFT^dagger)" if self.params["inverse"] else "quantum Fourier transform"
        )
        swaps = (
            "including the final swaps that reverse the qubit order"
            if self.params["do_swaps"]
            else "WITHOUT the final swaps, so the output register is bit-reversed"
        )
        return (
            f"Synthesize a {n}-qubit {what} on qubits q[0]..q[{n - 1}], "
            f"QFT|x> = 2^(-{n}/2) sum_y exp(2 pi i x y / 2^{n}) |y>, {swaps} "
            f"(the convention of Qiskit's QFTGate)."
        )

    def _build_unitary(self):
        return qft_matrix(self.num_qubits, self.params["do_swaps"], self.params["inverse"])

    def apply(self, states, deadline=None):
        return apply_qft(states, self.num_qubits, self.params["do_swaps"], self.params["inverse"])

    def _build_reference(self):
        from qiskit.synthesis import synth_qft_full

        return synth_qft_full(self.num_qubits, do_swaps=self.params["do_swaps"], inverse=self.params["inverse"])


PAPER_PHASES = (0.125, 0.25, 0.375, 0.5, 0.75)


def walsh_hadamard(x: np.ndarray, axis: int) -> np.ndarray:
    """H^{(x)m} along ``axis`` (length 2^m) by m butterfly passes."""
    x = np.ascontiguousarray(np.moveaxis(np.asarray(x, dtype=complex), axis, 0))
    size = x.shape[0]
    h = 1
    while h < size:
        y = x.reshape(size // (2 * h), 2, h, -1)
        a, b = y[:, 0].copy(), y[:, 1].copy()
        y[:, 0], y[:, 1] = a + b, a - b
        h *= 2
    return np.moveaxis(x / math.sqrt(size), 0, axis)


class QPETarget(Target):
    """Phase estimation of P(2 pi phi) with n - 1 counting qubits and one eigenstate qubit."""

    name = "qpe"
    family = "qpe"
    kind = "unitary"
    min_qubits = 2
    max_qubits = 24
    summary = "Phase estimation of P(2 pi phi): counting qubits + 1 eigenstate qubit (input)"
    parameters = {"phase": f"eigenphase phi in [0, 1) of U = P(2 pi phi) (paper: {list(PAPER_PHASES)}; default 0.25)"}

    def _validate(self, params):
        params["phase"] = check_number("qpe: phase", params.get("phase", 0.25), 0.0, 1.0)
        if params["phase"] >= 1.0:
            raise TargetError("qpe: phase must be < 1")
        return params

    @property
    def counting(self) -> int:
        return self.num_qubits - 1

    def description(self) -> str:
        m, phi = self.counting, self.params["phase"]
        return (
            f"Synthesize the {self.num_qubits}-qubit quantum phase estimation unitary with {m} counting qubits "
            f"q[0]..q[{m - 1}] and one eigenstate qubit q[{m}] for U = P(2*pi*{phi:g}) (phase gate, eigenstate |1>): "
            f"H on every counting qubit, controlled-U^(2^k) controlled by q[k] acting on q[{m}], then the inverse "
            f"QFT (Qiskit convention, with swaps) on the counting register, so that with q[{m}] = |1> the counting "
            f"register ends in |round({phi:g} * 2^{m})>. q[{m}] is an input: do not prepare it."
        )

    def _build_unitary(self):
        m, phi = self.counting, self.params["phase"]
        big_m = 2**m
        hadamards = np.ones((big_m, big_m)) / math.sqrt(big_m)
        hadamards = hadamards * (-1.0) ** np.array(
            [[bin(a & b).count("1") for b in range(big_m)] for a in range(big_m)]
        )
        y = np.arange(big_m)
        controlled = np.concatenate([np.ones(big_m), np.exp(2j * np.pi * phi * y)])  # index y + M*e
        inv_qft = qft_matrix(m, inverse=True)
        eye2 = np.eye(2)
        return np.kron(eye2, inv_qft) @ np.diag(controlled) @ np.kron(eye2, hadamards)

    def apply(self, states, deadline=None):
        m, phi = self.counting, self.params["phase"]
        big_m = 2**m
        k = states.shape[1]
        x = states.reshape(2, big_m, k)  # index = y + M * e (eigenstate qubit is the top bit)
        x = walsh_hadamard(x, axis=1)
        x[1] *= np.exp(2j * np.pi * phi * np.arange(big_m))[:, None]
        by_counting = np.ascontiguousarray(x.transpose(1, 0, 2)).reshape(big_m, 2 * k)
        out = apply_qft(by_counting, m, inverse=True).reshape(big_m, 2, k).transpose(1, 0, 2)
        return np.ascontiguousarray(out).reshape(2 * big_m, k)

    def _build_reference(self):
        from qiskit.synthesis import synth_qft_full

        m, phi = self.counting, self.params["phase"]
        qc = QuantumCircuit(self.num_qubits)
        qc.h(range(m))
        for k in range(m):
            angle = math.remainder(2 * math.pi * phi * 2**k, 2 * math.pi)
            if abs(angle) > 1e-12:
                qc.cp(angle, k, m)
        qc.compose(synth_qft_full(m, inverse=True), qubits=range(m), inplace=True)
        return qc
