"""Load OpenQASM 2.0 / 3.0 text into a QuantumCircuit, with caps checked before parsing.

Parsing goes through Qiskit: ``qiskit.qasm2.loads(..., include_path=())`` (no file system
access) and ``qiskit.qasm3.loads`` (package qiskit-qasm3-import).  Before either parser sees
the text, :func:`precheck_raw` and :func:`precheck_program` enforce limits that keep hostile input from allocating: size,
ASCII, includes, integer-literal length and declared qubits.  The quirk rules of
``quirks.py`` recover the dialect mixes language models write.

>>> qc = load_qasm('OPENQASM 2.0; include "stdgates.inc"; qubit[2] q; h q[0]; cp(pi/2) q[0], q[1];')
>>> qc.num_qubits, [inst.operation.name for inst in qc.data]
(2, ['h', 'cp'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qiskit import QuantumCircuit

from rubriq.extract import quirks


class QASMError(ValueError):
    """The text is not a loadable (or acceptable) OpenQASM program."""


@dataclass(frozen=True)
class QASMLimits:
    """Caps checked on QASM text before it is parsed (bytes, qubits, nesting, controls)."""

    max_bytes: int = 65536
    max_qubits: int = 64
    max_int_digits: int = 12
    max_nesting: int = 64
    max_controls: int = 16


_STANDARD_INCLUDES = {"qelib1.inc", "stdgates.inc"}
_INCLUDE_NAME = re.compile(r'include\s+"([^"\n]*)"')
_QREG = re.compile(r"\bqreg\s+\w+\s*\[\s*(\d+)\s*\]")
_QUBIT_ARRAY = re.compile(r"\bqubit\s*\[\s*([^\]]*)\]")
_QUBIT_SINGLE = re.compile(r"\bqubit\s+[A-Za-z_]\w*\s*;")
_INT_LITERAL = re.compile(r"(?<![\w.])\d+(?![\w.])")  # integers, not the digits of floats or names
_STRING = re.compile(r'"[^"\n]*"')
_POW = re.compile(r"\bpow\s*\(")
_CTRL = re.compile(r"\b(?:neg)?ctrl\s*(?:\(\s*(\d+)\s*\))?\s*@")


def precheck_raw(text: str, limits: QASMLimits) -> None:
    """Checks on the raw text, before any rewriting: size, NUL bytes, includes."""
    if len(text) > limits.max_bytes or len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes:
        raise QASMError(f"QASM text larger than {limits.max_bytes} bytes")
    if "\x00" in text:
        raise QASMError("QASM text contains NUL bytes")
    for name in _INCLUDE_NAME.findall(text):
        if name not in _STANDARD_INCLUDES:
            raise QASMError(f"include {name!r} refused: only qelib1.inc and stdgates.inc are allowed")


def precheck_program(program: str, limits: QASMLimits) -> None:
    """Checks on the normalized program, before the parser allocates anything."""
    code = _STRING.sub('""', program)  # non-ASCII is fine in string literals (and comments, gone by now)
    if not code.isascii():
        bad = next(ch for ch in code if not ch.isascii())
        line = code[: code.index(bad)].count("\n") + 1
        raise QASMError(f"line {line}: non-ASCII character {bad!r} outside a comment or string")
    for literal in _INT_LITERAL.findall(program):
        if len(literal) > limits.max_int_digits:
            raise QASMError(f"integer literal with {len(literal)} digits (cap {limits.max_int_digits})")
    declared = sum(int(n) for n in _QREG.findall(program))
    for size in _QUBIT_ARRAY.findall(program):
        if not size.strip().isdigit():
            raise QASMError(f"qubit register size must be an integer literal, got {size.strip()!r}")
        declared += int(size)
    declared += len(_QUBIT_SINGLE.findall(program))
    if declared > limits.max_qubits:
        raise QASMError(f"{declared} qubits declared (cap {limits.max_qubits})")
    depth = deepest = 0
    for ch in program:
        if ch in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limits.max_nesting:
                    raise QASMError(f"brackets nested deeper than {limits.max_nesting}")
        elif ch in ")]}":
            depth -= 1
    if _POW.search(program):
        raise QASMError("pow() gate modifiers are not supported (their matrix powers are unbounded in cost)")
    for statement in program.split(";"):
        controls = sum(int(k or 1) for k in _CTRL.findall(statement))
        if controls > limits.max_controls:
            raise QASMError(f"{controls} control qubits in one gate (cap {limits.max_controls})")


def _custom_gates_for_qasm2(text: str):
    """Qelib1 gates Qiskit knows (LEGACY_CUSTOM_INSTRUCTIONS) plus Qiskit standard gates that
    models use without defining (ecr, iswap, ...), only where the program does not define them.
    """
    from qiskit import qasm2
    from qiskit.circuit import library as lib

    defined = set(re.findall(r"\b(?:gate|opaque)\s+([A-Za-z_]\w*)", text))
    extra = [
        qasm2.CustomInstruction("ecr", 0, 2, lib.ECRGate, builtin=True),
        qasm2.CustomInstruction("iswap", 0, 2, lib.iSwapGate, builtin=True),
        qasm2.CustomInstruction("dcx", 0, 2, lib.DCXGate, builtin=True),
        qasm2.CustomInstruction("ccz", 0, 3, lib.CCZGate, builtin=True),
        qasm2.CustomInstruction("cs", 0, 2, lib.CSGate, builtin=True),
        qasm2.CustomInstruction("csdg", 0, 2, lib.CSdgGate, builtin=True),
        qasm2.CustomInstruction("ryy", 1, 2, lib.RYYGate, builtin=True),
        qasm2.CustomInstruction("rzx", 1, 2, lib.RZXGate, builtin=True),
        qasm2.CustomInstruction("cphase", 1, 2, lib.CPhaseGate, builtin=True),
        qasm2.CustomInstruction("phase", 1, 1, lib.PhaseGate, builtin=True),
    ]
    legacy = [c for c in qasm2.LEGACY_CUSTOM_INSTRUCTIONS if c.name not in defined]
    return legacy + [c for c in extra if c.name not in defined]


def _parse(text: str, version: int) -> QuantumCircuit:
    if version == 3:
        from qiskit import qasm3

        return qasm3.loads(text)
    from qiskit import qasm2

    return qasm2.loads(text, include_path=(), custom_instructions=_custom_gates_for_qasm2(text), strict=False)


_POSITION = re.compile(r"^(?:<input>:)?(\d+),(\d+):\s*")
_INDEX = re.compile(r"\b([A-Za-z_]\w*)\s*\[\s*(\d+)\s*\]")


def _describe(exc: BaseException, program: str = "") -> str:
    """The parser's first message line, with the statement it points at quoted (line numbers
    count in the normalized program, so the statement is what a person can find and fix)."""
    msg = str(exc).strip().splitlines()
    first = (msg[0] if msg else "").strip().strip("\"'")
    m = _POSITION.match(first)
    lines = program.splitlines()
    if m and 0 < int(m.group(1)) <= len(lines):
        statement = lines[int(m.group(1)) - 1].strip()
        return f"line {m.group(1)} `{statement[:120]}`: {first[m.end() :][:300]}"
    if isinstance(exc, IndexError) or not first:
        where = _out_of_range(program)
        if where:
            return where
    return f"{type(exc).__name__}: {first[:300]}"


def _out_of_range(program: str) -> str | None:
    """The first statement that indexes a register beyond its declared size (Qiskit's OpenQASM
    3 importer reports only 'index out of range')."""
    sizes = {name: int(n) for name, n in re.findall(r"\bqreg\s+(\w+)\s*\[\s*(\d+)\s*\]", program)}
    sizes.update({name: int(n) for n, name in re.findall(r"\bqubit\s*\[\s*(\d+)\s*\]\s*(\w+)", program)})
    for number, line in enumerate(program.splitlines(), 1):
        if re.match(r"\s*(qreg|qubit|creg|bit)\b", line):
            continue
        for name, index in _INDEX.findall(line):
            if name in sizes and int(index) >= sizes[name]:
                return (
                    f"line {number} `{line.strip()[:120]}`: qubit {name}[{index}] is out of range "
                    f"(register {name} has {sizes[name]} qubits)"
                )
    return None


def load_qasm(text: str, limits: QASMLimits = QASMLimits()) -> QuantumCircuit:
    """Parse ``text`` (2.0, 3.0 or an LLM's mix of both) into a QuantumCircuit.

    Raises :class:`QASMError` with every attempt's reason when nothing parses.
    """
    if not isinstance(text, str):
        raise QASMError(f"expected text, got {type(text).__name__}")
    precheck_raw(text, limits)
    version, program = quirks.normalize(text)
    precheck_program(program, limits)
    attempts: list[tuple[int, str]] = [(version, program)]
    if version == 3:
        # Fallback: a program that only uses 3.0 declarations often parses as 2.0.
        attempts.append((2, quirks.with_header(quirks.qasm3_declarations_to_2(program), 2)))
    errors = []
    for v, prog in attempts:
        try:
            circuit = _parse(prog, v)
        except RecursionError:
            errors.append(f"OpenQASM {v}: nesting too deep")
            continue
        except Exception as exc:  # parser errors are many types (QASM2ParseError, QASM3ImporterError...)
            errors.append(f"OpenQASM {v}: {_describe(exc, prog)}")
            continue
        except BaseException as exc:  # pyo3 PanicException from the Rust parser
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            errors.append(f"OpenQASM {v}: parser panic {_describe(exc, prog)}")
            continue
        if circuit.num_qubits > limits.max_qubits:
            raise QASMError(f"circuit has {circuit.num_qubits} qubits (cap {limits.max_qubits})")
        return circuit
    raise QASMError("; ".join(errors))


def plain_qiskit_load(text: str) -> QuantumCircuit | None:
    r"""What plain Qiskit makes of a model's text, the baseline RubriQ's extraction is measured
    against (tests/test_extraction_property.py, benchmarks/bench_extraction.py): ``qasm3.loads``,
    then ``qasm2.loads`` with the legacy custom instructions, on the raw text and then on the first
    fenced block; the first circuit with at least one qubit (an empty block "parses" to none),
    else None.

    >>> plain_qiskit_load("```qasm\nOPENQASM 2.0;\ninclude \"qelib1.inc\";\nqreg q[1];\nh q[0];\n```").num_qubits
    1
    >>> plain_qiskit_load("```\n```") is None
    True
    """
    from qiskit import qasm2, qasm3

    candidates = [text]
    block = re.search(r"```[^\n]*\n(.*?)```", text, re.S)
    if block:
        candidates.append(block.group(1))
    loaders = (qasm3.loads, lambda t: qasm2.loads(t, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS))
    for candidate in candidates:
        for load in loaders:
            try:
                circuit = load(candidate)
            except Exception:  # noqa: BLE001 - any parser error means "Qiskit does not parse this"
                continue
            if circuit.num_qubits >= 1:
                return circuit
    return None
