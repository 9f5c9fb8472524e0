"""Exact Clifford fidelity from stabilizer tableaux (rubriq/sim/clifford.py, issue #27), against
Qiskit's Operator / Statevector / Clifford as independent references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from qiskit import QuantumCircuit, qasm2
from qiskit.quantum_info import Clifford, Operator, Statevector, random_clifford

from rubriq.circuit.facts import CircuitFacts
from rubriq.circuit.gates import CLIFFORD_GATES, STANDARD_GATES, canonical_ops
from rubriq.config import FidelityConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.sim import compute_fidelity
from rubriq.sim.clifford import apply_codes, clifford_codes, clifford_fidelity, zero_overlap
from rubriq.sim.exact import state_fidelity, unitary_fidelity
from rubriq.targets import make_target


def tableau_of_codes(codes, n: int):
    """Rows G X_i G^dagger, G Z_i G^dagger by apply_codes, as Qiskit's (x, z, phase) tableau."""
    x = np.zeros((n, 2 * n), dtype=np.uint8)
    z = np.zeros((n, 2 * n), dtype=np.uint8)
    r = np.zeros(2 * n, dtype=np.int64)
    for i in range(n):
        x[i, i] = 1
        z[i, n + i] = 1
    apply_codes(x, z, r, codes)
    return x.T.astype(bool), z.T.astype(bool), r.astype(bool)


@pytest.mark.parametrize("name", sorted(CLIFFORD_GATES - {"id"}))
def test_every_table_clifford_gate_matches_qiskits_tableau(name):
    gate = STANDARD_GATES[name]
    qc = QuantumCircuit(gate.num_qubits)
    qc.append(gate, range(gate.num_qubits))
    codes = clifford_codes(canonical_ops(qc))
    x, z, r = tableau_of_codes(codes, gate.num_qubits)
    ref = Clifford(qc)
    assert (x == ref.x).all() and (z == ref.z).all() and (r == ref.phase).all()


@pytest.mark.parametrize("name", ["rz", "rx", "ry", "p"])
@pytest.mark.parametrize("k", [-3, -1, 1, 2, 3, 5])
def test_quarter_turn_rotations_are_the_right_cliffords(name, k):
    qc = QuantumCircuit(1)
    getattr(qc, name)(k * math.pi / 2, 0)
    codes = clifford_codes(canonical_ops(qc))
    x, z, r = tableau_of_codes(codes, 1)
    ref = Clifford(qc)
    assert (x == ref.x).all() and (z == ref.z).all() and (r == ref.phase).all()


def test_non_clifford_gates_are_refused():
    for body in ("t q[0];", "rz(0.3) q[0];", "ccx q[0],q[1],q[2];", "rz(pi/4) q[0];"):
        facts = CircuitFacts.from_qasm(f'OPENQASM 2.0; include "qelib1.inc"; qreg q[3]; {body}')
        assert clifford_codes(facts.ops) is None, body


def near_miss(clifford: Clifford, rng) -> QuantumCircuit:
    qc = clifford.to_circuit()
    gate = ["s", "h", "x", "z", "sdg", "y", "cx", "cz", "swap"][int(rng.integers(9 if qc.num_qubits > 1 else 6))]
    qubits = rng.choice(qc.num_qubits, size=2 if gate in ("cx", "cz", "swap") else 1, replace=False)
    getattr(qc, gate)(*[int(q) for q in qubits])
    return qc


def test_process_fidelity_equals_operator_up_to_8_qubits():
    """|tr(U^dagger V)|^2 / d^2 from tableaux against Qiskit's Operator: equal, one-gate-off and
    unrelated Cliffords, narrower candidates, and candidates with clean (or dirtied) ancillas."""
    rng = np.random.default_rng(27)
    seen = set()
    for trial in range(90):
        n = int(rng.integers(1, 9)) if trial < 60 else int(rng.integers(1, 5))
        target = make_target("random_clifford", n, seed=int(rng.integers(10**6)))
        kind = trial % 3
        if kind == 0:
            cand = target.reference_circuit()
        elif kind == 1:
            cand = near_miss(target.clifford(), rng)
        else:
            cand = random_clifford(n, seed=int(rng.integers(10**6))).to_circuit()
        if trial >= 60:  # ancillas: the candidate runs on n + a qubits
            a = int(rng.integers(1, 3))
            wide = QuantumCircuit(n + a)
            wide.compose(cand, range(n), inplace=True)
            if trial % 2:  # an ancilla round trip, or a leak into the ancilla
                wide.h(n)
                wide.cx(n, int(rng.integers(n)))
                if trial % 4 == 1:
                    wide.cx(n, int(rng.integers(n)))
                wide.h(n)
            cand = wide
        facts = CircuitFacts.from_circuit(cand)
        got = clifford_fidelity(facts, target)
        ref = unitary_fidelity(facts.ops, facts.num_qubits, Operator(target.clifford()).data, 12)
        assert got is not None and got.method == "clifford"
        assert got.process_fidelity == pytest.approx(ref.process_fidelity, abs=1e-9), (trial, n)
        assert got.average_fidelity == pytest.approx(ref.average_fidelity, abs=1e-9)
        assert (got.verdict == "equivalent") == (ref.process_fidelity > 1 - 1e-9)
        if got.process_fidelity > 0:
            assert math.log2(got.process_fidelity) == round(math.log2(got.process_fidelity))
        seen.add(round(got.process_fidelity, 6))
    assert {1.0, 0.0} <= seen and any(0 < f < 1 for f in seen)  # the cases are not all trivial


