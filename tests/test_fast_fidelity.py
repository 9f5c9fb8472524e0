"""Fast fidelity: exact engine vs Operator, the sampled estimator, backends, caching, batch."""

import math

import numpy as np
import pytest
from qiskit import QuantumCircuit, qasm2, transpile
from qiskit.circuit.random import random_circuit
from qiskit.quantum_info import Operator

from rubriq.circuit.gates import canonical_ops
from rubriq.config import FidelityConfig, RubricConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.sim.exact import SimulationTooLargeError, simulate, unitary_fidelity
from rubriq.sim.sampled import sampled_fidelity
from rubriq.sim.torch_backend import BackendUnavailable
from rubriq.targets import make_target


def _random(n: int, seed: int) -> QuantumCircuit:
    qc = random_circuit(n, depth=8, max_operands=min(3, n), seed=seed)
    rng = np.random.default_rng(seed)
    extra = ["cy", "iswap", "dcx", "ecr", "ccz", "cswap", "sxdg", "y"]
    for name in rng.choice(extra, size=4):
        width = {"ccz": 3, "cswap": 3, "sxdg": 1, "y": 1}.get(name, 2)
        if width <= n:
            qubits = [int(q) for q in rng.choice(n, size=width, replace=False)]
            getattr(qc, name)(*qubits)
    return qc


@pytest.mark.parametrize("n", range(1, 11))
def test_exact_engine_matches_operator_to_1e10(n):
    qc = _random(n, seed=100 + n)
    ops = tuple(canonical_ops(qc))
    u = Operator(qc).data
    ours = simulate(ops, n, np.eye(2**n, dtype=complex))
    # equal up to one global phase
    k = np.unravel_index(np.argmax(np.abs(u)), u.shape)
    phase = u[k] / ours[k]
    assert abs(abs(phase) - 1) < 1e-10
    assert np.max(np.abs(ours * phase - u)) < 1e-10
    other = Operator(_random(n, seed=200 + n)).data
    f = unitary_fidelity(ops, n, other, max_qubits=12).process_fidelity
    assert abs(f - abs(np.trace(other.conj().T @ u)) ** 2 / 4**n) < 1e-10


def test_threaded_engine_equals_single_thread():
    qc = _random(8, seed=7)
    ops = tuple(canonical_ops(qc))
    target = Operator(_random(8, seed=8)).data
    one = unitary_fidelity(ops, 8, target, 12, threads=1)
    two = unitary_fidelity(ops, 8, target, 12, threads=2)
    assert abs(one.trace - two.trace) < 1e-10


@pytest.mark.parametrize("n", [3, 6, 10])
def test_sampled_is_exactly_one_with_zero_width_for_equivalent_circuits(n):
    target = make_target("qft", n)
    qc = transpile(
        target.reference_circuit(), basis_gates=["h", "cx", "rz", "sx", "x"], optimization_level=1, seed_transpiler=1
    )
    qc.global_phase += 0.7
    result = sampled_fidelity(tuple(canonical_ops(qc)), n, target, samples=8, seed=3)
    assert result.process_fidelity == pytest.approx(1.0, abs=1e-12)
    assert result.interval[1] - result.interval[0] < 1e-10


@pytest.mark.parametrize("seed", range(12))
def test_sampled_interval_contains_exact_value(seed):
    n = 2 + seed % 8
    target = make_target("circuit", qasm=qasm2.dumps(random_circuit(n, 4, max_operands=2, seed=seed)))
    candidate = random_circuit(n, 4, max_operands=2, seed=seed)
    candidate.rz(0.05 + 0.1 * seed, 0)  # near the target: fidelities spread over (0, 1)
    if seed % 3 == 0:
        candidate = random_circuit(n, 3, max_operands=2, seed=seed + 500)  # far from it
    ops = tuple(canonical_ops(candidate))
    exact = unitary_fidelity(ops, n, target.unitary(), 12).process_fidelity
    est = sampled_fidelity(ops, n, target, samples=16, seed=seed)
    lo, hi = est.interval
    assert lo - 1e-12 <= exact <= hi + 1e-12, (exact, est)


def test_sampled_scores_a_16_qubit_qft_and_reports_a_wrong_one():
    target = make_target("qft", 16)
    ref = target.reference_circuit()
    cfg = RubricConfig(fidelity=FidelityConfig(samples=8))
    ev = RubriQEvaluator(target=target, config=cfg)
    good = ev.evaluate_circuit(ref)
    assert good.fidelity_method == "sampled" and good.process_fidelity == pytest.approx(1.0, abs=1e-12)
    bad_circuit = ref.copy()
    bad_circuit.rz(0.5, 3)
    bad = ev.evaluate_circuit(bad_circuit)
    # exact value: rz(0.5) after the QFT = QFT times diag(e^-i0.25, e^+i0.25) on bit 3:
    # |Tr(diag)|/d = |cos(0.25)|, so F = cos(0.25)^2
    assert bad.fidelity_interval[0] <= math.cos(0.25) ** 2 <= bad.fidelity_interval[1]
    assert bad.process_fidelity == pytest.approx(math.cos(0.25) ** 2, abs=0.01)


