"""``rubriq optimize CIRCUIT`` (issue 48): a policy's rewrites and the compilers on a user's
circuit, each checked against the input; the table, the output circuit (re-read and compared
with the input by Qiskit's ``Operator``, independently of RubriQ's engine), the sidecar,
``--then pyzx``, and every bad input as one line with exit code 2.

References are independent of the code under test: tof_3's T0 (21) and PyZX's count (15) are
the published ones (shared/benchmarks/published_tcounts.csv, checked here against that file);
a generated rewrite's planted answer saves exactly 2 T per planted redundancy
(rubriq/data/rewrites.py), so its T-count is T0 - 2k, counted from the construction."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from qiskit import QuantumCircuit, qasm2
from qiskit.quantum_info import Operator

from tests.conftest import SHARED, SHARED_SUITE

WIDE = {"COLUMNS": "200"}


def run_cli(args: list[str], capsys, monkeypatch) -> tuple[int, str, str]:
    from rubriq.cli import main

    for k, v in WIDE.items():
        monkeypatch.setenv(k, v)
    code = main(args)
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), " ".join(err.split())


def load(path: Path) -> QuantumCircuit:
    return qasm2.loads(path.read_text(), custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)


def equal_unitaries(a: QuantumCircuit, b: QuantumCircuit) -> bool:
    return Operator(a).equiv(Operator(b))


def t_gates(circuit: QuantumCircuit) -> int:
    """T-type gates as written: t, tdg, and Z rotations by odd multiples of pi/4 (an independent count)."""
    import math

    count = 0
    for inst in circuit.data:
        name = inst.operation.name
        if name in ("t", "tdg"):
            count += 1
        elif name in ("rz", "p", "u1"):
            k = float(inst.operation.params[0]) / (math.pi / 4)
            count += abs(k - round(k)) < 1e-9 and round(k) % 2 == 1
    return count


def table_row(out: str, method: str) -> list[str]:
    """The cells after ``method`` in the (whitespace-normalised) table: T, 2q, depth, verdict ..."""
    start = out.index(f" {method} ", out.index("seconds")) + len(method) + 2
    return out[start:].split()


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)


def published(circuit: str) -> dict:
    path = SHARED / "benchmarks" / "published_tcounts.csv"
    if not path.is_file():
        pytest.skip(f"no {path}")
    with open(path, encoding="utf-8") as fh:
        return next(r for r in csv.DictReader(fh) if r["circuit"] == circuit)


def test_suite_circuit_with_the_tiny_model_and_the_compilers(tmp_path, capsys, monkeypatch):
    src = SHARED_SUITE / "tof_3.qasm"
    if not src.is_file():
        pytest.skip(f"no {src} (set RUBRIQ_SHARED to a copy of the T-count suite)")
    facts = published("tof_3")
    out_file = tmp_path / "out" / "tof_3.qasm"
    args = ["optimize", str(src), "--model", "tiny", "-n", "2", "--max-new-tokens", "8", "--then", "pyzx"]
    code, out, err = run_cli([*args, "--out", str(out_file)], capsys, monkeypatch)
    assert code == 0, err
    assert f"T0 = {facts['T0']}" in out
    for method in ("input", "policy", "policy+pyzx", "qiskit", "tket", "pyzx"):
        assert f" {method} " in out
    # the random tiny model writes no circuit: its row says so, the hybrid has nothing to start from
    assert table_row(out, "policy")[:4] == ["-", "-", "-", "none"]
    assert "policy: no equivalent rewrite; 2 samples" in out and "0 parsed" in out
    assert table_row(out, "policy+pyzx")[3] == "skipped"
    assert table_row(out, "pyzx")[0] == facts["PyZX"]  # PyZX's published count, reached and verified
    sidecar = json.loads(out_file.with_suffix(".json").read_text())
    assert sidecar["T0"] == int(facts["T0"]) and sidecar["T"] == int(facts["PyZX"]) == 15
    assert sidecar["method"] == "pyzx" and sidecar["verdict"] == "equivalent"
    assert sidecar["verified_by"] in ("exact", "clifford", "qcec") and sidecar["fidelity"]["process_fidelity"] == 1.0
    assert [r["method"] for r in sidecar["rows"]] == ["input", "policy", "policy+pyzx", "qiskit", "tket", "pyzx"]
    written = load(out_file)
    assert equal_unitaries(written, load(src))
    assert t_gates(written) == 15  # the T gates as written


def small_rewrite(tmp_path: Path):
    """A generated 3-qubit rewrite circuit (rubriq/data/rewrites.py) with 2 planted redundancies."""
    from rubriq.data.rewrites import RewriteGeneratorSpec, generate

    spec = RewriteGeneratorSpec(
        count=1, qubits=(3,), core_gates=(6, 8), redundancies=(2, 2), seed=5, optimum=False, target_t_best=False
    )
    (task,) = generate(spec)
    path = tmp_path / "small.qasm"
    path.write_text(task.qasm())
    return task, path


def test_endpoint_policy_wins_and_then_pyzx(tmp_path, capsys, monkeypatch):
    pytest.importorskip("openai")
    pytest.importorskip("fastapi")
    from rubriq.evaluation.optimize import rewrite_row
    from rubriq.suites.user import load_circuit_file
    from tests.openai_server import ServerThread, build_app, read_log

    task, path = small_rewrite(tmp_path)
    source = load_circuit_file(path)
    t0 = source.t0
    planted = task.circuit(set())  # every planted redundancy reduced: 2 T fewer each
    wrong = QuantumCircuit(3)  # the identity: not equivalent (the input has T gates)
    wrong.h(0)
    answers = [f"```qasm\n{qasm2.dumps(planted)}```", f"```qasm\n{qasm2.dumps(wrong)}```", "I cannot.", task.qasm()]
    content = rewrite_row(source, "full")[1]["prompt"][-1]["content"]
    log = tmp_path / "server.jsonl"
    out_file = tmp_path / "best.qasm"
    with ServerThread(build_app({content: answers}, log)) as server:
        args = ["optimize", str(path), "--endpoint", server.url, "--model", "policy", "-n", "4", "--then", "pyzx"]
        code, out, err = run_cli([*args, "--compilers", "none", "--out", str(out_file)], capsys, monkeypatch)
    assert code == 0, err
    assert len(read_log(log, "answered")) == 1  # one request, n = 4
    t_planted = t0 - 2 * len(task.planted)
    row = table_row(out, "policy")
    assert row[0] == str(t_planted) and row[3] == "equivalent"
    assert "4 samples" in out and "3 parsed, 2 equivalent (1 with T < T0), 1 not equivalent" in out
    sidecar = json.loads(out_file.with_suffix(".json").read_text())
    hybrid = next(r for r in sidecar["rows"] if r["method"] == "policy+pyzx")
    assert hybrid["verdict"] == "equivalent"
    if hybrid["t"] < t_planted:  # PyZX lowered the policy's circuit further: the hybrid is the answer
        assert sidecar["method"] == "policy+pyzx" and sidecar["T"] == hybrid["t"] and hybrid["kept"]
    else:
        assert sidecar["method"] == "policy" and sidecar["T"] == t_planted and not hybrid["kept"]
        assert "not kept" in out
    assert sidecar["T0"] == t0 and sidecar["policy"]["prompt_style"] == "full"
    assert [c.get("verdict") for c in sidecar["candidates"]] == ["equivalent", "not equivalent", None, "equivalent"]
    assert equal_unitaries(load(out_file), task.circuit())


def test_a_circuit_too_large_for_the_context_still_gets_the_compilers(tmp_path, capsys, monkeypatch):
    """The tiny model's context is 4096 tokens; 1500 `t; h` pairs do not fit: the policy row says
    so in one line and Qiskit's row is computed all the same."""
    path = tmp_path / "long.qasm"
    path.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\n' + "t q[0];\nh q[0];\n" * 1500)
    code, out, err = run_cli(
        ["optimize", str(path), "--model", "tiny", "-n", "1", "--temperature", "0", "--compilers", "qiskit"],
        capsys,
        monkeypatch,
    )
    assert code == 0, err
    assert table_row(out, "policy")[3] == "skipped"
    assert "policy: too large for the model's context" in out and "4,096-token context" in out
    assert table_row(out, "qiskit")[3] == "equivalent"
    written = Path("runs/optimize/long.opt.qasm")
    assert equal_unitaries(load(written), load(path))


