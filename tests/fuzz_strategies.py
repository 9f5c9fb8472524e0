"""Hypothesis strategies that generate and mutate QASM and Qiskit-Python completions.

Shared by the property tests (tests/test_fuzz.py, small budgets) and the long fuzzing entry
point (fuzz/fuzz_evaluator.py).
"""

from hypothesis import strategies as st

GATES_1Q = ["h", "x", "y", "z", "s", "sdg", "t", "tdg", "sx"]
GATES_ROT = ["rz", "rx", "ry", "p", "u1"]
GATES_2Q = ["cx", "cz", "swap", "cp", "crz"]
ANGLES = ["pi", "pi/2", "pi/4", "-pi/8", "0.3", "1e308*1e308", "((((pi))))", "2*pi", "1e-9", "x"]
NOISE = [
    ";",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "->",
    "OPENQASM 3.0;",
    "qubit[99] r;",
    "gate g a { g a; }",
    "\x00",
    "\u03c0",
    "```",
    "measure",
    "if(c==1)",
    "ctrl @",
    "inv @",
    "pow(2) @",
    "99999999999999999999",
]

VALID_PY = [
    "from qiskit import QuantumCircuit\nqc = QuantumCircuit(2)\nqc.h(0)\nqc.cx(0, 1)\n",
    "from qiskit import QuantumCircuit\nimport numpy as np\nqc = QuantumCircuit(3)\nqc.rz(np.pi / 4, 2)\nqc.ccx(0, 1, 2)\n",
    "from qiskit import QuantumCircuit\nfrom qiskit.circuit.library import QFTGate\nqc = QuantumCircuit(3)\n"
    "qc.append(QFTGate(3), range(3))\n",
]
PY_LINES = [
    "qc.h(0)",
    "qc.cx(0, 5)",
    "qc.rz(float('nan'), 0)",
    "import os",
    "while True: pass",
    "qc = QuantumCircuit(10**9)",
    "qc.measure_all()",
    "raise SystemExit",
    "x = 1/0",
    "qc.unitary([[1]], [0])",
    "qc.append(qc, [0, 1])",
    "del qc",
    "exec('1')",
    "qc.barrier()",
    "print('RUBRIQ-RESULT {}')",
]


@st.composite
def qasm_programs(draw):
    n = draw(st.integers(min_value=1, max_value=5))
    lines = ["OPENQASM 2.0;", 'include "qelib1.inc";', f"qreg q[{n}];"]
    for _ in range(draw(st.integers(min_value=0, max_value=25))):
        kind = draw(st.sampled_from(["1q", "rot", "2q", "noise"]))
        a = draw(st.integers(min_value=0, max_value=n))  # n itself is out of range on purpose
        b = draw(st.integers(min_value=0, max_value=n))
        if kind == "1q":
            lines.append(f"{draw(st.sampled_from(GATES_1Q))} q[{a}];")
        elif kind == "rot":
            lines.append(f"{draw(st.sampled_from(GATES_ROT))}({draw(st.sampled_from(ANGLES))}) q[{a}];")
        elif kind == "2q":
            gate = draw(st.sampled_from(GATES_2Q))
            param = f"({draw(st.sampled_from(ANGLES))})" if gate in ("cp", "crz") else ""
            lines.append(f"{gate}{param} q[{a}],q[{b}];")
        else:
            lines.append(draw(st.sampled_from(NOISE)))
    return "\n".join(lines)


@st.composite
def mutated(draw, base):
    text = draw(base)
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        if not text:
            break
        i = draw(st.integers(min_value=0, max_value=len(text) - 1))
        op = draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if op == "delete":
            text = text[:i] + text[i + 1 :]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(NOISE + ["\n", " ", "q[0]"])) + text[i:]
        else:
            j = draw(st.integers(min_value=i, max_value=min(len(text), i + 40)))
            text = text[:j] + text[i:j] + text[j:]
    return text


@st.composite
def python_programs(draw):
    code = draw(st.sampled_from(VALID_PY))
    extra = draw(st.lists(st.sampled_from(PY_LINES), max_size=3))
    return code + "\n".join(extra) + "\n"


def completions():
    """Whole completions: QASM or Python, fenced or not, with prose around."""
    body = st.one_of(mutated(qasm_programs()), python_programs(), mutated(python_programs()), st.text(max_size=300))
    return st.tuples(
        st.sampled_from(["", "Here you go:\n", "```qasm\n", "```python\n", "```\n"]),
        body,
        st.sampled_from(["", "\n```", "\nThis circuit is optimal."]),
    ).map("".join)
