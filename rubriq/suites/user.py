"""Circuits a user brings: one OpenQASM 2 / 3 file (or Qiskit Python, run in the completions'
sandbox), or a folder of OpenQASM files, checked before anything else runs
(``rubriq optimize``, ``rubriq data build --from-qasm``).

Every refusal is a :class:`CircuitFileError` whose message names the file and, where the
problem sits on a line, the line: an empty file, text that is not OpenQASM (the parser's
message, with the statement it stopped at), more qubits than :data:`MAX_QUBITS`, a circuit that
measures, resets or branches on classical bits (a rewrite keeps a *unitary*: measurements would
be silently dropped, so they are refused instead), a circuit without gates.  Barriers carry no
operation and are dropped (counted in :attr:`UserCircuit.dropped`).

>>> c = load_circuit_text('OPENQASM 2.0;\\ninclude "qelib1.inc";\\nqreg q[2];\\nh q[0];\\ncx q[0],q[1];\\nt q[1];\\n', "bell.qasm")
>>> c.name, c.circuit.num_qubits, c.kind, c.t0
('bell', 2, 'qasm2', 1)
>>> load_circuit_text('OPENQASM 2.0;\\nqreg q[1];\\ncreg c[1];\\nh q[0];\\nmeasure q[0] -> c[0];\\n', "m.qasm")
Traceback (most recent call last):
...
rubriq.suites.user.CircuitFileError: m.qasm, line 5 `measure q[0] -> c[0];`: the circuit measures; rubriq rewrites unitary circuits: remove the measurements (and resets) and measure the rewritten circuit
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from qiskit import QuantumCircuit, qasm2

MAX_QUBITS = 256
"""The widest circuit accepted: the rewrite target's limit (``CircuitTarget.max_qubits``), where
mqt.qcec still certifies equivalence."""
MAX_BYTES = 50_000_000
"""The largest file accepted (the rewrite target's own limit)."""
NON_UNITARY = ("measure", "reset")
_LINE = re.compile(r"\bline (\d+) `([^`]*)`")


class CircuitFileError(ValueError):
    """A user's circuit file that cannot be used; the message names the file (and the line)."""


@dataclass
class UserCircuit:
    """A user's circuit, loaded and checked."""

    name: str
    """The file name without its suffix (``stdin`` for ``-``)."""
    circuit: QuantumCircuit
    """The circuit, barriers dropped."""
    text: str
    """The file's text as given."""
    kind: str
    """``qasm2``, ``qasm3`` or ``python``."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Instructions dropped because they carry no operation (barriers), by name."""

    @property
    def qasm(self) -> str:
        """The circuit as OpenQASM 2.0 (what the prompts show and the compilers read)."""
        return qasm2.dumps(self.circuit)

    @property
    def t0(self) -> int:
        """T0: the circuit's T-count under the rubric's gate table."""
        from rubriq.circuit.gates import TRUSTED_MAX_GATES, canonical_ops
        from rubriq.circuit.tcount import t_count

        return t_count(canonical_ops(self.circuit, max_gates=TRUSTED_MAX_GATES))


def _where(name: str, text: str, pattern: str) -> str:
    """``name, line N `statement``` of the first line matching ``pattern``, else ``name``."""
    for number, line in enumerate(text.splitlines(), 1):
        if re.search(pattern, line):
            return f"{name}, line {number} `{line.strip()[:120]}`"
    return name


def _file_line(message: str, text: str) -> str:
    """The parser's ``line N `statement``` counts lines of the normalized program: point at the
    line of the file that holds that statement instead, when it is found there."""
    m = _LINE.search(message)
    if not m or not m.group(2).strip():
        return message
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(m.group(2).strip()[:60]):
            return message[: m.start(1)] + str(number) + message[m.end(1) :]
    return message


def looks_like_python(text: str, name: str = "") -> bool:
    """A ``.py`` file, or Qiskit code without an OpenQASM header or register declaration."""
    if name.endswith(".py"):
        return True
    return not re.search(r"OPENQASM|\bqreg\b|\bqubit\b", text) and bool(re.search(r"\bQuantumCircuit\s*\(", text))


def load_circuit_text(text: str, name: str = "stdin", allow_python: bool = True) -> UserCircuit:
    """Load and check a user's circuit from its text (``name``: the file, for the messages)."""
    from rubriq.extract.qasm import QASMError, QASMLimits, load_qasm

    stem = Path(name).stem if name not in ("-", "stdin") else "stdin"
    if not text.strip():
        raise CircuitFileError(f"{name} is empty: no circuit in it")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise CircuitFileError(f"{name} is larger than {MAX_BYTES:,} bytes")
    if looks_like_python(text, name):
        if not allow_python:
            raise CircuitFileError(f"{name} is Qiskit Python; only OpenQASM 2/3 files are read here")
        circuit, kind = _run_python(text, name), "python"
    elif not re.search(r"\b(qreg|qubit)\b", text):
        raise CircuitFileError(
            f"{name}: not a loadable OpenQASM 2/3 program (no qreg or qubit declaration) nor Qiskit Python "
            "(no QuantumCircuit(...))"
        )
    else:
        declared = [int(n) for n in re.findall(r"\b(?:qreg\s+\w+|qubit)\s*\[\s*(\d{1,12})\s*\]", text)]
        if sum(declared) > MAX_QUBITS:
            where = _where(name, text, r"\b(qreg|qubit)\b")
            raise CircuitFileError(
                f"{where}: {sum(declared)} qubits declared; at most "
                f"{MAX_QUBITS} are taken (the rewrite target's limit, where equivalence is still certified)"
            )
        try:
            circuit = load_qasm(text, QASMLimits(max_bytes=MAX_BYTES, max_qubits=MAX_QUBITS))
        except QASMError as exc:
            message = _file_line(str(exc), text)
            m = _LINE.search(message)
            if m:  # the file and the line first, then what the parser said about it
                why = message[m.end() :].lstrip(": ")
                raise CircuitFileError(
                    f"{name}, line {m.group(1)} `{m.group(2)}`: not a loadable OpenQASM 2/3 program: {why}"
                ) from None
            raise CircuitFileError(f"{name}: not a loadable OpenQASM 2/3 program: {message}") from None
        kind = "qasm3" if re.search(r"OPENQASM\s+3", text) else "qasm2"
    return check_circuit(circuit, name, text, stem, kind)


def _run_python(text: str, name: str) -> QuantumCircuit:
    """Qiskit Python through the completions' sandbox (rubriq/extract/sandbox), never in-process."""
    from rubriq.config import ExtractionConfig
    from rubriq.extract.sandbox import run_python

    try:
        return run_python(text, ExtractionConfig(max_qubits=MAX_QUBITS), timeout_s=60.0)
    except Exception as exc:  # PythonExecutionError, PythonTimeout, SandboxUnavailable ...: the reason, one line
        raise CircuitFileError(f"{name}: the Qiskit Python did not build a circuit in the sandbox: {exc}") from None


def check_circuit(
    circuit: QuantumCircuit, name: str, text: str = "", stem: str = "", kind: str = "qasm2"
) -> UserCircuit:
    """The checks every user circuit gets (width, measurements, classical control, gates)."""
    from qiskit.circuit import ControlFlowOp

    if circuit.num_qubits > MAX_QUBITS:
        raise CircuitFileError(f"{name}: {circuit.num_qubits} qubits; at most {MAX_QUBITS} are taken")
    if circuit.num_qubits == 0:
        raise CircuitFileError(f"{name}: the circuit has no qubits")
    names = [inst.operation.name for inst in circuit.data]
    for what in NON_UNITARY:
        if what in names:
            verb = "measures" if what == "measure" else "resets qubits"
            where = _where(name, text, r"\b" + what + r"\b")
            raise CircuitFileError(
                f"{where}: the circuit {verb}; rubriq rewrites unitary circuits: "
                "remove the measurements (and resets) and measure the rewritten circuit"
            )
    for inst in circuit.data:
        if isinstance(inst.operation, ControlFlowOp) or inst.operation.num_clbits:
            where = _where(name, text, r"\bif\b|\bwhile\b|\bfor\b")
            raise CircuitFileError(
                f"{where}: classical control ({inst.operation.name}) is not a unitary; rubriq rewrites unitary circuits"
            )
    dropped = {"barrier": names.count("barrier")} if "barrier" in names else {}
    kept = QuantumCircuit(*circuit.qregs, name=circuit.name, global_phase=circuit.global_phase)
    if not circuit.qregs:
        kept = QuantumCircuit(circuit.num_qubits, global_phase=circuit.global_phase)
    for inst in circuit.data:
        if inst.operation.name != "barrier":
            kept.append(inst.operation, [kept.qubits[circuit.find_bit(q).index] for q in inst.qubits], copy=False)
    if not kept.data:
        raise CircuitFileError(f"{name}: the circuit has no gates: nothing to rewrite")
    return UserCircuit(stem or Path(name).stem, kept, text, kind, dropped)


def load_circuit_file(path: str | Path, allow_python: bool = True) -> UserCircuit:
    """Load and check a user's circuit file (OpenQASM 2 / 3, or Qiskit Python with ``allow_python``)."""
    from rubriq.extract.files import InputError, read_text_file

    try:
        text = read_text_file(path, allow_empty=True)
    except InputError as exc:
        raise CircuitFileError(str(exc)) from None
    return load_circuit_text(text, str(path), allow_python)


def load_qasm_folder(folder: str | Path) -> list[UserCircuit]:
    """Every ``*.qasm`` file of ``folder`` (sorted by name), each checked; a
    :class:`CircuitFileError` listing *every* bad file (not only the first) when any is bad, and
    when the folder holds none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CircuitFileError(f"{folder} is not a folder")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() == ".qasm" and p.is_file())
    if not files:
        others = sorted(p.name for p in folder.iterdir())[:5]
        raise CircuitFileError(
            f"{folder} holds no .qasm file" + (f" (it holds {', '.join(others)}, ...)" if others else " (it is empty)")
        )
    out, errors = [], []
    for path in files:
        try:
            out.append(load_circuit_file(path, allow_python=False))
        except CircuitFileError as exc:
            errors.append(str(exc))
    if errors:
        raise CircuitFileError(f"{len(errors)} of {len(files)} files cannot be used: " + " | ".join(errors))
    return out


__all__ = [
    "MAX_QUBITS",
    "CircuitFileError",
    "UserCircuit",
    "check_circuit",
    "load_circuit_file",
    "load_circuit_text",
    "load_qasm_folder",
    "looks_like_python",
]