def test_python_input_runs_in_the_sandbox_and_stdin(tmp_path, capsys, monkeypatch):
    import io

    path = tmp_path / "bell_t.py"
    path.write_text(
        "from qiskit import QuantumCircuit\nqc = QuantumCircuit(2)\nqc.h(0)\nqc.t(0)\nqc.t(0)\nqc.cx(0, 1)\n"
    )
    code, out, err = run_cli(["optimize", str(path), "-n", "0", "--compilers", "qiskit"], capsys, monkeypatch)
    if code == 2 and "sandbox" in err:
        pytest.skip(f"the sandbox cannot run here: {err}")
    assert code == 0, err
    assert "T0 = 2 (python)" in out and table_row(out, "qiskit")[0] == "0"  # T T = S
    expected = QuantumCircuit(2)
    expected.h(0)
    expected.s(0)
    expected.cx(0, 1)
    assert equal_unitaries(load(Path("runs/optimize/bell_t.opt.qasm")), expected)
    monkeypatch.setattr("sys.stdin", io.StringIO(qasm2.dumps(expected)))
    code, out, err = run_cli(["optimize", "-", "-n", "0", "--compilers", "qiskit"], capsys, monkeypatch)
    assert code == 0, err  # T0 = 0: Qiskit's circuit (T = 0 <= T0) is verified and written
    assert "stdin: 2 qubits" in out and "T0 = 0" in out
    assert equal_unitaries(load(Path("runs/optimize/stdin.opt.qasm")), expected)


