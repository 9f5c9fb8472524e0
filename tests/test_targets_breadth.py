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
from qiskit.quantum_info import Operator, Statevector, random_clifford

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
    if n is not None:
        return make_target(name, n)
    for width in range(max(cls.min_qubits, 3), cls.max_qubits + 1):  # some need an even width
        try:
            return make_target(name, width)
        except TargetError:
            continue
    raise AssertionError(f"no small instance of {name}")


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
        # minimal: an empty system message (no chat template's default) and no longer than compact
        minimal = target.prompt(fmt, "minimal")
        assert [m["role"] for m in minimal] == ["system", "user"] and minimal[0]["content"] == ""
        assert len(minimal[1]["content"]) <= len(compact[0]["content"]), (minimal, compact)


def test_minimal_rewrite_prompt_carries_the_circuit_and_is_recognised_by_its_rows():
    from rubriq.data.prompts import prompt_style_of_rows
    from rubriq.targets import make_target

    qasm = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nt q[0];\nt q[0];\ncx q[0],q[1];'
    target = make_target("circuit", qasm=qasm)
    user = target.prompt("qasm2", "minimal")[1]["content"]
    assert f"```qasm\n{qasm}\n```" in user and "fewer T gates" in user and "OpenQASM 2.0" in user
    compact = target.prompt("qasm2", "compact")[0]["content"]
    assert len(user) < 0.6 * len(compact)
    styles = {s: prompt_style_of_rows([{"prompt": target.prompt("qasm2", s)}]) for s in ("full", "compact", "minimal")}
    assert styles == {"full": "full", "compact": "compact", "minimal": "minimal"}
    with pytest.raises(ValueError, match="minimal"):
        target.prompt("qasm2", "tiny")


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


# -- oracles, arithmetic, QAOA, XY, Clifford ---------------------------------------------------------
def circuit_unitary(n: int, build) -> np.ndarray:
    qc = QuantumCircuit(n)
    build(qc)
    return Operator(qc).data


def bv_textbook(qc):  # secret 101 on q[2]q[1]q[0]: s_0 = s_2 = 1
    qc.h([0, 1, 2])
    qc.cx(0, 3)
    qc.cx(2, 3)
    qc.h([0, 1, 2])


def dj_qiskit(table: str):
    """Hadamards around Qiskit's MCX with one control state per input x where f(x) = 1."""
    n = (len(table) - 1).bit_length()

    def build(qc):
        qc.h(range(n))
        for x, bit in enumerate(table):
            if bit == "1":
                qc.append(MCXGate(n, ctrl_state=x), [*range(n), n])
        qc.h(range(n))

    return circuit_unitary(n + 1, build)


def grover_qiskit(n: int, marked: list[int], iterations: int) -> np.ndarray:
    """H^n, then Qiskit's grover_operator of a phase oracle built from controlled-Z gates."""
    from qiskit.circuit.library import grover_operator

    oracle = QuantumCircuit(n)
    for x in marked:  # phase -1 on |x>: Z on q[0] controlled by q[1..] in state x >> 1, q[0] flipped if x_0 = 0
        if not x & 1:
            oracle.x(0)
        oracle.append(ZGate().control(n - 1, ctrl_state=x >> 1, annotated=False), [*range(1, n), 0])
        if not x & 1:
            oracle.x(0)
    qc = QuantumCircuit(n)
    qc.h(range(n))
    for _ in range(iterations):
        qc.compose(grover_operator(oracle), inplace=True)
    return Operator(qc).data


def simon_textbook(qc):  # period 11: f(x) = x XOR (11 if x_0)
    qc.h([0, 1])
    qc.cx(0, 2)
    qc.cx(1, 3)
    qc.cx(0, 2)
    qc.cx(0, 3)
    qc.h([0, 1])


def qiskit_library(name: str, *args, **kwargs):
    import qiskit.circuit.library as lib

    return lambda: Operator(getattr(lib, name)(*args, **kwargs)).data


def constant_adder_matrix(n: int, c: int) -> np.ndarray:
    """Column x is Statevector.from_int(x + c): Qiskit's basis states, not our permutation helper."""
    return np.stack([Statevector.from_int((x + c) % 2**n, 2**n).data for x in range(2**n)], axis=1)


