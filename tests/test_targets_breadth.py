"""The field's breadth of targets (issue #27): each family against Qiskit's own construction
(Operator or Statevector), a textbook solution scored F = 1 and a near miss not, the known
T-count of the reference, one-line parameter errors and the JSON spec round trip."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit.library import CCZGate, CHGate, CSGate, GraphStateGate, MCXGate, ZGate
from qiskit.quantum_info import Operator, Statevector

from rubriq.circuit.gates import canonical_ops
from rubriq.evaluator import RubriQEvaluator
from rubriq.sim.exact import unitary_fidelity
from rubriq.targets import TARGETS, TargetError, make_target, target_from_spec

HEADER = 'OPENQASM 2.0;\ninclude "qelib1.inc";\n'


def qasm(n: int, body: str) -> str:
    return f"```qasm\n{HEADER}qreg q[{n}];\n{body}\n```"


def same_unitary(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal up to a global phase."""
    d = a.shape[0]
    return abs(abs(np.vdot(a, b)) / d - 1) < 1e-9 and np.allclose(np.abs(a), np.abs(b), atol=1e-9)


def same_state(a: np.ndarray, b: np.ndarray) -> bool:
    return abs(abs(np.vdot(a, b)) - 1) < 1e-9


def reference_fidelity(target) -> float:
    """F_process of the target's reference circuit (ancillas, if any, projected on |0>)."""
    ref = target.reference_circuit()
    return unitary_fidelity(tuple(canonical_ops(ref)), ref.num_qubits, target.unitary(), 16).process_fidelity


def score(target, text: str):
    return RubriQEvaluator(target=target).evaluate(text)


# -- Clifford+T primitives --------------------------------------------------------------------
def qiskit_gate(n: int, gate, wires) -> np.ndarray:
    qc = QuantumCircuit(n)
    qc.append(gate, wires)
    return Operator(qc).data


def qiskit_peres(n: int, a: int, b: int, c: int) -> np.ndarray:
    qc = QuantumCircuit(n)
    qc.ccx(a, b, c)
    qc.cx(a, b)
    return Operator(qc).data


TOFFOLI_7T = """h q[2]; cx q[1],q[2]; tdg q[2]; cx q[0],q[2]; t q[2]; cx q[1],q[2]; tdg q[2]; cx q[0],q[2];
t q[1]; t q[2]; h q[2]; cx q[0],q[1]; t q[0]; tdg q[1]; cx q[0],q[1];"""