def test_narrower_candidate_acts_as_identity():
    target = make_target("clifford_tableau", 3)  # the identity tableau
    facts = CircuitFacts.from_qasm('OPENQASM 2.0; include "qelib1.inc"; qreg q[1]; s q[0];')
    got = clifford_fidelity(facts, target)
    assert got.process_fidelity == pytest.approx(0.5)  # |tr S|^2 / 4 = 2/4, times 1 on the idle qubits


def test_state_fidelity_equals_statevector():
    rng = np.random.default_rng(5)
    for trial in range(40):
        n = int(rng.integers(2, 7))
        target = make_target("stabilizer_state", n, stabilizers=random_clifford(n, seed=trial).to_dict()["stabilizer"])
        if trial % 3 == 0:
            cand = target.reference_circuit()
        elif trial % 3 == 1:
            cand = near_miss(target.clifford(), rng)
        else:
            cand = random_clifford(n, seed=1000 + trial).to_circuit()
        facts = CircuitFacts.from_circuit(cand)
        got = clifford_fidelity(facts, target)
        ref = abs(np.vdot(Statevector(target.reference_circuit()).data, Statevector(cand).data)) ** 2
        assert got.kind == "state" and got.process_fidelity == pytest.approx(ref, abs=1e-9)
        assert got.process_fidelity == pytest.approx(
            state_fidelity(facts.ops, n, target.state(), 12).process_fidelity, abs=1e-9
        )


def test_zero_overlap_doctest_cases_and_signs():
    qc = QuantumCircuit(2)
    qc.x(0)
    assert zero_overlap(Clifford(qc)) == 0.0
    qc = QuantumCircuit(3)
    qc.h([0, 1])
    qc.cz(0, 1)
    assert zero_overlap(Clifford(qc)) == 0.25


def test_hundred_qubit_clifford_correct_and_one_gate_off():
    """The showcase: a 100-qubit random Clifford (about 10^4 gates) scored exactly through the
    evaluator, far past the 24-qubit simulation ceiling (timings: benchmarks/bench_fidelity.py)."""
    target = make_target("random_clifford", 100, seed=27)
    evaluator = RubriQEvaluator(target=target)
    reference = target.reference_circuit()
    good = evaluator.evaluate(qasm2.dumps(reference))
    assert good.error_type is None and good.process_fidelity == 1.0
    assert good.fidelity_method == "clifford" and good.fidelity_verdict == "equivalent"
    for gate, qubits in (("s", (17,)), ("cz", (3, 98)), ("x", (50,))):
        off = reference.copy()
        getattr(off, gate)(*qubits)
        bad = evaluator.evaluate(qasm2.dumps(off))
        assert bad.error_type is None and bad.fidelity_verdict == "not_equivalent", gate
        assert bad.process_fidelity < 1.0
    dropped = reference.copy()
    dropped.data = [inst for i, inst in enumerate(reference.data) if i != len(reference.data) // 2]
    assert evaluator.evaluate(qasm2.dumps(dropped)).process_fidelity < 1.0


def test_wide_stabilizer_state_and_non_clifford_fallback():
    ghz = make_target("ghz", 200)
    body = "h q[0];" + "".join(f"cx q[{k}],q[{k + 1}];" for k in range(199))
    text = f'OPENQASM 2.0; include "qelib1.inc"; qreg q[200]; {body}'
    result = RubriQEvaluator(target=ghz).evaluate(text)
    assert result.process_fidelity == 1.0 and result.fidelity_method == "clifford"
    # a T gate makes the candidate non-Clifford: the tableau path declines, the simulation cap applies
    result = RubriQEvaluator(target=ghz).evaluate(text.replace("h q[0];", "h q[0]; t q[0]; tdg q[0];"))
    assert result.error_type == "simulation" and result.process_fidelity in (None, 0.0)
    small = make_target("ghz", 4)
    facts = CircuitFacts.from_qasm(
        'OPENQASM 2.0; include "qelib1.inc"; qreg q[4]; h q[0]; t q[0]; tdg q[0]; cx q[0],q[1]; cx q[1],q[2]; '
        "cx q[2],q[3];"
    )
    fallback = compute_fidelity(facts, small, FidelityConfig())
    assert fallback.method == "exact" and fallback.process_fidelity == pytest.approx(1.0)


def test_clifford_rewrite_target_is_checked_exactly():
    qc = random_clifford(40, seed=3).to_circuit()
    target = make_target("circuit", qasm=qasm2.dumps(qc))
    assert target.clifford() is not None
    cand = qc.copy()
    cand.z(0)
    cand.z(0)
    facts = CircuitFacts.from_circuit(cand)
    result = compute_fidelity(facts, target, FidelityConfig())
    assert result.method == "clifford" and result.verdict == "equivalent"
    cand.s(4)
    result = compute_fidelity(CircuitFacts.from_circuit(cand), target, FidelityConfig())
    assert result.verdict == "not_equivalent" and result.process_fidelity == 0.5
    t_circuit = QuantumCircuit(2)
    t_circuit.t(0)
    assert make_target("circuit", qasm=qasm2.dumps(t_circuit)).clifford() is None