def test_above_every_cap_gets_a_clear_reason_not_a_hang():
    cfg = RubricConfig(fidelity=FidelityConfig(max_sampled_qubits=18))
    ev = RubriQEvaluator(target_algorithm="qft", num_qubits=20, config=cfg)
    result = ev.evaluate_circuit(QuantumCircuit(20))
    assert result.error_type == "simulation" and "sampled-estimator cap of 18" in result.error
    with pytest.raises(SimulationTooLargeError):
        sampled_fidelity((), 20, make_target("qft", 20), max_qubits=18)


def test_torch_backend_on_cpu_equals_numpy():
    pytest.importorskip("torch")
    from rubriq.sim.torch_backend import TorchBackend

    qc = _random(6, seed=11)
    ops = tuple(canonical_ops(qc))
    target = Operator(_random(6, seed=12)).data
    np_result = unitary_fidelity(ops, 6, target, 12)
    torch_result = TorchBackend("cpu").unitary_fidelity(ops, 6, target, 12)
    assert abs(np_result.trace - torch_result.trace) < 1e-10
    assert torch_result.method == "torch:cpu"
    state = make_target("amplitude_encoding", 3)
    a = RubriQEvaluator(target=state).evaluate_circuit(state.reference_circuit())
    b = RubriQEvaluator(target=state, config=RubricConfig(fidelity=FidelityConfig(backend="torch", torch_device="cpu")))
    assert b.evaluate_circuit(state.reference_circuit()).process_fidelity == pytest.approx(a.process_fidelity)
    big = RubriQEvaluator(
        target=make_target("qft", 13),
        config=RubricConfig(fidelity=FidelityConfig(backend="torch", torch_device="cpu", samples=4)),
    )
    assert big.evaluate_circuit(make_target("qft", 13).reference_circuit()).process_fidelity == pytest.approx(1.0)


def test_qcec_backend_certifies_and_falls_back():
    pytest.importorskip("mqt.qcec")
    cfg = RubricConfig(fidelity=FidelityConfig(backend="qcec"))
    ev = RubriQEvaluator(target_algorithm="qft", num_qubits=5, config=cfg)
    ref = make_target("qft", 5).reference_circuit()
    assert (
        ev.evaluate_circuit(
            transpile(ref, basis_gates=["cx", "rz", "sx", "x"], optimization_level=1, seed_transpiler=1)
        ).fidelity_method
        == "qcec"
    )
    wrong = ref.copy()
    wrong.x(0)
    result = ev.evaluate_circuit(wrong)
    assert result.fidelity_method == "exact" and result.process_fidelity < 0.5


def test_missing_optional_backend_is_a_clear_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cudaq" else real(name, *a))
    with pytest.raises(BackendUnavailable, match="pip install cudaq"):
        RubriQEvaluator(
            target_algorithm="qft", num_qubits=3, config=RubricConfig(fidelity=FidelityConfig(backend="cudaq"))
        )


def test_identical_circuits_are_scored_once():
    ev = RubriQEvaluator(target_algorithm="qft", num_qubits=3)
    body = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nh q[2];\ncp(pi/2) q[2],q[1];\n'
    texts = [body, "Here:\n" + body, "```qasm\n" + body + "```", body]
    results = ev.evaluate_batch(texts, workers=1)
    # 3 distinct texts (the repeated one is deduplicated), one distinct circuit: simulated once
    assert ev.stats["scored"] == 1 and ev.stats["circuit_cache_hits"] == 2
    assert len({r.reward for r in results}) == 1


def test_batch_in_processes_equals_sequential():
    texts = [
        f'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nh q[{i % 3}];\nrz({0.1 * i}) q[1];\ncx q[0],q[2];'
        for i in range(10)
    ] + ["garbage", "```python\nfrom qiskit import QuantumCircuit\nqc = QuantumCircuit(3)\nqc.h(0)\n```"]
    texts = texts + texts[:3]
    sequential = [RubriQEvaluator(target_algorithm="qft", num_qubits=3).evaluate(t).to_dict() for t in texts]
    ev = RubriQEvaluator(target_algorithm="qft", num_qubits=3)
    try:
        parallel = [r.to_dict() for r in ev.evaluate_batch(texts, workers=2)]
    finally:
        ev.close()
    assert parallel == sequential


def test_apply_matches_dense_unitary_for_every_unitary_target():
    rng = np.random.default_rng(0)
    for target in (
        make_target("qft", 5, inverse=True, do_swaps=False),
        make_target("qpe", 5, phase=0.375),
        make_target("heisenberg", 4),
        make_target("tfim", 4),
        make_target("circuit", qasm=qasm2.dumps(random_circuit(4, 3, seed=1))),
    ):
        states = rng.normal(size=(target.dim, 3)) + 1j * rng.normal(size=(target.dim, 3))
        assert np.allclose(target.apply(states), target.unitary() @ states, atol=1e-10), target


def test_hardware_routing_cache_hits_per_interaction_pattern():
    from rubriq.rubric import hardware

    hardware.swap_overhead.cache_clear()
    ev = RubriQEvaluator(target_algorithm="qft", num_qubits=4, cache_size=0)
    base = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[4];\ncx q[0],q[1];\ncx q[1],q[2];\ncx q[0],q[2];\n'
    for angle in ("0.1", "0.2", "0.3"):  # same interactions, different circuits
        ev.evaluate(base + f"rz({angle}) q[3];")
    info = hardware.swap_overhead.cache_info()
    assert info.misses == 4 and info.hits == 8  # one routing per backend, reused by the other two
