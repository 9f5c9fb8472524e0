"""Property: RubriQ's extraction parses every text that plain Qiskit parses, to the same circuit.

Hypothesis writes valid OpenQASM 2/3 programs and dresses them as models do: comments in any
script (``// |0⟩ → |1⟩``, ``γ ≈ 0.4``), block comments, prose around a fence with or without a
language tag, CRLF line ends, a byte-order mark, tabs.  Plain Qiskit is tried on the raw text
and on the first fenced block (``qasm3.loads``, or ``qasm2.loads`` with the legacy custom
instructions); whenever it parses, RubriQ must parse too, to an Operator-equal circuit.  RubriQ
must also parse every generated text (it is a valid program under the dressing).
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qiskit import QuantumCircuit
from qiskit.quantum_info import Operator

from rubriq.circuit.gates import strip_non_unitary
from rubriq.config import ExtractionConfig
from rubriq.extract.cascade import extract
from rubriq.extract.qasm import plain_qiskit_load

# (name, qubits, parameters): gates both qelib1.inc and stdgates.inc define
GATES = [
    ("h", 1, 0),
    ("x", 1, 0),
    ("y", 1, 0),
    ("z", 1, 0),
    ("s", 1, 0),
    ("sdg", 1, 0),
    ("t", 1, 0),
    ("tdg", 1, 0),
    ("rz", 1, 1),
    ("rx", 1, 1),
    ("ry", 1, 1),
    ("cx", 2, 0),
    ("cz", 2, 0),
    ("cy", 2, 0),
    ("swap", 2, 0),
    ("crz", 2, 1),
    ("ccx", 3, 0),
    ("cswap", 3, 0),
]
ANGLES = ["pi/4", "-pi/2", "0.3", "3*pi/8", "1.5707963", "pi"]
NOTES = ["|0⟩ → |1⟩", "γ ≈ 0.4", "θ = π/4 – the phase", "Hadamard: |+⟩", "étape 2", "量子", "x", "∑ ⊗ ⊕"]
PROSE = [
    "Here is the circuit you asked for:",
    "Voilà le circuit — il prépare |ψ⟩ :",
    "The T-count is 7.",
    "Let me know if you need anything else!",
    "この回路は量子フーリエ変換です。",
]
CONFIG = ExtractionConfig(allow_python=False)


@st.composite
def programs(draw):
    n = draw(st.integers(1, 4))
    version = draw(st.sampled_from([2, 3]))
    usable = [g for g in GATES if g[1] <= n]
    statements = []
    for _ in range(draw(st.integers(1, 10))):
        name, k, p = draw(st.sampled_from(usable))
        qubits = draw(st.permutations(range(n)))[:k]
        params = f"({draw(st.sampled_from(ANGLES))})" if p else ""
        statements.append(f"{name}{params} " + ", ".join(f"q[{q}]" for q in qubits) + ";")
    header = (
        ["OPENQASM 2.0;", 'include "qelib1.inc";', f"qreg q[{n}];"]
        if version == 2
        else ["OPENQASM 3.0;", 'include "stdgates.inc";', f"qubit[{n}] q;"]
    )
    return version, header, statements


def unicode_note():
    return st.one_of(
        st.sampled_from(NOTES),
        st.text(
            st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters='\n\r*/"`'), max_size=12
        ),
    )


@st.composite
def dressed(draw):
    version, header, statements = draw(programs())
    lines = list(header)
    for stmt in statements:
        if draw(st.booleans()):
            lines.append(f"// {draw(unicode_note())}")
        if draw(st.integers(0, 5)) == 0:
            lines.append(f"/* {draw(unicode_note())}\n   {draw(unicode_note())} */")
        indent = draw(st.sampled_from(["", "\t", "    "]))
        trailing = f"  // {draw(unicode_note())}" if draw(st.booleans()) else ""
        lines.append(indent + stmt + trailing)
    body = "\n".join(lines) + "\n"
    fence = draw(st.sampled_from([None, "qasm", "openqasm", ""]))
    if fence is not None:
        before = draw(st.sampled_from(PROSE)) + "\n\n" if draw(st.booleans()) else ""
        after = "\n" + draw(st.sampled_from(PROSE)) if draw(st.booleans()) else ""
        text = f"{before}```{fence}\n{body}```{after}"
    else:
        text = body
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if draw(st.integers(0, 3)) == 0:
        text = "\ufeff" + text
    return version, text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dressed())
def test_rubriq_parses_whatever_qiskit_parses_to_the_same_circuit(example):
    _, text = example
    ours = extract(text, CONFIG)
    assert ours.circuit is not None, (text, ours.error)
    reference = plain_qiskit_load(text)
    if reference is not None:
        assert Operator(strip_non_unitary(ours.circuit)).equiv(Operator(strip_non_unitary(reference))), text


def test_caps_hold_after_comments_are_removed():
    """A comment cannot hide a statement from the caps, and cannot carry one past them."""
    from rubriq.extract.qasm import QASMError, QASMLimits, load_qasm

    limits = QASMLimits(max_qubits=4)
    wide = 'OPENQASM 2.0;\ninclude "qelib1.inc";\n/* only two qubits, promise */ qreg q[40];\nh q[0];\n'
    try:
        load_qasm(wide, limits)
        raise AssertionError("40 declared qubits passed a cap of 4")
    except QASMError as exc:
        assert "40 qubits declared" in str(exc)
    # non-ASCII stays refused in code, with the line named
    try:
        load_qasm('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nrz(γ) q[0];\n')
        raise AssertionError("non-ASCII code accepted")
    except QASMError as exc:
        assert "line 4" in str(exc) and "γ" in str(exc)
    # but is fine in comments, and a commented-out gate is not applied
    circuit = load_qasm('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\n// x q[0]; → |1⟩\nh q[0];\n')
    assert [i.operation.name for i in circuit.data] == ["h"]


def test_real_model_errors_name_the_line_and_cause():
    from rubriq.extract.qasm import QASMError, load_qasm

    cases = {
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0];\ncx q[0],q[5];\n': (
            "`cx q[0],q[5];`",
            "out-of-range",
        ),
        'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\nh q[0];\ncx q[0], q[5];\n': (
            "`cx q[0], q[5];`",
            "out of range",
        ),
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nhx q[1];\n': ("`hx q[1];`", "'hx' is not defined"),
    }
    for text, (statement, cause) in cases.items():
        try:
            load_qasm(text)
            raise AssertionError(f"parsed: {text}")
        except QASMError as exc:
            assert statement in str(exc) and cause in str(exc), str(exc)


def test_quirk_rules_on_real_looking_outputs():
    """Each rule of quirks.py on the kind of text models write (docs/extraction.md)."""
    from rubriq.extract.qasm import load_qasm

    def names(text):
        return [i.operation.name for i in load_qasm(text).data]

    # multi-controlled aliases: qelib1 gate by arity in 2.0, ctrl @ in 3.0
    assert names('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[4];\nmcx q[0],q[1],q[2],q[3];\n') == ["mcx"]
    assert names('OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[3] q;\nccz q[0], q[1], q[2];\n') == ["ccz"]
    assert names('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[4];\ncccx q[0],q[1],q[2],q[3];\n') == ["mcx"]
    # a bare measurement in a 2.0 program
    assert names('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nh q[0];\nmeasure q[0];\n') == ["h"]
    # pre-3.0 loop syntax, unrolled (Qiskit's importer cannot index by the loop variable)
    loop = 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[3] q;\nfor i in [0:2] {\n  h q[i];\n}\n'
    assert names(loop) == ["h", "h", "h"]
    assert names(loop.replace("for i", "for int i").replace("[0:2]", "{0, 2}")) == ["h", "h"]
    # a program that defines its own ccz keeps it
    own = (
        'OPENQASM 2.0;\ninclude "qelib1.inc";\ngate ccz a,b,c { h c; ccx a,b,c; h c; }\nqreg q[3];\n'
        "ccz q[0],q[1],q[2];\n"
    )
    assert names(own) == ["ccz"]
    reference = QuantumCircuit(3)
    reference.ccz(0, 1, 2)
    assert Operator(load_qasm(own)).equiv(Operator(reference))


# -- Qiskit Python as models and people write it (issue #29) ------------------------------------
PY_ANGLES = ["np.pi / 4", "-np.pi / 2", "0.3", "3 * np.pi / 8", "1.5707963", "np.pi"]


@st.composite
def python_circuits(draw):
    """(qubits, the lines that build ``qc`` gate by gate), e.g. ``qc.crz(np.pi / 4, 1, 0)``."""
    n = draw(st.integers(1, 3))
    usable = [g for g in GATES if g[1] <= n]
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        name, k, p = draw(st.sampled_from(usable))
        qubits = draw(st.permutations(range(n)))[:k]
        args = ([draw(st.sampled_from(PY_ANGLES))] if p else []) + [str(q) for q in qubits]
        lines.append(f"qc.{name}({', '.join(args)})")
    return n, lines


HEAD = "from qiskit import QuantumCircuit, transpile\nimport numpy as np\n"


def _body(lines: list[str], indent: str = "    ") -> str:
    return "".join(f"{indent}{line}\n" for line in lines)


def python_styles(n: int, lines: list[str]) -> dict[str, str]:
    """The module-level twin and the same circuit in the styles of issue #29, each a fenced answer."""
    build = f"    qc = QuantumCircuit({n})\n" + _body(lines)
    styles = {
        "module": HEAD + f"qc = QuantumCircuit({n})\n" + _body(lines, ""),
        # rule zero_arg_function: defined, never called
        "function": HEAD + "def build_circuit():\n" + build + "    return qc\n",
        # rule last_built: needs an argument, only printed
        "printed": HEAD
        + "def make(num_qubits):\n"
        + build.replace(f"({n})", "(num_qubits)", 1)
        + "    return qc\n"
        + f"print(make({n}))\n",
        # rule last_built: simulated with Aer (transpiled for the simulator) before printing counts
        "simulated": HEAD
        + "from qiskit_aer import AerSimulator\n"
        + "def run(shots):\n"
        + build
        + "    qc.measure_all()\n    sim = AerSimulator()\n"
        + "    counts = sim.run(transpile(qc, sim), shots=shots).result().get_counts()\n    print(counts)\n"
        + "run(64)\n",
        # zero_arg_function already called (returned None) -> last_built; mpl and text drawings
        "drawn": HEAD
        + "def show():\n"
        + build
        + "    fig = qc.draw('mpl')\n    fig.savefig('circuit.png')\n"
        + "    print(qc.draw(output='text'))\nshow()\n",
    }
    return {name: f"Here is the circuit:\n```python\n{code}```\n" for name, code in styles.items()}


