"""Optional CUDA-Q backend (package ``cudaq``): state vectors on NVIDIA GPUs.

Supports state-preparation targets (the state from |0...0>) and the sampled estimator for
unitary targets (each random input state is loaded with ``qalloc(vector)``).  Exact
unitaries on a GPU are the torch backend's job.  Without the package every call raises
:class:`BackendUnavailable` with the install command; this module is not exercised by the
CPU test suite beyond that message.
"""

from __future__ import annotations

import math

import numpy as np

from rubriq.sim.exact import FidelityResult, SimulationTooLargeError
from rubriq.sim.torch_backend import BackendUnavailable


def _cudaq():
    try:
        import cudaq
    except ImportError:
        raise BackendUnavailable("fidelity.backend=cudaq needs CUDA-Q: pip install cudaq") from None
    return cudaq


_SIMPLE = {"h": "h", "x": "x", "y": "y", "z": "z", "s": "s", "sdg": "sdg", "t": "t", "tdg": "tdg"}


_NATIVE = set(_SIMPLE) | {"rx", "ry", "rz", "p", "u1", "sx", "sxdg", "cx", "cy", "cz", "swap", "ccx", "ccz", "cswap"}


def _expand(ops):
    """Replace gates CUDA-Q's builder lacks (iswap, dcx, ecr) by their Qiskit definitions."""
    from qiskit import QuantumCircuit

    from rubriq.circuit.gates import STANDARD_GATES, Op, canonical_ops

    out = []
    for op in ops:
        if op.name in _NATIVE:
            out.append(op)
        elif op.name != "id":
            sub = QuantumCircuit(len(op.qubits))
            sub.append(STANDARD_GATES[op.name], range(len(op.qubits)))
            for inner in canonical_ops(sub.decompose()):
                out.append(Op(inner.name, tuple(op.qubits[i] for i in inner.qubits), inner.params))
    return out


def _build(cudaq, ops, n: int, initial: np.ndarray | None):
    kernel = cudaq.make_kernel()
    q = kernel.qalloc(initial.tolist() if initial is not None else n)
    for op in _expand(ops):
        name, qs, p = op.name, op.qubits, op.params
        if name in _SIMPLE:
            getattr(kernel, _SIMPLE[name])(q[qs[0]])
        elif name in ("rx", "ry", "rz"):
            getattr(kernel, name)(p[0], q[qs[0]])
        elif name in ("p", "u1"):
            kernel.r1(p[0], q[qs[0]])
        elif name in ("sx", "sxdg"):  # equal up to a global phase
            kernel.rx(math.pi / 2 if name == "sx" else -math.pi / 2, q[qs[0]])
        elif name in ("cx", "cy", "cz"):
            getattr(kernel, name)(q[qs[0]], q[qs[1]])
        elif name == "swap":
            kernel.swap(q[qs[0]], q[qs[1]])
        elif name == "ccx":
            kernel.cx([q[qs[0]], q[qs[1]]], q[qs[2]])
        elif name == "ccz":
            kernel.cz([q[qs[0]], q[qs[1]]], q[qs[2]])
        elif name == "cswap":
            c, a, b = qs
            kernel.cx(q[b], q[a])
            kernel.cx([q[c], q[a]], q[b])
            kernel.cx(q[b], q[a])
    return kernel


def _state(cudaq, ops, n, initial=None) -> np.ndarray:
    return np.array(cudaq.get_state(_build(cudaq, ops, n, initial)), dtype=complex)


def state_fidelity(ops, n_circuit: int, target: np.ndarray, max_qubits: int) -> FidelityResult:
    """State fidelity with CUDA-Q's state vector (never run here: no CUDA-Q machine)."""
    cudaq = _cudaq()
    d = target.shape[0]
    n = max(n_circuit, d.bit_length() - 1)
    if n > max_qubits:
        raise SimulationTooLargeError(f"{n} qubits exceed the state-simulation cap of {max_qubits}")
    psi = _state(cudaq, ops, n)
    overlap = complex(np.vdot(target, psi[:d]))
    f = min(1.0, abs(overlap) ** 2)
    return FidelityResult("state", f, f, overlap, method="cudaq")


class CudaqSampler:
    """Adapter for ``sampled_fidelity(backend=...)``: simulate each input column with CUDA-Q."""

    def __init__(self) -> None:
        self.cudaq = _cudaq()

    def simulate_rows(self, ops, n: int, inputs: np.ndarray, rows: int, deadline=None) -> np.ndarray:
        cols = []
        for j in range(inputs.shape[1]):
            if deadline is not None:
                deadline.check("simulation")
            start = np.zeros(2**n, dtype=complex)
            start[: inputs.shape[0]] = inputs[:, j]
            cols.append(_state(self.cudaq, ops, n, start)[:rows])
        return np.stack(cols, axis=1)