def test_no_verified_circuit_is_exit_1_and_writes_nothing(tmp_path, capsys, monkeypatch):
    path = tmp_path / "tt.qasm"
    path.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nt q[0];\nt q[0];\n')
    args = ["optimize", str(path), "--model", "tiny", "-n", "1", "--temperature", "0", "--max-new-tokens", "4"]
    code, out, err = run_cli([*args, "--compilers", "none"], capsys, monkeypatch)
    assert code == 1, err
    assert "no verified circuit with T <= T0 = 2: nothing written" in out and not Path("runs").exists()


BAD = {
    "missing": (None, "missing.qasm does not exist"),
    "prose": ("Here is my circuit: a Toffoli, then two T gates.\n", "not a loadable OpenQASM 2/3 program"),
    "empty": ("", "is empty: no circuit in it"),
    "wide": ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1000];\nh q[0];\n', "line 3 `qreg q[1000];`: 1000 qubits"),
    "measured": (
        'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncreg c[2];\nh q[0];\ncx q[0],q[1];\nmeasure q -> c;\n',
        "line 7 `measure q -> c;`: the circuit measures",
    ),
    "typo": ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0];\ncx q[0] q[1];\n', "line 5"),
    "no gates": ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\n', "has no gates"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_naming_the_file(case, tmp_path, capsys, monkeypatch):
    text, expected = BAD[case]
    name = "missing.qasm" if text is None else f"{case.replace(' ', '_')}.qasm"
    if text is not None:
        (tmp_path / name).write_text(text)
    code, out, err = run_cli(
        ["optimize", name, "--model", "tiny", "-n", "1", "--temperature", "0"], capsys, monkeypatch
    )
    assert code == 2 and out == ""
    assert err.startswith(f"error: CIRCUIT: {name}") and expected in err, err
    assert "Traceback" not in err and not Path("runs").exists()  # nothing loaded, nothing written


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--compilers", "qiskit,quantinuum"], "--compilers"),
        (["--then", "tket"], "--then"),
        (["--out", "best.txt"], "--out"),
        (["-n", "0", "--compilers", "none"], "--compilers"),
        (["-n", "0", "--then", "pyzx"], "--then"),
        (["--prompt-style", "chatty"], "--prompt-style"),
        (["--model", "no/such-model-here"], "--model"),
    ],
)
def test_bad_flags_are_usage_errors(args, flag, tmp_path, capsys, monkeypatch):
    path = tmp_path / "ok.qasm"
    path.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nt q[0];\nt q[0];\n')
    code, _, err = run_cli(["optimize", str(path), *args], capsys, monkeypatch)
    assert code == 2 and err.startswith(f"error: {flag}"), err
