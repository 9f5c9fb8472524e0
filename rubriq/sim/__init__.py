"""Fidelity backends and the one function that picks among them.

``compute_fidelity`` reads ``FidelityConfig.backend``:

* ``auto`` / ``numpy``: exact NumPy engine (``exact.py``) up to ``max_exact_qubits``, the
  sampled estimator (``sampled.py``) above, up to ``max_sampled_qubits``;
* ``torch``: the same two methods on torch tensors (``torch_backend.py``), CUDA if available;
* ``cudaq``: CUDA-Q state vectors (``cudaq_backend.py``);
* ``qcec``: certified equivalence (``certify.py``) against the target's exact reference
  circuit; a certified "equivalent" gives F = 1 without simulation, anything else falls back
  to ``auto``.

Wider circuits than ``target + max_ancillas`` are refused before any simulation.
"""

from __future__ import annotations

from rubriq.config import FidelityConfig
from rubriq.sim.exact import FidelityResult, SimulationTooLargeError, state_fidelity, unitary_fidelity
from rubriq.sim.sampled import sampled_fidelity
from rubriq.sim.torch_backend import BackendUnavailable


def compute_fidelity(facts, target, cfg: FidelityConfig, deadline=None, memory_mb=None) -> FidelityResult:
    n_c, n_t = facts.num_qubits, target.num_qubits
    if n_c > n_t + cfg.max_ancillas:
        raise SimulationTooLargeError(
            f"circuit has {n_c} qubits for a {n_t}-qubit target (at most {cfg.max_ancillas} ancillas)")
    backend = cfg.backend
    if backend == "qcec" and target.kind == "unitary" and target.reference_is_exact and n_c == n_t:
        from rubriq.sim.certify import certify

        verdict = certify(facts.circuit, target.reference_circuit())
        if verdict.verdict == "equivalent":
            return FidelityResult("process", 1.0, 1.0, None, method="qcec")
    if target.kind == "state":
        if backend == "torch":
            from rubriq.sim.torch_backend import TorchBackend

            return TorchBackend(cfg.torch_device).state_fidelity(
                facts.ops, n_c, target.state(), cfg.max_state_qubits, deadline, memory_mb)
        if backend == "cudaq":
            from rubriq.sim import cudaq_backend

            return cudaq_backend.state_fidelity(facts.ops, n_c, target.state(), cfg.max_state_qubits)
        return state_fidelity(facts.ops, n_c, target.state(), cfg.max_state_qubits, deadline, memory_mb)
    exact = max(n_c, n_t) <= cfg.max_exact_qubits and n_t <= target.max_dense_qubits
    sampler = None
    if backend == "torch":
        from rubriq.sim.torch_backend import TorchBackend

        sampler = TorchBackend(cfg.torch_device)
        if exact:
            return sampler.unitary_fidelity(facts.ops, n_c, target.unitary(), cfg.max_exact_qubits, deadline,
                                            memory_mb)
    elif backend == "cudaq":
        from rubriq.sim.cudaq_backend import CudaqSampler

        sampler, exact = CudaqSampler(), False
    if exact:
        return unitary_fidelity(facts.ops, n_c, target.unitary(), cfg.max_exact_qubits, deadline, memory_mb,
                                cfg.threads)
    return sampled_fidelity(facts.ops, n_c, target, cfg.samples, cfg.sample_seed, cfg.confidence_z,
                            cfg.max_sampled_qubits, deadline, memory_mb, sampler)


__all__ = ["BackendUnavailable", "FidelityResult", "SimulationTooLargeError", "compute_fidelity"]