PRIMITIVE_CASES = [
    # name, params, Qiskit's unitary, textbook solution, near miss, known T-count
    (
        "toffoli",
        {},
        lambda: qiskit_gate(3, MCXGate(2), [0, 1, 2]),
        (3, TOFFOLI_7T),
        (3, TOFFOLI_7T.replace("t q[0];", "tdg q[0];")),
        7,
    ),
    (
        "toffoli",
        {"num_qubits": 4, "wires": [3, 1, 0]},
        lambda: qiskit_gate(4, MCXGate(2), [3, 1, 0]),
        (4, "ccx q[1],q[3],q[0];"),
        (4, "ccx q[1],q[0],q[3];"),
        7,
    ),
    (
        "ccz",
        {},
        lambda: qiskit_gate(3, CCZGate(), [0, 1, 2]),
        (3, "h q[1]; ccx q[0],q[2],q[1]; h q[1];"),
        (3, "h q[1]; ccx q[0],q[2],q[1];"),
        7,
    ),
    (
        "ccz",
        {"wires": [2, 0, 1]},
        lambda: qiskit_gate(3, CCZGate(), [0, 1, 2]),
        (3, "ccz q[1],q[2],q[0];"),
        (3, "cz q[1],q[2];"),
        7,
    ),
    (
        "cs",
        {},
        lambda: qiskit_gate(2, CSGate(), [0, 1]),
        (2, "t q[0]; t q[1]; cx q[0],q[1]; tdg q[1]; cx q[0],q[1];"),
        (2, "t q[0]; t q[1]; cx q[0],q[1]; t q[1]; cx q[0],q[1];"),
        3,
    ),
    (
        "ch",
        {},
        lambda: qiskit_gate(2, CHGate(), [0, 1]),
        (2, "ry(-pi/4) q[1]; cz q[0],q[1]; ry(pi/4) q[1];"),
        (2, "ry(-pi/4) q[1]; cx q[0],q[1]; ry(pi/4) q[1];"),
        2,
    ),
    ("ch", {"wires": [1, 0]}, lambda: qiskit_gate(2, CHGate(), [1, 0]), (2, "ch q[1],q[0];"), (2, "ch q[0],q[1];"), 2),
    (
        "peres",
        {},
        lambda: qiskit_peres(3, 0, 1, 2),
        (3, "ccx q[0],q[1],q[2]; cx q[0],q[1];"),
        (3, "cx q[0],q[1]; ccx q[0],q[1],q[2];"),
        7,
    ),
    (
        "peres",
        {"num_qubits": 4, "wires": [2, 3, 1]},
        lambda: qiskit_peres(4, 2, 3, 1),
        (4, "ccx q[2],q[3],q[1]; cx q[2],q[3];"),
        (4, "ccx q[2],q[3],q[1]; cx q[3],q[2];"),
        7,
    ),
    # one clean ancilla q[4]: compute the AND of q[0], q[1] into it, use it, uncompute
    (
        "mcx",
        {"num_qubits": 4},
        lambda: qiskit_gate(4, MCXGate(3), [0, 1, 2, 3]),
        (5, "ccx q[0],q[1],q[4]; ccx q[2],q[4],q[3]; ccx q[0],q[1],q[4];"),
        (5, "ccx q[0],q[1],q[4]; ccx q[2],q[4],q[3];"),
        8 * 3 - 9,
    ),
    (
        "mcx",
        {"num_qubits": 5},
        lambda: qiskit_gate(5, MCXGate(4), list(range(5))),
        (5, "c4x q[0],q[1],q[2],q[3],q[4];"),
        (5, "c4x q[0],q[1],q[2],q[4],q[3];"),
        8 * 4 - 9,
    ),
    (
        "mcz",
        {"num_qubits": 4},
        lambda: qiskit_gate(4, ZGate().control(3, annotated=False), [0, 1, 2, 3]),
        (4, "h q[0]; c3x q[1],q[2],q[3],q[0]; h q[0];"),
        (4, "h q[0]; c3x q[1],q[2],q[3],q[0];"),
        8 * 3 - 9,
    ),
    (
        "mcz",
        {"num_qubits": 5, "ancillas": 0},
        lambda: qiskit_gate(5, ZGate().control(4, annotated=False), list(range(5))),
        (5, "h q[4]; c4x q[0],q[1],q[2],q[3],q[4]; h q[4];"),
        (5, "c4x q[0],q[1],q[2],q[3],q[4];"),
        None,
    ),
]


def build(name: str, params: dict):
    params = dict(params)
    return make_target(name, params.pop("num_qubits", None), **params)


@pytest.mark.parametrize(("name", "params", "qiskit", "good", "bad", "t_count"), PRIMITIVE_CASES)
def test_primitive_against_qiskit_textbook_and_t_count(name, params, qiskit, good, bad, t_count):
    target = build(name, params)
    assert same_unitary(target.unitary(), qiskit())
    assert reference_fidelity(target) == pytest.approx(1.0, abs=1e-9)
    if t_count is not None:
        assert target.t0 == t_count
        assert target.known_t_count == t_count
    assert score(target, qasm(*good)).process_fidelity == pytest.approx(1.0, abs=1e-9)
    assert score(target, qasm(*bad)).process_fidelity < 0.99


def test_reference_t_counts_count_real_t_gates():
    """The known counts are T gates in the written reference, not the gate table's 7 per ccx."""
    for name in ("toffoli", "ccz", "cs", "ch", "peres"):
        target = make_target(name)
        names = {inst.operation.name for inst in target.reference_circuit().data}
        assert names <= {"h", "s", "sdg", "cx", "t", "tdg"}, (name, names)
        t_gates = sum(1 for inst in target.reference_circuit().data if inst.operation.name in ("t", "tdg"))
        assert t_gates == target.t0 == target.known_t_count


