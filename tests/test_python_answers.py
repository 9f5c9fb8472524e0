"""Qiskit Python as models and people write it (issue #29): the rules that find the circuit
(docs/extraction.md), code around the circuit (simulation, fake backends, drawings), and what is
refused as ``unsupported`` with its reason.  Every circuit found is compared with the circuit the
same lines build, by Operator, and scored like it."""

from __future__ import annotations

import os

import pytest
from qiskit import QuantumCircuit
from qiskit.quantum_info import Operator

from rubriq.config import BudgetConfig, ExtractionConfig, RubricConfig
from rubriq.evaluator import RubriQEvaluator
from rubriq.extract.sandbox.harness import choose_function

TIME_SCALE = float(os.environ.get("RUBRIQ_TEST_TIME_SCALE", "1"))
CONFIG = RubricConfig(
    extraction=ExtractionConfig(python_timeout_s=60.0 * TIME_SCALE), budget=BudgetConfig(time_s=120.0 * TIME_SCALE)
)
HEAD = "from qiskit import QuantumCircuit\n"
BELL = "    qc = QuantumCircuit(2)\n    qc.h(0)\n    qc.cx(0, 1)\n"


def bell() -> QuantumCircuit:
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    return qc


@pytest.fixture(scope="module")
def evaluator() -> RubriQEvaluator:
    return RubriQEvaluator(target_algorithm="qft", num_qubits=2, config=CONFIG, cache_size=0)


def _fenced(code: str) -> str:
    return "```python\n" + code + "```\n"


def _found(evaluator, code: str, rule: str, expected: QuantumCircuit):
    result = evaluator.evaluate(_fenced(code))
    assert result.error is None, result.error
    assert result.strategy_detail and result.strategy_detail.startswith(rule + ":"), result.strategy_detail
    assert Operator(result.circuit).equiv(Operator(expected))
    return result


def test_rule_1_a_module_level_circuit(evaluator):
    code = HEAD + "helper = QuantumCircuit(1)\nqc = QuantumCircuit(2)\nqc.h(0)\nqc.cx(0, 1)\n"
    result = _found(evaluator, code, "module_circuit", bell())
    assert "'qc'" in result.strategy_detail


def test_rule_2_a_function_that_is_never_called(evaluator):
    result = _found(evaluator, HEAD + "def create_bell():\n" + BELL + "    return qc\n", "zero_arg_function", bell())
    assert "create_bell()" in result.strategy_detail and "the only module-level function" in result.strategy_detail


def test_rule_2_prefers_a_builder_name_then_the_last_defined(evaluator):
    one_x = "    qc = QuantumCircuit(2)\n    qc.x(0)\n    return qc\n"
    code = HEAD + "def helper():\n" + one_x + "def build_bell():\n" + BELL + "    return qc\ndef later():\n" + one_x
    result = _found(evaluator, code, "zero_arg_function", bell())
    assert "build_bell()" in result.strategy_detail and "named like a builder" in result.strategy_detail
    code = HEAD + "def make_x():\n" + one_x + "def make_bell():\n" + BELL + "    return qc\n"
    result = _found(evaluator, code, "zero_arg_function", bell())
    assert "make_bell()" in result.strategy_detail and "the last defined" in result.strategy_detail


def test_the_candidate_rule_on_plain_functions():
    """choose_function is what the sandbox child applies (pure Python, no circuit involved)."""
    ns: dict = {}
    exec(  # trusted test code: function definitions only
        compile("def a():\n    pass\ndef b(x):\n    pass\ndef c(y=1):\n    pass\n", "<completion>", "exec"), ns
    )
    name, _, why = choose_function(ns)
    assert name == "c" and "the last defined" in why and "also: a" in why
    ns2: dict = {}
    exec(compile("def main():\n    pass\ndef z():\n    pass\n", "<completion>", "exec"), ns2)
    assert choose_function(ns2)[0] == "main"
    ns3: dict = {}
    exec(compile("def needs(a, b):\n    pass\n", "<completion>", "exec"), ns3)
    assert choose_function(ns3) is None


def test_rule_2_does_not_call_a_function_twice(evaluator):
    """The code printed what build() returned; calling it again would give another circuit (its
    width counts the calls): the circuit the code already got is the one found."""
    code = (
        HEAD + "calls = [0]\ndef build():\n    calls[0] += 1\n    qc = QuantumCircuit(calls[0] + 1)\n"
        "    qc.h(0)\n    qc.cx(0, 1)\n    return qc\nprint(build())\n"
    )
    result = _found(evaluator, code, "zero_arg_function", bell())
    assert "when the code called it" in result.strategy_detail


def test_rule_3_a_circuit_only_printed(evaluator):
    code = (
        HEAD + "def bell(n):\n    qc = QuantumCircuit(n)\n    qc.h(0)\n    qc.cx(0, 1)\n    return qc\nprint(bell(2))\n"
    )
    _found(evaluator, code, "last_built", bell())


def test_rule_3_takes_the_built_circuit_not_its_transpiled_copy(evaluator):
    """Transpiled for a basis without H, the copy would have other gates (and other scores)."""
    code = (
        HEAD
        + "from qiskit import transpile\nfrom qiskit_aer import AerSimulator\ndef run(shots):\n"
        + BELL
        + "    qc.measure_all()\n    native = transpile(qc, basis_gates=['rz', 'sx', 'cx'], optimization_level=1)\n"
        "    counts = AerSimulator().run(native, shots=shots).result().get_counts()\n    print(counts)\nrun(100)\n"
    )
    result = _found(evaluator, code, "last_built", bell())
    assert result.gate_counts == {"h": 1, "cx": 1}