def comparator_qiskit(n: int, value: int, geq: bool = True):
    from qiskit.circuit.library import IntegerComparatorGate

    return lambda: Operator(IntegerComparatorGate(n, value, geq=geq)).data


def qaoa_qiskit(n: int, edges, gamma: float, beta: float) -> np.ndarray:
    from qiskit.circuit.library import qaoa_ansatz
    from qiskit.quantum_info import SparsePauliOp

    cost = SparsePauliOp.from_sparse_list([("ZZ", list(e), 1.0) for e in edges], num_qubits=n)
    ansatz = qaoa_ansatz(cost, reps=1, initial_state=QuantumCircuit(n))
    values = {p: (beta if p.name.startswith("β") else gamma) for p in ansatz.parameters}
    return Operator(ansatz.assign_parameters(values).decompose(reps=3)).data


def xy_qiskit(n: int, t: float) -> np.ndarray:
    from qiskit.circuit.library import HamiltonianGate
    from qiskit.quantum_info import SparsePauliOp

    h = SparsePauliOp.from_sparse_list([(p + p, [i, i + 1], 1.0) for i in range(n - 1) for p in "XY"], num_qubits=n)
    return Operator(HamiltonianGate(h.to_matrix(), t)).data


CZ_TABLEAU = {"destabilizer": ["+ZX", "+XZ"], "stabilizer": ["+IZ", "+ZI"]}

