"""Fidelity against qiskit.quantum_info (Operator, Statevector) as the independent reference."""

import math

import numpy as np
import pytest
from qiskit import QuantumCircuit, qasm2
from qiskit.circuit.library import HamiltonianGate, QFTGate
from qiskit.circuit.random import random_circuit
from qiskit.quantum_info import Operator, Statevector

from rubriq.circuit.facts import CircuitFacts
from rubriq.circuit.gates import canonical_ops
from rubriq.evaluator import RubriQEvaluator
from rubriq.sim.exact import SimulationTooLargeError, state_fidelity, unitary_fidelity
from rubriq.targets import make_target

TEXTBOOK_QFT4 = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[4];
h q[3]; cp(pi/2) q[3],q[2]; cp(pi/4) q[3],q[1]; cp(pi/8) q[3],q[0];
h q[2]; cp(pi/2) q[2],q[1]; cp(pi/4) q[2],q[0];
h q[1]; cp(pi/2) q[1],q[0];
h q[0];
swap q[0],q[3]; swap q[1],q[2];
"""


def reference_process_fidelity(candidate: QuantumCircuit, target: np.ndarray) -> float:
    u = Operator(candidate).data
    d = target.shape[0]
    return abs(np.trace(target.conj().T @ u)) ** 2 / d**2


def test_textbook_qft4_has_fidelity_one():
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=4).evaluate(TEXTBOOK_QFT4)
    assert result.process_fidelity == pytest.approx(1.0, abs=1e-12)
    assert result.average_fidelity == pytest.approx(1.0, abs=1e-12)
    assert result.scores["fidelity"] == pytest.approx(1.0, abs=1e-12)


def test_qft_target_equals_qiskit_qftgate():
    for n in range(1, 6):
        assert np.allclose(make_target("qft", n).unitary(), Operator(QFTGate(n)).data, atol=1e-12)


def test_wrong_angle_lowers_fidelity_by_the_right_amount():
    wrong = TEXTBOOK_QFT4.replace("cp(pi/8) q[3],q[0]", "cp(pi/16) q[3],q[0]")
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=4).evaluate(wrong)
    expected = reference_process_fidelity(
        qasm2.loads(wrong, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS), make_target("qft", 4).unitary()
    )
    assert result.process_fidelity < 0.995  # a pi/16 error on one small rotation
    assert result.process_fidelity == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(24))
def test_process_fidelity_matches_operator_on_random_circuits(seed):
    rng = np.random.default_rng(seed)
    n = 1 + seed % 6
    candidate = random_circuit(n, depth=6, max_operands=min(3, n), seed=seed)
    other = random_circuit(n, depth=3, max_operands=min(2, n), seed=1000 + seed)
    # Half the cases: target is a small perturbation of the candidate (fidelity near 1).
    if rng.random() < 0.5:
        other = candidate.copy()
        other.rz(float(rng.uniform(0, 0.5)), 0)
    target = Operator(other).data
    facts = CircuitFacts.from_circuit(candidate)
    ours = unitary_fidelity(facts.ops, n, target, max_qubits=12)
    reference = reference_process_fidelity(candidate, target)
    assert abs(ours.process_fidelity - reference) < 1e-9
    d = 2**n
    assert ours.average_fidelity == pytest.approx((d * reference + 1) / (d + 1), abs=1e-9)


def test_global_phase_is_ignored():
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    shifted = qc.copy()
    shifted.global_phase = 1.234
    shifted.rz(2 * math.pi, 1)  # = -I, another global phase
    target = Operator(qc).data
    assert unitary_fidelity(tuple(canonical_ops(shifted)), 2, target, 12).process_fidelity == pytest.approx(1.0)


def test_clean_ancilla_keeps_fidelity_one_dirty_ancilla_does_not():
    # Target: CZ on 2 qubits. Candidate: compute parity into an ancilla q[2], phase, uncompute.
    target = make_target("circuit", qasm='OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; cz q[0],q[1];')
    clean = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[3]; ccx q[0],q[1],q[2]; z q[2]; ccx q[0],q[1],q[2];'
    dirty = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[3]; ccx q[0],q[1],q[2]; z q[2];'
    ev = RubriQEvaluator(target=target)
    assert ev.evaluate(clean).process_fidelity == pytest.approx(1.0, abs=1e-12)
    # Dirty: ancilla ends in |1> for input |11>: the projected block loses that column.
    # V = diag(1, 1, 1, 0) -> |Tr(CZ^+ V)|^2 / 16 = |1 + 1 + 1 + 0|^2 / 16 = 9/16.
    assert ev.evaluate(dirty).process_fidelity == pytest.approx(9 / 16, abs=1e-12)


def test_narrower_circuit_acts_as_identity_on_missing_qubits():
    # Target: X on q[0] of 2 qubits = X (x) I. A 1-qubit circuit "x q[0]" implements it exactly.
    target = make_target("circuit", qasm='OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; x q[0];')
    result = RubriQEvaluator(target=target).evaluate('OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; x q[0];')
    assert result.process_fidelity == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(
    "name,params",
    [
        ("amplitude_encoding", {}),
        ("angle_encoding", {}),
        ("basis_encoding", {"value": 5}),
    ],
)
def test_state_targets_reference_circuits_match_statevector(name, params):
    target = make_target(name, 3, **params)
    ref = target.reference_circuit()
    psi = Statevector(ref).data
    assert abs(np.vdot(target.state(), psi)) ** 2 == pytest.approx(1.0, abs=1e-9)
    result = RubriQEvaluator(target=target).evaluate_circuit(ref)
    assert result.fidelity_kind == "state"
    assert result.process_fidelity == pytest.approx(1.0, abs=1e-9)


def test_state_fidelity_matches_statevector_for_a_wrong_circuit():
    target = make_target("angle_encoding", 2, data=[0.4, 1.1])
    qc = QuantumCircuit(2)
    qc.ry(0.5, 0)
    qc.ry(1.0, 1)
    expected = abs(np.vdot(target.state(), Statevector(qc).data)) ** 2
    ours = state_fidelity(tuple(canonical_ops(qc)), 2, target.state(), 24)
    assert ours.process_fidelity == pytest.approx(expected, abs=1e-12)
    assert ours.process_fidelity < 1


@pytest.mark.parametrize("params", [{"inverse": True}, {"do_swaps": False}, {"inverse": True, "do_swaps": False}])
def test_qft_variants_reference_is_exact(params):
    target = make_target("qft", 4, **params)
    assert reference_process_fidelity(target.reference_circuit(), target.unitary()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("phase", [0.125, 0.25, 0.375, 0.5, 0.75])
def test_qpe_reference_and_readout(phase):
    target = make_target("qpe", 4, phase=phase)
    assert reference_process_fidelity(target.reference_circuit(), target.unitary()) == pytest.approx(1.0, abs=1e-12)
    # With the eigenstate |1> on q[3], the counting register reads phase * 2^3.
    psi = target.unitary() @ np.eye(16)[8]
    assert abs(psi[8 + round(phase * 8)]) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("name", ["heisenberg", "tfim"])
def test_hamiltonian_targets_match_hamiltonian_gate(name):
    target = make_target(name, 3, t=0.7)
    exact = Operator(HamiltonianGate(target.hamiltonian().to_matrix(), 0.7)).data
    assert np.allclose(target.unitary(), exact, atol=1e-10)
    # The Trotterized reference is close but not exact (documented).
    f = reference_process_fidelity(target.reference_circuit(), target.unitary())
    assert 0.95 < f < 1.0


def test_circuit_above_exact_cap_gets_a_clear_reason():
    qc = QuantumCircuit(14)
    qc.h(range(14))
    target = make_target("qft", 4)
    with pytest.raises(SimulationTooLargeError, match="cap"):
        unitary_fidelity(tuple(canonical_ops(qc)), 14, target.unitary(), max_qubits=12)
    result = RubriQEvaluator(target=target).evaluate(qasm2.dumps(qc))
    assert result.reward == 0.0 and result.error_type == "simulation" and "ancillas" in result.error


def test_average_fidelity_is_the_textbook_formula_to_the_bit():
    """F_avg, defined once (rubriq/sim/measures.py) as (F + 1/d) / (1 + 1/d) so that it needs no
    float of d (Clifford targets of any width), is (d F + 1) / (d + 1) to the last bit: the
    numbers every backend wrote before are unchanged."""
    import random

    from rubriq.sim.measures import average_fidelity

    rng = random.Random(0)
    for n in range(0, 64):
        d = 2**n
        for f in [0.0, 1.0, 0.5, 1 - 2**-52] + [rng.random() for _ in range(200)]:
            assert average_fidelity(f, d) == (d * f + 1) / (d + 1), (n, f)
    assert average_fidelity(0.25, 2**3000) == 0.25  # no float of d: no OverflowError
