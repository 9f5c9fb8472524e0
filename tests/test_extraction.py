"""The extraction cascade: each strategy, the dialect quirks, failures with reasons."""

import pytest

from rubriq.config import ExtractionConfig
from rubriq.extract.cascade import extract
from rubriq.extract.qasm import QASMError, QASMLimits, load_qasm
from rubriq.extract.serialize import PayloadError, payload_to_circuit

BELL_QASM2 = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0];\ncx q[0],q[1];\n'
BELL_PY = "from qiskit import QuantumCircuit\nqc = QuantumCircuit(2)\nqc.h(0)\nqc.cx(0, 1)\n"


def names(circuit):
    return [inst.operation.name for inst in circuit.data]


def test_direct_qasm_with_prose_around():
    text = "Here is the circuit:\n" + BELL_QASM2 + "This prepares a Bell state.\nHope it helps!"
    result = extract(text)
    assert result.strategy == "direct_qasm"
    assert names(result.circuit) == ["h", "cx"]


def test_fenced_qasm_block_without_header():
    text = "Answer:\n```qasm\nqreg q[2];\nh q[0];\ncx q[0],q[1];\n```\n"
    result = extract(text)
    assert result.strategy == "fenced_block"
    assert names(result.circuit) == ["h", "cx"]


def test_untagged_fence_and_first_block_that_parses_wins():
    text = "```\nthis is not code\n```\nthen\n```\nqreg q[3];\nx q[2];\n```\n"
    result = extract(text)
    assert result.strategy == "fenced_block"
    assert result.circuit.num_qubits == 3 and names(result.circuit) == ["x"]


def test_fenced_python_block_runs_out_of_process():
    result = extract("```python\n" + BELL_PY + "```")
    assert result.strategy == "fenced_block"
    assert names(result.circuit) == ["h", "cx"]


def test_raw_python_code_strategy():
    result = extract(BELL_PY + "qc.measure_all()\n")
    assert result.strategy == "python_code"
    assert names(result.circuit) == ["h", "cx"]  # measurements dropped by the worker


def test_python_error_is_reported():
    result = extract("```python\nfrom qiskit import QuantumCircuit\nqc = QuantumCircuit(2)\nqc.hh(0)\n```")
    assert result.circuit is None
    assert "AttributeError" in result.error


def test_python_timeout_is_enforced():
    cfg = ExtractionConfig(python_timeout_s=3.0)
    result = extract("from qiskit import QuantumCircuit\nqc = QuantumCircuit(1)\nwhile True:\n    pass\n", cfg)
    assert result.circuit is None
    assert "timed out" in result.error or "ended without a result" in result.error


def test_python_disabled():
    result = extract(BELL_PY, ExtractionConfig(allow_python=False))
    assert result.circuit is None and "disabled" in result.error


def test_papers_mixed_dialect_example():
    text = 'OPENQASM 2.0;\ninclude "stdgates.inc";\nqubit[4] q;\nh q[0];\ncx q[0], q[1];\nccx q[0], q[1], q[2];\n'
    circuit = load_qasm(text)
    assert circuit.num_qubits == 4
    assert names(circuit) == ["h", "cx", "ccx"]


def test_cu1_spelling_in_qasm3_and_cp_in_qasm2():
    q3 = 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\ncu1(pi/2) q[0], q[1];\n'
    assert names(load_qasm(q3)) == ["cp"]
    q2 = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncp(pi/2) q[0],q[1];\ncu1(pi/4) q[0],q[1];\n'
    assert names(load_qasm(q2)) == ["cp", "cu1"]


def test_aliases_unicode_pi_and_numpy_pi():
    text = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncnot q[0],q[1];\nrz(\u03c0/4) q[0];\nrz(np.pi/2) q[1];\n'
    circuit = load_qasm(text)
    assert names(circuit) == ["cx", "rz", "rz"]
    assert float(circuit.data[1].operation.params[0]) == pytest.approx(0.7853981633974483)


def test_qasm3_measurement_syntax_and_non_qelib_gates():
    text = (
        'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\nbit[2] c;\nh q[0];\ncx q[0], q[1];\n'
        "c[0] = measure q[0];\n"
    )
    assert names(load_qasm(text)) == ["h", "cx", "measure"]
    assert names(load_qasm(BELL_QASM2.replace("cx q[0],q[1];", "ecr q[0],q[1];"))) == ["h", "ecr"]


def test_garbage_has_reason_for_every_strategy():
    result = extract("The answer is 42.")
    assert result.circuit is None
    assert [name for name, _ in result.attempts] == ["direct_qasm", "fenced_block", "python_code"]


def test_qasm_caps_are_checked_before_parsing():
    with pytest.raises(QASMError, match="qubits declared"):
        load_qasm('OPENQASM 2.0; include "qelib1.inc"; qreg q[4294967296];')
    with pytest.raises(QASMError, match="include"):
        load_qasm('OPENQASM 2.0; include "/etc/passwd"; qreg q[1];')
    with pytest.raises(QASMError, match="larger than"):
        load_qasm("OPENQASM 2.0;" + " " * 70000, QASMLimits())
    with pytest.raises(QASMError, match="NUL"):
        load_qasm("OPENQASM 2.0; qreg q[1];\x00")


def test_payload_allow_list():
    assert names(payload_to_circuit({"num_qubits": 2, "ops": [["cx", [0, 1], []]]})) == ["cx"]
    for bad in (
        {"num_qubits": 2, "ops": [["os.system", [0], []]]},
        {"num_qubits": 2, "ops": [["cx", [0, 0], []]]},
        {"num_qubits": 2, "ops": [["rz", [0], [float("nan")]]]},
        {"num_qubits": 10**6, "ops": []},
    ):
        with pytest.raises(PayloadError):
            payload_to_circuit(bad)