UNITARY_CASES = [
    # name, params, Qiskit's unitary, textbook solution, near miss
    (
        "bernstein_vazirani",
        {"num_qubits": 4, "secret": "101"},
        lambda: circuit_unitary(4, bv_textbook),
        (4, "h q[0]; h q[1]; h q[2]; cx q[0],q[3]; cx q[2],q[3]; h q[0]; h q[1]; h q[2];"),
        (4, "h q[0]; h q[1]; h q[2]; cx q[0],q[3]; cx q[1],q[3]; h q[0]; h q[1]; h q[2];"),
    ),
    (
        "bernstein_vazirani",
        {"num_qubits": 4, "secret": 5},
        lambda: circuit_unitary(4, bv_textbook),
        (4, "h q[3]; cx q[3],q[0]; cx q[3],q[2]; h q[3];"),
        (4, "h q[3]; cx q[3],q[0]; h q[3];"),
    ),
    (
        "deutsch_jozsa",
        {"num_qubits": 3, "truth_table": "0110"},
        lambda: dj_qiskit("0110"),
        (3, "h q[0]; h q[1]; cx q[0],q[2]; cx q[1],q[2]; h q[0]; h q[1];"),
        (3, "h q[0]; h q[1]; cx q[0],q[2]; h q[0]; h q[1];"),
    ),
    (
        "deutsch_jozsa",
        {"num_qubits": 3, "truth_table": [1, 1, 1, 1]},
        lambda: dj_qiskit("1111"),
        (3, "x q[2];"),
        (3, "z q[2];"),
    ),
    ("deutsch_jozsa", {"num_qubits": 4, "seed": 3}, None, None, None),
    (
        "grover",
        {"num_qubits": 2, "marked": [3], "iterations": 1},
        lambda: grover_qiskit(2, [3], 1),
        (
            2,
            "h q[0]; h q[1]; cz q[0],q[1]; h q[0]; h q[1]; x q[0]; x q[1]; cz q[0],q[1]; x q[0]; x q[1]; h q[0]; h q[1];",
        ),
        (2, "h q[0]; h q[1]; cz q[0],q[1]; h q[0]; h q[1]; cz q[0],q[1]; h q[0]; h q[1];"),
    ),
    ("grover", {"num_qubits": 3, "marked": [2, 5]}, lambda: grover_qiskit(3, [2, 5], 1), None, None),
    (
        "simon",
        {"num_qubits": 4, "secret": "11"},
        lambda: circuit_unitary(4, simon_textbook),
        (4, "h q[0]; h q[1]; cx q[1],q[3]; cx q[0],q[3]; h q[0]; h q[1];"),
        (4, "h q[0]; h q[1]; cx q[0],q[2]; cx q[1],q[3]; h q[0]; h q[1];"),
    ),
    (
        "cuccaro_adder",
        {"num_qubits": 4},
        qiskit_library("FullAdderGate", 1),
        (4, "ccx q[1],q[2],q[3]; cx q[1],q[2]; ccx q[0],q[2],q[3]; cx q[0],q[2];"),
        (4, "ccx q[1],q[2],q[3]; cx q[1],q[2]; ccx q[0],q[2],q[3];"),
    ),
    ("cuccaro_adder", {"num_qubits": 8}, qiskit_library("FullAdderGate", 3), None, None),
    (
        "draper_adder",
        {"num_qubits": 2},
        qiskit_library("ModularAdderGate", 1),
        (2, "cx q[0],q[1];"),
        (2, "cx q[1],q[0];"),
    ),
    ("draper_adder", {"num_qubits": 6}, qiskit_library("ModularAdderGate", 3), None, None),
    (
        "constant_adder",
        {"num_qubits": 2, "constant": 1},
        lambda: constant_adder_matrix(2, 1),
        (2, "cx q[0],q[1]; x q[0];"),
        (2, "x q[0]; cx q[0],q[1];"),
    ),
    ("constant_adder", {"num_qubits": 4, "constant": 11}, lambda: constant_adder_matrix(4, 11), None, None),
    ("comparator", {"num_qubits": 3, "value": 2}, comparator_qiskit(2, 2), (3, "cx q[1],q[2];"), (3, "cx q[0],q[2];")),
    ("comparator", {"num_qubits": 5, "value": 11, "geq": False}, comparator_qiskit(4, 11, False), None, None),
    (
        "qaoa",
        {"num_qubits": 2, "edges": [[0, 1]]},
        lambda: qaoa_qiskit(2, [(0, 1)], 0.4, 0.3),
        (2, "rzz(0.8) q[0],q[1]; rx(0.6) q[0]; rx(0.6) q[1];"),
        (2, "rzz(0.4) q[0],q[1]; rx(0.6) q[0]; rx(0.6) q[1];"),
    ),
    (
        "qaoa",
        {"num_qubits": 4, "gamma": 1.1, "beta": -0.7},
        lambda: qaoa_qiskit(4, [(0, 1), (1, 2), (2, 3), (0, 3)], 1.1, -0.7),
        None,
        None,
    ),
    (
        "xy",
        {"num_qubits": 2, "t": 0.5},
        lambda: xy_qiskit(2, 0.5),
        (2, "rxx(1.0) q[0],q[1]; ryy(1.0) q[0],q[1];"),
        (2, "rxx(1.0) q[0],q[1];"),
    ),
    ("xy", {"num_qubits": 4, "t": 0.25}, lambda: xy_qiskit(4, 0.25), None, None),
    ("random_clifford", {"num_qubits": 3, "seed": 5}, lambda: Operator(random_clifford(3, seed=5)).data, None, None),
    (
        "clifford_tableau",
        {"num_qubits": 2, **CZ_TABLEAU},
        lambda: circuit_unitary(2, lambda qc: qc.cz(0, 1)),
        (2, "h q[1]; cx q[0],q[1]; h q[1];"),
        (2, "cx q[0],q[1];"),
    ),
]


@pytest.mark.parametrize(("name", "params", "qiskit", "good", "bad"), UNITARY_CASES)
def test_unitary_family_against_qiskit_and_textbook(name, params, qiskit, good, bad):
    target = build(name, params)
    if qiskit is not None:
        assert same_unitary(target.unitary(), qiskit())
    if target.reference_is_exact:
        assert reference_fidelity(target) == pytest.approx(1.0, abs=1e-9)
    else:  # Trotterized reference: close, not equal
        assert 0.9 < reference_fidelity(target) < 1.0
    if good is not None:
        assert score(target, qasm(*good)).process_fidelity == pytest.approx(1.0, abs=1e-9)
        assert score(target, qasm(*bad)).process_fidelity < 0.99


