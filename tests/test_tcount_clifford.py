"""T-count and Clifford fraction against hand-derived and published counts."""

import csv
import math

import pytest
from qiskit import QuantumCircuit
from qiskit.circuit import Gate

from rubriq.circuit.facts import CircuitFacts
from rubriq.circuit.gates import Op, canonical_ops
from rubriq.circuit.tcount import gate_t_cost, rotation_t_cost, t_count
from rubriq.config import TCountConfig
from rubriq.extract.qasm import QASMLimits, load_qasm
from rubriq.rubric import clifford, tcount
from rubriq.rubric.base import ScoringContext
from tests.conftest import qasm2


def tc(body: str, n: int = 3) -> int:
    return CircuitFacts.from_qasm(qasm2(body, n)).ops and t_count(CircuitFacts.from_qasm(qasm2(body, n)).ops)


@pytest.mark.parametrize(
    "body,expected",
    [
        ("ccx q[0],q[1],q[2];", 7),
        ("cswap q[0],q[1],q[2];", 7),
        ("rz(pi/4) q[0];", 1),
        ("rz(-3*pi/4) q[0];", 1),
        ("rz(pi/2) q[0];", 0),
        ("rz(0) q[0];", 0),
        ("rx(pi) q[0];", 0),
        ("rz(0.3) q[0];", 102),
        ("t q[0]; tdg q[1];", 2),
        ("h q[0]; s q[0]; cx q[0],q[1]; swap q[1],q[2];", 0),
        ("cp(pi/2) q[0],q[1];", 3),  # = p(pi/4) cx p(-pi/4) cx p(pi/4)
        ("u3(pi/2,0,pi) q[0];", 0),  # = H up to phase
        ("u3(0.3,pi/4,pi/2) q[0];", 103),  # rz(pi/2) ry(0.3) rz(pi/4)
        ("crz(pi/2) q[0],q[1];", 2),  # rz(pi/4) cx rz(-pi/4) cx
    ],
)
def test_t_count_per_gate(body, expected):
    assert tc(body) == expected


def test_ccz_counts_seven():
    qc = QuantumCircuit(3)
    qc.ccz(0, 1, 2)
    assert t_count(canonical_ops(qc)) == 7


def test_arbitrary_rotation_cost_follows_formula_not_paper_text():
    # 3 * ceil(log2(1/eps)): the paper's "~50" is inconsistent with its own eps = 1e-10.
    assert rotation_t_cost(1e-10) == 3 * 34 == 102
    assert rotation_t_cost(1e-5) == 3 * 17
    assert gate_t_cost(Op("rz", (0,), (0.3,)), TCountConfig(epsilon=1e-3)) == 30


def test_angle_tolerance_is_1e8():
    assert gate_t_cost(Op("rz", (0,), (math.pi / 2 + 5e-9,))) == 0
    assert gate_t_cost(Op("rz", (0,), (math.pi / 2 + 1e-6,))) == 102


def test_custom_gate_named_t_is_judged_by_its_body():
    body = QuantumCircuit(1)
    body.rz(0.3, 0)
    fake_t = Gate("t", 1, [])
    fake_t.definition = body
    qc = QuantumCircuit(1)
    qc.append(fake_t, [0])
    assert t_count(canonical_ops(qc)) == 102


def test_score_is_exp_minus_alpha_t():
    facts = CircuitFacts.from_qasm(qasm2("ccx q[0],q[1],q[2]; t q[0];", 3))
    result = tcount.score(facts, ScoringContext())
    assert result.details["t_count"] == 8
    assert result.value == pytest.approx(math.exp(-0.05 * 8), abs=1e-15)


def test_clifford_fraction_hand_count():
    # canonical gates: h, cx, t, rz(pi/2), rz(0.3) -> Clifford: h, cx, rz(pi/2)
    facts = CircuitFacts.from_qasm(qasm2("h q[0]; cx q[0],q[1]; t q[1]; rz(pi/2) q[0]; rz(0.3) q[2];", 3))
    result = clifford.score(facts, ScoringContext())
    assert (result.details["clifford_gates"], result.details["total_gates"]) == (3, 5)
    assert result.value == pytest.approx(0.6)


def test_measurements_and_barriers_do_not_count():
    facts = CircuitFacts.from_qasm(
        'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; creg c[2]; h q[0]; barrier q; '
        "measure q[0] -> c[0]; reset q[1]; t q[1];"
    )
    assert [op.name for op in facts.ops] == ["h", "t"]
    assert facts.num_gates == 2