def test_mcx_without_ancilla_is_stated_and_not_clifford_t():
    target = make_target("mcx", 5, ancillas=0)
    compact = target.prompt("qasm2", "compact")[0]["content"]
    assert "no ancilla" in compact.lower() and "Clifford+T" not in compact
    assert target.reference_circuit().num_qubits == 5 and target.known_t_count is None
    with_one = make_target("mcx", 5)
    assert "ancilla q[5]" in with_one.prompt("qasm2", "compact")[0]["content"]
    assert with_one.reference_circuit().num_qubits == 6


# -- states -------------------------------------------------------------------------------------
def qiskit_ghz(n: int) -> np.ndarray:
    qc = QuantumCircuit(n)
    qc.h(0)
    qc.cx(0, range(1, n))
    return Statevector(qc).data


def qiskit_bell(which: str) -> np.ndarray:
    labels = {"phi+": ("00", "11", 1), "phi-": ("00", "11", -1), "psi+": ("01", "10", 1), "psi-": ("01", "10", -1)}
    a, b, sign = labels[which]
    return ((Statevector.from_label(a) + sign * Statevector.from_label(b)) / np.sqrt(2)).data


def qiskit_w(n: int) -> np.ndarray:
    labels = ["".join("1" if j == k else "0" for j in reversed(range(n))) for k in range(n)]
    return sum(Statevector.from_label(label).data for label in labels) / np.sqrt(n)


def qiskit_graph(n: int, edges) -> np.ndarray:
    adjacency = np.zeros((n, n), dtype=int)
    for i, j in edges:
        adjacency[i, j] = adjacency[j, i] = 1
    return Statevector(GraphStateGate(adjacency)).data


STATE_CASES = [
    (
        "ghz",
        {"num_qubits": 4},
        lambda: qiskit_ghz(4),
        (4, "h q[3]; cx q[3],q[0]; cx q[0],q[1]; cx q[0],q[2];"),
        (4, "h q[3]; cx q[3],q[0]; cx q[0],q[1];"),
    ),
    (
        "w_state",
        {"num_qubits": 3},
        lambda: qiskit_w(3),
        (3, "ry(1.9106332362490186) q[0]; ch q[0],q[1]; cx q[1],q[2]; cx q[0],q[1]; x q[0];"),
        (3, "ry(1.9106332362490186) q[0]; ch q[0],q[1]; cx q[1],q[2]; x q[0];"),
    ),
    ("bell", {}, lambda: qiskit_bell("phi+"), (2, "h q[0]; cx q[0],q[1];"), (2, "h q[0];")),
    (
        "bell",
        {"which": "phi-"},
        lambda: qiskit_bell("phi-"),
        (2, "h q[0]; z q[0]; cx q[0],q[1];"),
        (2, "h q[0]; cx q[0],q[1];"),
    ),
    (
        "bell",
        {"which": "psi+"},
        lambda: qiskit_bell("psi+"),
        (2, "h q[0]; x q[1]; cx q[0],q[1];"),
        (2, "h q[0]; x q[1]; cx q[0],q[1]; z q[1];"),
    ),
    (
        "bell",
        {"which": "psi-"},
        lambda: qiskit_bell("psi-"),
        (2, "h q[0]; x q[1]; cx q[0],q[1]; z q[0];"),
        (2, "h q[0]; x q[1]; cx q[0],q[1];"),
    ),
    (
        "graph_state",
        {"num_qubits": 4, "edges": [[0, 1], [1, 2], [2, 3], [3, 0]]},
        lambda: qiskit_graph(4, [(0, 1), (1, 2), (2, 3), (3, 0)]),
        (4, "h q[0]; h q[1]; h q[2]; h q[3]; cz q[0],q[1]; cz q[1],q[2]; cz q[2],q[3]; cz q[0],q[3];"),
        (4, "h q[0]; h q[1]; h q[2]; h q[3]; cz q[0],q[1]; cz q[1],q[2]; cz q[2],q[3];"),
    ),
]


@pytest.mark.parametrize(("name", "params", "qiskit", "good", "bad"), STATE_CASES)
def test_state_against_qiskit_and_textbook(name, params, qiskit, good, bad):
    target = build(name, params)
    assert same_state(target.state(), qiskit())
    assert same_state(Statevector(target.reference_circuit()).data, qiskit())
    assert score(target, qasm(*good)).process_fidelity == pytest.approx(1.0, abs=1e-9)
    assert score(target, qasm(*bad)).process_fidelity < 0.99