_STYLE_EVALUATOR: dict = {}


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(python_circuits())
def test_every_python_answer_style_scores_what_its_module_level_twin_scores(circuit):
    """A circuit returned by a function never called, one only printed, one simulated with Aer
    before its counts are printed, one drawn with matplotlib's output and as text: each is found
    (the rule that found it is named in ``strategy_detail``), is Operator-equal to the circuit
    the same lines build at module level, and gets exactly the twin's reward and scores."""
    from rubriq.config import BudgetConfig, RubricConfig
    from rubriq.evaluator import RubriQEvaluator

    n, lines = circuit
    if n not in _STYLE_EVALUATOR:
        cfg = RubricConfig(extraction=ExtractionConfig(python_timeout_s=60.0), budget=BudgetConfig(time_s=120.0))
        _STYLE_EVALUATOR[n] = RubriQEvaluator(target_algorithm="qft", num_qubits=n, config=cfg, cache_size=0)
    evaluator = _STYLE_EVALUATOR[n]
    texts = python_styles(n, lines)
    twin = evaluator.evaluate(texts["module"])
    assert twin.error is None, twin.error
    assert twin.strategy_detail == "module_circuit: the module-level variable 'qc'"
    rules = {"function": "zero_arg_function", "printed": "last_built", "simulated": "last_built", "drawn": "last_built"}
    for style, rule in rules.items():
        result = evaluator.evaluate(texts[style])
        assert result.error is None, (style, result.error)
        assert result.strategy_detail.startswith(rule + ":"), (style, result.strategy_detail)
        assert Operator(result.circuit).equiv(Operator(twin.circuit)), style
        assert result.reward == twin.reward and result.scores == twin.scores, style