def test_code_around_the_circuit_runs_or_is_harmless(evaluator):
    """Statevector, an Aer simulation, text and mpl drawings (saved to a file), a histogram:
    the module-level circuit is found and scored like the plain one."""
    plain = evaluator.evaluate(_fenced(HEAD + "qc = QuantumCircuit(2)\nqc.h(0)\nqc.cx(0, 1)\n"))
    code = (
        HEAD + "from qiskit.quantum_info import Statevector\nfrom qiskit.visualization import plot_histogram\n"
        "from qiskit_aer import AerSimulator\nqc = QuantumCircuit(2)\nqc.h(0)\nqc.cx(0, 1)\n"
        "print(Statevector(qc))\nprint(qc.draw())\nqc.draw('mpl').savefig('bell.png')\n"
        "measured = qc.measure_all(inplace=False)\ncounts = AerSimulator().run(measured, shots=256).result().get_counts()\n"
        "plot_histogram(counts).savefig('counts.png')\nprint(counts)\n"
    )
    result = _found(evaluator, code, "module_circuit", bell())
    assert result.reward == plain.reward and result.scores == plain.scores


def test_transpiling_against_a_fake_backend_is_pure_computation(evaluator):
    """The function returns a circuit transpiled for FakeManilaV2 (5 qubits): found by rule 2,
    on the backend's qubits, equal to the Bell pair on the qubits it uses."""
    code = (
        HEAD + "from qiskit_ibm_runtime.fake_provider import FakeManilaV2\n"
        "from qiskit.transpiler import generate_preset_pass_manager\n"
        "def transpile_bell():\n" + BELL + "    backend = FakeManilaV2()\n"
        "    return generate_preset_pass_manager(optimization_level=1, backend=backend, initial_layout=[0, 1]).run(qc)\n"
    )
    result = RubriQEvaluator(target_algorithm="qft", num_qubits=5, config=CONFIG, cache_size=0).evaluate(_fenced(code))
    assert result.error is None, result.error
    assert result.strategy_detail.startswith("zero_arg_function:") and result.num_qubits == 5
    wide = QuantumCircuit(5)
    wide.compose(bell(), [0, 1], inplace=True)
    assert Operator(result.circuit).equiv(Operator(wide))


@pytest.mark.parametrize(
    "body,reason",
    [
        (
            "from qiskit.circuit import Parameter\ndef f():\n    theta = Parameter('theta')\n"
            "    qc = QuantumCircuit(1)\n    qc.rx(theta, 0)\n    return qc\n",
            "circuit has unbound parameters: theta",
        ),
        (
            "def f():\n    qc = QuantumCircuit(2, 1)\n    qc.h(0)\n    qc.measure(0, 0)\n"
            "    with qc.if_test((qc.clbits[0], 1)):\n        qc.x(1)\n    return qc\n",
            "dynamic circuits are not scored: the circuit uses if_else",
        ),
        (
            "qc = QuantumCircuit(2, 1)\nqc.h(0)\nqc.measure(0, 0)\nwith qc.while_loop((qc.clbits[0], 1)):\n"
            "    qc.h(0)\n    qc.measure(0, 0)\n",
            "the circuit uses while_loop",
        ),
    ],
    ids=["parameter", "if_else", "while_loop"],
)
def test_circuits_without_a_fixed_unitary_are_unsupported_with_the_reason(evaluator, body, reason):
    result = evaluator.evaluate(_fenced(HEAD + body))
    assert result.error_type == "unsupported" and result.reward == 0.0, result.to_dict()
    assert reason in result.error


def test_a_for_loop_is_unrolled(evaluator):
    code = HEAD + "qc = QuantumCircuit(2)\nwith qc.for_loop(range(3)):\n    qc.h(0)\nqc.cx(0, 1)\n"
    expected = QuantumCircuit(2)
    for _ in range(3):
        expected.h(0)
    expected.cx(0, 1)
    result = _found(evaluator, code, "module_circuit", expected)
    assert result.gate_counts == {"h": 3, "cx": 1}


def test_a_returned_transpiled_circuit_is_read_with_its_layout(evaluator):
    """``pass_manager.run(qc)`` onto a line of 4 qubits with a permuted initial layout: the gates
    alone are another unitary; read with the layout (as Operator.from_circuit reads it), the
    circuit found is the logical one on qubits 0-2, identity on the ancilla."""
    from qiskit import transpile
    from qiskit.transpiler import CouplingMap

    logical = QuantumCircuit(3)
    logical.h(0)
    logical.cx(0, 2)
    logical.t(1)
    logical.cx(2, 1)
    logical.cx(0, 1)
    code = (
        HEAD + "from qiskit import transpile\nfrom qiskit.transpiler import CouplingMap\n"
        "def build_routed():\n    qc = QuantumCircuit(3)\n    qc.h(0)\n    qc.cx(0, 2)\n    qc.t(1)\n"
        "    qc.cx(2, 1)\n    qc.cx(0, 1)\n    return transpile(qc, coupling_map=CouplingMap.from_line(4), "
        "initial_layout=[3, 1, 0], basis_gates=['h', 'cx', 't', 'swap'], seed_transpiler=7)\n"
    )
    raw = transpile(
        logical,
        coupling_map=CouplingMap.from_line(4),
        initial_layout=[3, 1, 0],
        basis_gates=["h", "cx", "t", "swap"],
        seed_transpiler=7,
    )
    gates_only = raw.copy()
    gates_only._layout = None
    expected = Operator(logical).expand(Operator(QuantumCircuit(1)))
    assert not Operator(gates_only).equiv(expected)  # the layout matters for this circuit
    result = evaluator.evaluate(_fenced(code))
    assert result.error is None, result.error
    assert "layout applied" in result.strategy_detail
    assert Operator(result.circuit).equiv(expected)
    assert Operator(result.circuit).equiv(Operator.from_circuit(raw))
