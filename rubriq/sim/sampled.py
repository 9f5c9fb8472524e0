"""Sampled fidelity estimator for circuits too wide for the exact engine.

For k random-phase input states |psi_j> = 2^{-n/2} sum_x e^{i theta_jx} |x> (a 1-design:
E[|psi><psi|] = I/d),

    a_j = <U_A psi_j | V psi_j>,   E[a_j] = Tr(U_A^+ V) / d,

so F_process = |E a|^2 is estimated by |mean(a)|^2 at a cost of O(k * gates * 2^n) instead
of O(gates * 4^n).  If V = e^{i phi} U_A, every a_j equals e^{i phi}: the estimate is exactly
1 with zero variance.  The reported interval is [(|mean| - z se)^2, (|mean| + z se)^2]
clipped to [0, 1], se the standard error of the complex mean; with z = 3 it holds with
probability ~1 - e^{-9}.  U_A psi comes from ``Target.apply`` (FFT for the QFT, a sparse
exponential for Hamiltonians, simulation for circuit targets).
"""

from __future__ import annotations

import math

import numpy as np

from rubriq.sim.exact import FidelityResult, SimulationTooLargeError, check_memory, simulate_rows
from rubriq.sim.measures import average_fidelity


def random_phase_states(d: int, k: int, seed: int) -> np.ndarray:
    """``k`` random-phase states of dimension ``d`` (columns), seeded."""
    rng = np.random.default_rng(seed)
    return np.exp(2j * np.pi * rng.random((d, k))) / math.sqrt(d)


def estimate_from_overlaps(a: np.ndarray, z: float, d: int) -> FidelityResult:
    """F_process = |mean a|^2 and its z-standard-error interval from the overlaps ``a``."""
    k = len(a)
    mean = complex(a.mean())
    se = math.sqrt(float(np.sum(np.abs(a - mean) ** 2)) / (k * (k - 1))) if k > 1 else 1.0
    f = min(1.0, abs(mean) ** 2)
    lo = max(0.0, abs(mean) - z * se) ** 2
    hi = min(1.0, (abs(mean) + z * se) ** 2)
    return FidelityResult(
        "process", f, average_fidelity(f, d), mean * d, method="sampled", interval=(min(lo, f), max(hi, f)), samples=k
    )


def sampled_fidelity(
    ops,
    n_circuit: int,
    target,
    samples: int = 16,
    seed: int = 1234,
    z: float = 3.0,
    max_qubits: int = 24,
    deadline=None,
    memory_mb: float | None = None,
    backend=None,
) -> FidelityResult:
    """F_process estimated from ``samples`` random input states, with its confidence interval."""
    n_target = target.num_qubits
    n = max(n_circuit, n_target)
    if n > max_qubits:
        raise SimulationTooLargeError(f"{n} qubits exceed the sampled-estimator cap of {max_qubits}")
    if samples < 2:
        raise ValueError("the sampled estimator needs at least 2 samples")
    d = 2**n_target
    check_memory(n, samples, memory_mb)
    psi = random_phase_states(d, samples, seed)
    expected = np.asarray(target.apply(psi, deadline))
    if backend is None:
        block = np.zeros((2**n, samples), dtype=complex)
        block[:d] = psi
        out = simulate_rows(ops, n, block, d, deadline)
    else:
        out = backend.simulate_rows(ops, n, psi, d, deadline)
    a = np.einsum("ij,ij->j", expected.conj(), out)
    return estimate_from_overlaps(a, z, d)
