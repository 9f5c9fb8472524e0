"""The exact engine's algorithm on torch tensors: CUDA when available, CPU otherwise.

Same kernels (``kernels.BlockSimulator`` with ``TorchOps``), same numbers as the NumPy engine
to rounding.  ``pip install torch`` (CPU wheels suffice for tests; a CUDA build for GPUs).
"""

from __future__ import annotations

import numpy as np

from rubriq.sim.exact import FidelityResult, checked_width
from rubriq.sim.kernels import TorchOps, run_program
from rubriq.sim.measures import average_fidelity
from rubriq.sim.program import compile_ops


class BackendUnavailable(RuntimeError):
    """An optional fidelity backend's package is not installed or has no device."""


def _torch():
    try:
        import torch
    except ImportError:
        raise BackendUnavailable("fidelity.backend=torch needs PyTorch: pip install torch") from None
    return torch


def resolve_device(name: str = "auto") -> str:
    """The torch device for ``name`` (``auto``: CUDA when available); an error for CUDA without a GPU."""
    torch = _torch()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise BackendUnavailable(f"torch_device={name!r} but torch sees no CUDA device")
    return name


class TorchBackend:
    """The exact and sampled fidelity on torch tensors (same kernels as NumPy)."""

    def __init__(self, device: str = "auto") -> None:
        self.torch = _torch()
        self.device = resolve_device(device)
        self.ops = TorchOps(self.device)

    def simulate_rows(self, ops, n: int, inputs: np.ndarray, rows: int, deadline=None) -> np.ndarray:
        """Apply the circuit to input columns embedded in the first rows (ancillas |0>)."""
        torch = self.torch
        block = torch.zeros((2**n, inputs.shape[1]), dtype=torch.complex128, device=self.device)
        block[: inputs.shape[0]] = torch.as_tensor(inputs, dtype=torch.complex128, device=self.device)
        sim = run_program(block, n, compile_ops(ops), deadline, self.ops)
        return sim.rows_of(rows).cpu().numpy()

    def unitary_fidelity(
        self, ops, n_circuit: int, target: np.ndarray, max_qubits: int, deadline=None, memory_mb=None
    ) -> FidelityResult:
        d, _, n = checked_width(n_circuit, target, max_qubits, memory_mb)
        torch = self.torch
        block = torch.zeros((2**n, d), dtype=torch.complex128, device=self.device)
        idx = torch.arange(d, device=self.device)
        block[idx, idx] = 1.0
        rows = run_program(block, n, compile_ops(ops), deadline, self.ops).rows_of(d)
        trace = complex(torch.vdot(torch.as_tensor(target, device=self.device).reshape(-1), rows.reshape(-1)))
        f = min(1.0, abs(trace) ** 2 / d**2)
        return FidelityResult("process", f, average_fidelity(f, d), trace, method=f"torch:{self.device}")

    def state_fidelity(
        self, ops, n_circuit: int, target: np.ndarray, max_qubits: int, deadline=None, memory_mb=None
    ) -> FidelityResult:
        d, _, n = checked_width(n_circuit, target, max_qubits, memory_mb, state=True)
        start = np.zeros((1, 1), dtype=complex)
        start[0, 0] = 1.0
        rows = self.simulate_rows(ops, n, start, d, deadline)
        overlap = complex(np.vdot(target, rows[:, 0]))
        f = min(1.0, abs(overlap) ** 2)
        return FidelityResult("state", f, f, overlap, method=f"torch:{self.device}")