def test_random_clifford_textbook_and_stabilizer_state():
    from qiskit.synthesis import synth_clifford_greedy

    target = make_target("random_clifford", 3, seed=5)
    other = synth_clifford_greedy(random_clifford(3, seed=5))  # a different circuit for the same Clifford
    good = score(target, f"```qasm\n{qasm2_dumps(other)}\n```")
    assert good.process_fidelity == 1.0 and good.fidelity_method == "clifford"
    other.s(1)
    assert score(target, f"```qasm\n{qasm2_dumps(other)}\n```").process_fidelity == 0.5
    bell = make_target("stabilizer_state", 2, stabilizers=["+XX", "+ZZ"])
    assert same_state(bell.state(), qiskit_bell("phi+"))
    assert score(bell, qasm(2, "h q[0]; cx q[0],q[1];")).process_fidelity == 1.0
    assert score(bell, qasm(2, "h q[0]; cx q[0],q[1]; z q[0];")).process_fidelity == 0.0


def qasm2_dumps(circuit) -> str:
    from qiskit import qasm2

    return qasm2.dumps(circuit)


def test_clifford_families_have_t_count_zero():
    for target in (
        make_target("bernstein_vazirani", 6),
        make_target("simon", 6),
        make_target("random_clifford", 5, seed=1),
        make_target("clifford_tableau", 2, **CZ_TABLEAU),
        make_target("stabilizer_state", 4),
    ):
        assert target.t0 == 0 and target.clifford() is not None


@pytest.mark.parametrize(
    ("name", "n", "params", "message"),
    [
        ("bernstein_vazirani", 4, {"secret": "10"}, "secret must be a string of 3 bits"),
        ("deutsch_jozsa", 3, {"truth_table": "0111"}, "f must be constant or balanced"),
        ("grover", 2, {"marked": [4]}, "marked must be 1 to 3 distinct integers in [0, 4)"),
        ("grover", 2, {"iterations": 0}, "iterations must be an integer in [1, 64]"),
        ("simon", 5, {}, "num_qubits must be even"),
        ("simon", 4, {"secret": "00"}, "the period s must not be 0"),
        ("cuccaro_adder", 5, {}, "num_qubits must be 2n + 2"),
        ("constant_adder", 3, {"constant": 8}, "constant must be an integer in [0, 8)"),
        ("comparator", 3, {"geq": "yes"}, "geq must be true or false"),
        ("qaoa", 3, {"gamma": "x"}, "gamma must be a finite number"),
        ("clifford_tableau", 2, {"stabilizer": ["+XX", "+XX"]}, "not a Clifford tableau"),
        ("clifford_tableau", 2, {"stabilizer": ["+XQ", "+ZZ"]}, "must be a sign and 2 letters"),
        ("stabilizer_state", 2, {"stabilizers": ["+XI", "+ZI"]}, "not a stabilizer group"),
        ("random_clifford", 2, {"seed": -1}, "seed must be a non-negative integer"),
    ],
)
def test_more_bad_parameters_fail_in_one_line(name, n, params, message):
    with pytest.raises(TargetError, match=re.escape(message)) as info:
        make_target(name, n, **params)
    assert "\n" not in str(info.value)


def test_docs_table_lists_every_registered_target():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "targets.md").read_text(encoding="utf-8")
    rows = {
        name
        for line in text.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`(\w+)`", line.split("|")[1])
    }
    assert set(TARGETS) <= rows, sorted(set(TARGETS) - rows)
    assert "Thirty-two target families" in text and len(TARGETS) == 32


def test_adding_families_moves_no_other_target_between_splits():
    from rubriq.data.prompts import PromptSpec, split_rows, synthesis_rows

    def where(spec):
        splits = split_rows(synthesis_rows(spec))
        return {r["target"]: name for name, rows in splits.items() for r in rows}

    base = dict(qft_sizes=(2, 3, 4, 5, 6, 7, 8), qpe_sizes=(3, 4), formats=("qasm2",), prompt_style="compact")
    paper = where(PromptSpec(**base))
    some = where(PromptSpec(**base, breadth=("toffoli", "peres")))
    more = where(PromptSpec(**base, breadth=("toffoli", "ghz", "peres", "cs")))
    assert {k: v for k, v in some.items() if k in paper} == paper
    assert {k: v for k, v in more.items() if k in some} == some
    assert len(more) > len(some) > len(paper)