def test_published_t0_of_the_classic_suite(tcount_suite):
    """Our T-count equals the published T0 (7 per Toffoli) on all 35 suite circuits."""
    from rubriq.suites import PUBLISHED_TCOUNTS

    rows = {r["circuit"]: int(r["T0"]) for r in csv.DictReader(open(PUBLISHED_TCOUNTS, encoding="utf-8"))}
    files = sorted(tcount_suite.glob("*.qasm"))
    assert len(files) == 35
    limits = QASMLimits(max_bytes=10**7, max_qubits=128)
    for path in files:
        circuit = load_qasm(path.read_text(), limits)
        assert t_count(canonical_ops(circuit, max_gates=10**7)) == rows[path.stem], path.stem


# -- S_T relative to a rewrite's input (tcount.mode: relative) ----------------------------------
REWRITE_INPUT = (
    'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\n'
    "t q[0];\nh q[1];\nt q[0];\ncx q[0],q[1];\nt q[1];\ntdg q[0];\nh q[0];\nt q[0];\n"
)  # T0 = 5: t t on q[0] merge to s (-2), and the next tdg q[0] ... t q[0] are separated by h


@pytest.mark.parametrize(
    ("candidate_t", "t_best", "expected"),
    [
        (5, 1, 0.0),  # a copy: no T credit
        (6, 1, 0.0),  # more T than the input: clipped at 0
        (3, 1, 0.5),  # half the gap to the optimum: (5 - 3) / (5 - 1)
        (1, 1, 1.0),  # the recorded optimum
        (0, 1, 1.0),  # beyond it: clipped at 1
        (4, 0, 0.2),  # no recorded optimum given: full credit at T = 0 only, (5 - 4) / 5
    ],
)
def test_relative_t_score_is_the_fraction_of_the_gap_closed(candidate_t, t_best, expected):
    assert tcount.relative_score(candidate_t, 5, t_best) == pytest.approx(expected)


def test_relative_t_score_when_nothing_can_be_removed():
    # T0 <= T_best: nothing to gain; keeping T at most T0 is full credit, adding T is none
    assert tcount.relative_score(3, 3, 3) == 1.0 and tcount.relative_score(4, 3, 3) == 0.0


def test_relative_mode_scores_a_rewrite_against_its_input_through_the_evaluator():
    from rubriq.config import RubricConfig
    from rubriq.evaluator import RubriQEvaluator

    relative = RubricConfig.from_dict({"tcount": {"mode": "relative"}})
    evaluator = RubriQEvaluator(target_algorithm="circuit", qasm=REWRITE_INPUT, t_best=1, config=relative)
    assert evaluator.target.t0 == 5
    reduced = REWRITE_INPUT.replace("t q[0];\nh q[1];\nt q[0];\n", "h q[1];\ns q[0];\n")
    copy, better = evaluator.evaluate(REWRITE_INPUT), evaluator.evaluate(reduced)
    assert copy.t_count == 5 and better.t_count == 3 and better.process_fidelity == pytest.approx(1.0)
    assert copy.scores["tcount"] == 0.0 and better.scores["tcount"] == pytest.approx(0.5)
    # the paper's absolute S_T pays the same reduction exp(-0.15) - exp(-0.25): 0.082
    absolute = RubriQEvaluator(target_algorithm="circuit", qasm=REWRITE_INPUT, t_best=1)
    gain = absolute.evaluate(reduced).scores["tcount"] - absolute.evaluate(REWRITE_INPUT).scores["tcount"]
    assert gain == pytest.approx(math.exp(-0.15) - math.exp(-0.25))
    # a synthesis target keeps the absolute score in the relative mode
    qft = RubriQEvaluator(target_algorithm="qft", num_qubits=2, config=relative)
    text = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[1];\ncp(pi/2) q[0],q[1];\nh q[0];\nswap q[0],q[1];\n'
    result = qft.evaluate(text)
    assert result.scores["tcount"] == pytest.approx(math.exp(-0.05 * result.t_count))


def test_bad_t_best_and_mode_are_clear_errors():
    from rubriq.config import ConfigError, RubricConfig
    from rubriq.targets import TargetError, make_target

    with pytest.raises(TargetError, match="t_best"):
        make_target("circuit", qasm=REWRITE_INPUT, t_best=-1)
    with pytest.raises(TargetError, match="exceeds"):
        make_target("circuit", qasm=REWRITE_INPUT, t_best=9)
    with pytest.raises(ConfigError, match="mode"):
        RubricConfig.from_dict({"tcount": {"mode": "ratio"}})
