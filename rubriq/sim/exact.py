"""Exact fidelity engine (numpy, complex128), no Qiskit ``Operator`` in the loop.

Gates are applied directly to a block of column vectors: for unitary targets the block is the
2^n_t columns |x>|0...0>_anc, for state targets the single column |0...0>.  Qubit q is bit q
of the row index (Qiskit's little-endian order), ancillas are the circuit's qubits beyond the
target's width and sit in the high bits.

    F_process = |Tr(U_A^+ V)|^2 / d^2,   V = (I (x) <0|_anc) U_c (I (x) |0>_anc),   d = 2^n_t
    F_avg     = (d F_process + 1) / (d + 1)      (measures.average_fidelity)
    F_state   = |<psi_target (x) 0_anc| U_c |0...0>|^2

A circuit with fewer qubits than the target acts as the identity on the missing ones.  With
clean ancillas, F_process = 1 exactly when U_c maps |x>|0> to e^{i phi} (U_A|x>)|0> for all x.

The gates are compiled to in-place kernels (``program.py``, ``kernels.py``): one-qubit runs
fused, diagonal gates as phase multiplies, permutations as block swaps.  Hand-written because
no maintained library computes the ancilla-projected trace directly: Qiskit's ``Operator``
composes dense matrices (the slow path this engine replaces) and Aer's unitary simulator has
no ancilla projection.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

import numpy as np

from rubriq.circuit.gates import Op
from rubriq.sim.kernels import run_program
from rubriq.sim.measures import average_fidelity
from rubriq.sim.program import compile_ops


class SimulationTooLargeError(ValueError):
    """The requested simulation exceeds the configured exact cap."""


def check_memory(n: int, columns: int, memory_mb: float | None) -> None:
    """Refuse, before allocating, a simulation whose working set exceeds ``memory_mb``."""
    needed = 3.25 * 16 * (2**n) * columns  # block, gather buffer, 1.25 blocks of scratch
    if memory_mb is not None and needed > memory_mb * 1024 * 1024:
        from rubriq.budget import BudgetExceeded

        raise BudgetExceeded(
            f"simulating {n} qubits x {columns} columns needs ~{needed / 2**20:.0f} MiB (memory budget {memory_mb} MiB)"
        )


def checked_width(
    n_circuit: int, target: np.ndarray, max_qubits: int, memory_mb: float | None, state: bool = False
) -> tuple[int, int, int]:
    """(d, n_target, n) for simulating a circuit of ``n_circuit`` qubits against ``target`` (a
    unitary, or a state vector with ``state``): the target's dimension and width and the width
    simulated, refused before anything is allocated above ``max_qubits``
    (:class:`SimulationTooLargeError`) or the memory budget (``BudgetExceeded``)."""
    d = target.shape[0]
    n_target = d.bit_length() - 1
    n = max(n_circuit, n_target)
    if n > max_qubits:
        cap = "state-simulation" if state else "exact-fidelity"
        raise SimulationTooLargeError(f"{n} qubits exceed the {cap} cap of {max_qubits}")
    check_memory(n, 1 if state else d, memory_mb)
    return d, n_target, n


def simulate_rows(ops, n: int, block, rows: int, deadline=None, ops_backend=None):
    """Apply the canonical gates to every column of ``block`` (shape (2^n, m)) and return the
    first ``rows`` rows of the result (the ancilla-free part), up to a global phase."""
    sim = run_program(block, n, compile_ops(ops), deadline, ops_backend)
    return sim.rows_of(rows)


def simulate(ops, n: int, block, deadline=None):
    """The full (2^n, m) result of applying the canonical gates to ``block``, up to global phase."""
    sim = run_program(block, n, compile_ops(ops), deadline)
    sim.materialize()
    return sim.s


def _column_chunks(d: int, threads: int) -> list[tuple[int, int]]:
    threads = max(1, min(threads, d // 64 or 1))
    edges = [round(i * d / threads) for i in range(threads + 1)]
    return [(a, b) for a, b in itertools.pairwise(edges) if b > a]


def circuit_block(ops, n_circuit: int, n_target: int, deadline=None, threads: int = 0) -> np.ndarray:
    """V = (I (x) <0|_anc) U_c (I (x) |0>_anc) up to a global phase, shape (2^n_t, 2^n_t).

    The input columns are independent: with ``threads`` > 1 they are split into chunks that
    run the same kernel program in parallel threads (NumPy releases the GIL in its loops)."""
    n = max(n_circuit, n_target)
    d = 2**n_target
    program = compile_ops(ops)

    def run(chunk: tuple[int, int]) -> np.ndarray:
        a, b = chunk
        block = np.zeros((2**n, b - a), dtype=complex)
        block[np.arange(a, b), np.arange(b - a)] = 1.0
        return run_program(block, n, program, deadline).rows_of(d)

    from rubriq.sim.kernels import numba_kernels

    if threads <= 0:  # auto (see FidelityConfig.threads)
        dense = sum(1 for ins in program if ins.kind in ("dense1", "dense2"))
        threads = (os.cpu_count() or 1) if (n >= 10 and dense >= 0.5 * max(1, len(program))) else 1
    fast = numba_kernels()
    if fast is not None:  # the compiled kernels parallelize over rows themselves
        fast.set_threads(threads)
        return run((0, d))
    chunks = _column_chunks(d, threads)
    if len(chunks) == 1:
        return run(chunks[0])
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(chunks)) as pool:
        return np.concatenate(list(pool.map(run, chunks)), axis=1)


@dataclass(frozen=True)
class FidelityResult:
    """A fidelity with its kind, method, interval and (for certified rewrites) verdict."""

    kind: str
    """'process' for unitary targets, 'state' for state-preparation targets."""
    process_fidelity: float
    average_fidelity: float
    trace: complex | None = None
    method: str = "exact"
    """exact, sampled, qcec (certified), or the backend that computed it (torch, cudaq)."""
    interval: tuple[float, float] | None = None
    """Confidence interval of F_process (sampled estimator only)."""
    samples: int | None = None
    verdict: str | None = None
    """Certified equivalence (mqt.qcec): 'equivalent', 'not_equivalent', 'unknown'; None when
    no certification was attempted."""
    note: str | None = None
    """How the number came about when it is not a plain simulation (e.g. why F = 0 was set)."""


def unitary_fidelity(
    ops: tuple[Op, ...],
    n_circuit: int,
    target: np.ndarray,
    max_qubits: int,
    deadline=None,
    memory_mb: float | None = None,
    threads: int = 0,
) -> FidelityResult:
    """Exact F_process (and F_avg) of the canonical gates against a dense target unitary."""
    d, n_target, _ = checked_width(n_circuit, target, max_qubits, memory_mb)
    block = circuit_block(ops, n_circuit, n_target, deadline, threads)
    trace = complex(np.vdot(target, block))
    f_pro = min(1.0, abs(trace) ** 2 / d**2)
    return FidelityResult("process", f_pro, average_fidelity(f_pro, d), trace)


def state_fidelity(
    ops: tuple[Op, ...],
    n_circuit: int,
    target: np.ndarray,
    max_qubits: int,
    deadline=None,
    memory_mb: float | None = None,
) -> FidelityResult:
    """Exact state fidelity of the circuit's output (ancillas projected on |0>) with the target state."""
    d, _, n = checked_width(n_circuit, target, max_qubits, memory_mb, state=True)
    state = np.zeros((2**n, 1), dtype=complex)
    state[0, 0] = 1.0
    rows = simulate_rows(ops, n, state, d, deadline)
    overlap = complex(np.vdot(target, rows[:, 0]))
    f = min(1.0, abs(overlap) ** 2)
    return FidelityResult("state", f, f, overlap)
