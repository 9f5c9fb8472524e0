"""Transpile a circuit for one catalog backend, with the numbers a hardware run is judged by.

IBM: Qiskit's preset pass manager at optimization level 3 on qiskit-ibm-runtime's fake backend
of the device (its coupling map, basis gates and calibrated error rates).  IonQ: qiskit-ionq's
backend with ``gateset="native"``, which rewrites to {gpi, gpi2, ms} (Aria) or {gpi, gpi2, zz}
(Forte).  Reported: depth, two-qubit gate count and the SWAPs that routing inserted (the
circuit after the routing stage minus the SWAPs already in the input; 0 on all-to-all devices).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

from qiskit import QuantumCircuit

from rubriq.circuit.backends import BackendSpec, get_backend


@dataclass
class Transpiled:
    """A circuit transpiled for a backend, with its depth, two-qubit gates and inserted SWAPs."""

    backend: str
    circuit: QuantumCircuit
    depth: int
    two_qubit_gates: int
    swaps_inserted: int
    gate_counts: dict[str, int]


@functools.cache
def ibm_fake_backend(name: str):
    """qiskit-ibm-runtime's fake backend for an IBM catalog entry (device snapshot + noise)."""
    import importlib

    spec = get_backend(name)
    if spec.provider != "ibm":
        raise ValueError(f"{name} is not an IBM backend")
    module = importlib.import_module(f"qiskit_ibm_runtime.fake_provider.backends.{spec.fake_backend}")
    cls = next(getattr(module, n) for n in dir(module) if n.startswith("Fake") and n != "FakeBackendV2")
    return cls()


@contextlib.contextmanager
def _offline_qubit_count(spec: BackendSpec):
    """qiskit-ionq asks api.ionq.co for a device's qubit count whenever a backend object is built
    (and silently falls back to 4 offline); give it the catalog's count instead."""
    from qiskit_ionq import ionq_backend

    original = ionq_backend.get_n_qubits
    ionq_backend.get_n_qubits = lambda *_a, **_k: spec.num_qubits
    try:
        yield
    finally:
        ionq_backend.get_n_qubits = original


def ionq_backend(name: str, token: str | None = None):
    """qiskit-ionq's native-gate QPU backend for an IonQ catalog entry (no network without a token)."""
    try:
        from qiskit_ionq import IonQProvider
    except ImportError:
        raise RuntimeError("IonQ backends need qiskit-ionq: pip install 'rubriq[hardware]'") from None
    spec = get_backend(name)
    if spec.provider != "ionq":
        raise ValueError(f"{name} is not an IonQ backend")
    with _offline_qubit_count(spec) if token is None else contextlib.nullcontext():
        return IonQProvider(token=token).get_backend(spec.provider_name or name, gateset="native")


def _two_qubit(circuit: QuantumCircuit) -> int:
    return sum(1 for inst in circuit.data if inst.operation.num_qubits == 2 and inst.operation.name != "barrier")


def transpile_for(circuit: QuantumCircuit, backend: str, seed: int = 42, optimization_level: int = 3) -> Transpiled:
    """Transpile ``circuit`` (measurements included) for ``backend``; deterministic for a seed."""
    from qiskit.transpiler import StagedPassManager
    from qiskit.transpiler.preset_passmanagers import generate_preset_pass_manager

    spec = get_backend(backend)
    if circuit.num_qubits > spec.num_qubits:
        raise ValueError(f"{circuit.num_qubits} qubits do not fit on {backend} ({spec.num_qubits} qubits)")
    device = ibm_fake_backend(backend) if spec.provider == "ibm" else ionq_backend(backend)
    pm = generate_preset_pass_manager(optimization_level=optimization_level, backend=device, seed_transpiler=seed)
    swaps = 0
    if spec.provider == "ibm":
        # routing alone (same seed, so the same choice as in the full run) to count inserted SWAPs
        routed = StagedPassManager(
            stages=["init", "layout", "routing"], init=pm.init, layout=pm.layout, routing=pm.routing
        )
        before = StagedPassManager(stages=["init"], init=pm.init).run(circuit).count_ops().get("swap", 0)
        swaps = max(0, routed.run(circuit).count_ops().get("swap", 0) - before)
    out = pm.run(circuit)
    counts = {k: int(v) for k, v in out.count_ops().items()}
    return Transpiled(backend, out, out.depth(), _two_qubit(out), swaps, counts)
