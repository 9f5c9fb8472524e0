"""Exact fidelity engine (numpy, complex128), no Qiskit ``Operator`` in the loop.

Gates are applied directly to a block of column vectors: for unitary targets the block is the
2^n_t columns |x>|0...0>_anc, for state targets the single column |0...0>.  Qubit q is bit q
of the row index (Qiskit's little-endian order), ancillas are the circuit's qubits beyond the
target's width and sit in the high bits.

    F_process = |Tr(U_A^+ V)|^2 / d^2,   V = (I (x) <0|_anc) U_c (I (x) |0>_anc),   d = 2^n_t
    F_avg     = (d F_process + 1) / (d + 1)
    F_state   = |<psi_target (x) 0_anc| U_c |0...0>|^2

A circuit with fewer qubits than the target acts as the identity on the missing ones.  With
clean ancillas, F_process = 1 exactly when U_c maps |x>|0> to e^{i phi} (U_A|x>)|0> for all x.

Hand-written because no maintained library computes the ancilla-projected trace directly:
Qiskit's ``Operator`` builds the full 4^n matrix through Python-level composition (the slow
path this engine replaces) and Aer's unitary simulator has no ancilla projection.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rubriq.rubric.gates import Op, op_matrix


class SimulationTooLargeError(ValueError):
    """The requested simulation exceeds the configured exact cap."""


def apply_op(state: np.ndarray, matrix: np.ndarray, qubits: tuple[int, ...], n: int) -> np.ndarray:
    """Apply a k-qubit gate (Qiskit matrix order) to ``state`` of shape (2^n, m)."""
    k = len(qubits)
    if k == 1:
        q = qubits[0]
        view = state.reshape(2 ** (n - 1 - q), 2, -1)
        return np.matmul(matrix, view).reshape(state.shape)
    tensor = state.reshape((2,) * n + (-1,))
    axes = [n - 1 - q for q in reversed(qubits)]
    gate = matrix.reshape((2,) * (2 * k))
    out = np.tensordot(gate, tensor, axes=(list(range(k, 2 * k)), axes))
    out = np.moveaxis(out, list(range(k)), axes)
    return np.ascontiguousarray(out).reshape(state.shape)


def apply_ops(state: np.ndarray, ops, n: int, deadline=None) -> np.ndarray:
    for i, op in enumerate(ops):
        if deadline is not None and i & 15 == 0:
            deadline.check("simulation")
        state = apply_op(state, op_matrix(op.name, op.params), op.qubits, n)
    return state


def check_memory(n: int, columns: int, memory_mb: float | None) -> None:
    """Refuse, before allocating, a simulation whose working set exceeds ``memory_mb``."""
    needed = 3 * 16 * (2**n) * columns  # the block, one gate's output, one temporary
    if memory_mb is not None and needed > memory_mb * 1024 * 1024:
        from rubriq.budget import BudgetExceeded

        raise BudgetExceeded(f"simulating {n} qubits x {columns} columns needs ~{needed / 2**20:.0f} MiB "
                             f"(memory budget {memory_mb} MiB)")


def circuit_block(ops, n_circuit: int, n_target: int, deadline=None) -> np.ndarray:
    """V = (I (x) <0|_anc) U_c (I (x) |0>_anc), shape (2^n_target, 2^n_target)."""
    n = max(n_circuit, n_target)
    d = 2**n_target
    block = np.zeros((2**n, d), dtype=complex)
    block[np.arange(d), np.arange(d)] = 1.0
    block = apply_ops(block, ops, n, deadline)
    return block[:d, :]


@dataclass(frozen=True)
class FidelityResult:
    kind: str
    """'process' for unitary targets, 'state' for state-preparation targets."""
    process_fidelity: float
    average_fidelity: float
    trace: complex | None = None


def unitary_fidelity(ops: tuple[Op, ...], n_circuit: int, target: np.ndarray,
                     max_qubits: int, deadline=None, memory_mb: float | None = None) -> FidelityResult:
    d = target.shape[0]
    n_target = d.bit_length() - 1
    n = max(n_circuit, n_target)
    if n > max_qubits:
        raise SimulationTooLargeError(f"{n} qubits exceed the exact-fidelity cap of {max_qubits}")
    check_memory(n, d, memory_mb)
    block = circuit_block(ops, n_circuit, n_target, deadline)
    trace = complex(np.vdot(target, block))
    f_pro = min(1.0, abs(trace) ** 2 / d**2)
    return FidelityResult("process", f_pro, (d * f_pro + 1) / (d + 1), trace)


def state_fidelity(ops: tuple[Op, ...], n_circuit: int, target: np.ndarray,
                   max_qubits: int, deadline=None, memory_mb: float | None = None) -> FidelityResult:
    d = target.shape[0]
    n_target = d.bit_length() - 1
    n = max(n_circuit, n_target)
    if n > max_qubits:
        raise SimulationTooLargeError(f"{n} qubits exceed the state-simulation cap of {max_qubits}")
    check_memory(n, 1, memory_mb)
    state = np.zeros((2**n, 1), dtype=complex)
    state[0, 0] = 1.0
    state = apply_ops(state, ops, n, deadline)
    overlap = complex(np.vdot(target, state[:d, 0]))
    f = min(1.0, abs(overlap) ** 2)
    return FidelityResult("state", f, f, overlap)
