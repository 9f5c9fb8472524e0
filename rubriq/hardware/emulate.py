"""Noiseless and noisy (offline) output distributions, and their KL divergence (paper Fig. 8).

* noiseless: exact probabilities of the logical circuit (``Statevector``), no sampling noise;
* IBM noisy emulation: Aer's ``SamplerV2`` on the noisy simulator of the device's fake
  backend, i.e. Aer with the snapshot's calibrated noise model;
* IonQ noisy emulation: Aer with a noise model built from the catalog's cited error rates:
  depolarizing error e_1q after every gpi/gpi2, e_2q after every ms/zz, symmetric readout error
  e_ro.  qiskit-ionq's native gates are simulated as labeled unitaries.

KL(P || Q) = sum_x P(x) ln(P(x) / Q(x)) in nats, P the sampled (emulated or hardware)
histogram, Q the noiseless distribution floored at ``eps`` (default 1/shots, the resolution of a
histogram) and renormalized over the union of both supports, so that an outcome the ideal
circuit never produces costs ln(P/eps) instead of infinity.

>>> round(kl_divergence({"00": 50, "11": 50}, {"00": 0.5, "11": 0.5}), 12)
0.0
>>> kl_divergence({"00": 100}, {"00": 0.5, "11": 0.5}) > 0.69
True
"""

from __future__ import annotations

import functools
import math

from qiskit import QuantumCircuit

from rubriq.circuit.backends import error_rates, get_backend


def with_measurements(circuit: QuantumCircuit) -> QuantumCircuit:
    """``circuit`` with a final measurement of every qubit (unchanged if it already measures)."""
    if any(inst.operation.name == "measure" for inst in circuit.data):
        return circuit
    out = circuit.copy()
    out.measure_all()
    return out


def ideal_distribution(circuit: QuantumCircuit) -> dict[str, float]:
    """Exact outcome probabilities of the measured qubits (bitstrings in Qiskit order)."""
    from qiskit.quantum_info import Statevector

    logical = circuit.remove_final_measurements(inplace=False)
    probs = Statevector(logical).probabilities_dict()
    return {k: float(v) for k, v in probs.items() if v > 1e-12}


def kl_divergence(counts: dict[str, int], ideal: dict[str, float], eps: float | None = None) -> float:
    """KL(sampled || noiseless) in nats (see the module docstring for the floor ``eps``)."""
    shots = sum(counts.values())
    if shots <= 0:
        raise ValueError("no shots in the histogram")
    eps = 1.0 / shots if eps is None else eps
    support = set(counts) | set(ideal)
    q = {x: ideal.get(x, 0.0) + eps for x in support}
    z = sum(q.values())
    return sum((c / shots) * math.log((c / shots) / (q[x] / z)) for x, c in counts.items() if c > 0)


def compact(circuit: QuantumCircuit) -> QuantumCircuit:
    """The circuit on its active qubits only (a transpiled circuit spans the whole device)."""
    active = sorted({circuit.find_bit(q).index for inst in circuit.data for q in inst.qubits})
    index = {q: i for i, q in enumerate(active)}
    out = QuantumCircuit(len(active), circuit.num_clbits)
    for inst in circuit.data:
        qubits = [index[circuit.find_bit(q).index] for q in inst.qubits]
        clbits = [circuit.find_bit(c).index for c in inst.clbits]
        out.append(inst.operation, qubits, clbits)
    return out


def _counts(result) -> dict[str, int]:
    data = result.data
    name = next(iter(data.keys()))
    return dict(getattr(data, name).get_counts())


@functools.cache
def ibm_noisy_simulator(backend: str):
    """Aer with the fake backend's noise model, built once per backend (building it for a
    156-qubit device takes ~30 s, which local mode would otherwise pay at every run)."""
    from qiskit_aer import AerSimulator

    from rubriq.hardware.transpile import ibm_fake_backend

    return AerSimulator.from_backend(ibm_fake_backend(backend))


def emulate_ibm(transpiled: QuantumCircuit, backend: str, shots: int = 4096, seed: int = 42) -> dict[str, int]:
    """Counts from Aer's SamplerV2 (the supported local sampler) on the fake backend's noisy
    simulator.  qiskit-ibm-runtime's ``SamplerV2`` in local mode, used before, runs this same Aer
    simulator but is deprecated as of qiskit-ibm-runtime 0.50; its replacement (the client-side
    ``executor_sampler.Sampler``) targets IBM's service, so the offline path uses Aer directly."""
    from qiskit_aer.primitives import SamplerV2

    sampler = SamplerV2.from_backend(ibm_noisy_simulator(backend), seed=seed)
    return _counts(sampler.run([transpiled], shots=shots).result()[0])


def ionq_noise_model(backend: str):
    """Aer noise model from the catalog's (cited) IonQ error rates."""
    from qiskit_aer.noise import NoiseModel, ReadoutError, depolarizing_error

    rates = error_rates(backend)
    model = NoiseModel(basis_gates=["unitary"])
    model.add_all_qubit_quantum_error(depolarizing_error(rates["error_1q"], 1), ["gpi", "gpi2"])
    model.add_all_qubit_quantum_error(depolarizing_error(rates["error_2q"], 2), ["ms", "zz"])
    e = rates["error_readout"]
    model.add_all_qubit_readout_error(ReadoutError([[1 - e, e], [e, 1 - e]]))
    return model


def emulate_ionq(transpiled: QuantumCircuit, backend: str, shots: int = 4096, seed: int = 42) -> dict[str, int]:
    """Counts from Aer with the IonQ noise model; native gates run as labeled unitaries."""
    from qiskit.circuit.library import UnitaryGate
    from qiskit_aer import AerSimulator

    small = compact(transpiled)
    labeled = QuantumCircuit(small.num_qubits, small.num_clbits)
    for inst in small.data:
        op = inst.operation
        if op.name in ("gpi", "gpi2", "ms", "zz"):
            op = UnitaryGate(op.to_matrix(), label=op.name)
        labeled.append(op, inst.qubits, inst.clbits)
    sim = AerSimulator(noise_model=ionq_noise_model(backend), seed_simulator=seed)
    return dict(sim.run(labeled, shots=shots).result().get_counts())


def emulate(transpiled: QuantumCircuit, backend: str, shots: int = 4096, seed: int = 42) -> dict[str, int]:
    """Counts of the transpiled circuit from the offline noisy emulation of ``backend``."""
    spec = get_backend(backend)
    return (emulate_ibm if spec.provider == "ibm" else emulate_ionq)(transpiled, backend, shots, seed)