def test_stabilizer_state_references_are_clifford_and_w_is_not():
    for name, n in (("ghz", 5), ("bell", 2), ("graph_state", 5)):
        assert make_target(name, n).t0 == 0
        assert make_target(name, n).clifford() is not None
    assert make_target("w_state", 3).clifford() is None


# -- parameters and specs -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "n", "params", "message"),
    [
        ("toffoli", None, {"wires": [0, 0, 1]}, "wires must be 3 distinct qubits"),
        ("toffoli", 3, {"wires": [0, 1, 5]}, "wires must be 3 distinct qubits in [0, 3)"),
        ("cs", None, {"wires": "01"}, "wires must be 2 distinct"),
        ("mcx", 4, {"ancillas": 2}, "ancillas must be 0 or 1"),
        ("mcx", 3, {}, "num_qubits must lie in [4, 9]"),
        ("bell", None, {"which": "phi"}, "which must be one of"),
        ("bell", 3, {}, "num_qubits must lie in [2, 2]"),
        ("graph_state", 3, {"edges": [[0, 0]]}, "pair of distinct qubits"),
        ("graph_state", 3, {"edges": [[0, 3]]}, "pair of distinct qubits in [0, 3)"),
        ("ghz", 1, {}, "num_qubits must lie in [2, 1000]"),
    ],
)
def test_bad_parameters_fail_in_one_line(name, n, params, message):
    with pytest.raises(TargetError, match=re.escape(message)) as info:
        make_target(name, n, **params)
    assert "\n" not in str(info.value)


def test_symmetric_wires_have_one_spec():
    assert make_target("ccz", wires=[2, 0, 1]).spec() == make_target("ccz").spec()
    assert make_target("cs", wires=[1, 0]).spec() == make_target("cs").spec()
    assert make_target("toffoli", wires=[1, 0, 2]).spec() == make_target("toffoli").spec()
    assert make_target("ch", wires=[1, 0]).spec() != make_target("ch").spec()
    assert make_target("toffoli", wires=[0, 4, 2]).num_qubits == 5


def small_instance(name: str):
    cls = TARGETS[name]
    if name == "circuit":
        return make_target(name, qasm='OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; cx q[0],q[1];')
    n = cls.default_width({})
    return make_target(name, n if n is not None else max(cls.min_qubits, min(3, cls.max_qubits)))


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_target_round_trips_and_has_short_compact_prompt(name):
    target = small_instance(name)
    spec = json.loads(json.dumps(target.spec()))
    assert target_from_spec(spec).spec() == target.spec()
    for fmt in ("qasm2", "qasm3", "python"):
        full = target.prompt(fmt, "full")
        compact = target.prompt(fmt, "compact")
        assert full[0]["role"] == "system" and len(compact) == 1
        if name not in ("circuit", "amplitude_encoding", "qpe"):
            assert len(compact[0]["content"]) < 400, compact[0]["content"]


# -- datasets -------------------------------------------------------------------------------------
def test_breadth_rows_reference_scores_one_and_splits_are_by_target():
    from rubriq.data.catalog import BREADTH_FAMILIES
    from rubriq.data.prompts import PromptSpec, check_disjoint, family_summary, split_rows, synthesis_rows

    spec = PromptSpec(
        qft_sizes=(),
        qpe_sizes=(),
        hamiltonian_sizes=(),
        encoding_sizes=(),
        formats=("qasm2",),
        prompt_style="compact",
        breadth=BREADTH_FAMILIES,
        breadth_small=True,
    )
    rows = synthesis_rows(spec)
    assert {r["algorithm"] for r in rows} == set(BREADTH_FAMILIES)
    splits = split_rows(rows)
    check_disjoint(splits)
    summary = family_summary(splits)
    assert sum(v["rows"]["train"] for v in summary.values()) == len(splits["train"])
    for row in rows:
        assert len(row["prompt"]) == 1 and len(row["prompt"][0]["content"]) < 400
        target = target_from_spec(json.loads(row["target"]))
        if target.kind == "unitary" and not target.reference_is_exact and row["algorithm"] not in ("mcx", "mcz"):
            continue
        result = RubriQEvaluator(target=target).evaluate(row["reference"])
        assert result.process_fidelity == pytest.approx(1.0, abs=1e-9), row["id"]
