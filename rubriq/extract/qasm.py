"""Load OpenQASM 2.0 / 3.0 text into a QuantumCircuit, with caps checked before parsing.

Parsing goes through Qiskit: ``qiskit.qasm2.loads(..., include_path=())`` (no file system
access) and ``qiskit.qasm3.loads`` (package qiskit-qasm3-import).  Before either parser sees
the text, :func:`precheck_raw` and :func:`precheck_program` enforce limits that keep hostile input from allocating: size,
ASCII, includes, integer-literal length, and one bound on every size the text declares or
references (:func:`sizes`: qubits, hardware qubits ``$N``, classical bits, indices and ranges,
gate applications; loops are unrolled only within the size cap).  A parse runs within the
evaluation's deadline (:class:`~rubriq.budget.BudgetExceeded` past it).  The quirk rules of
``quirks.py`` recover the dialect mixes language models write.

>>> qc = load_qasm('OPENQASM 2.0; include "stdgates.inc"; qubit[2] q; h q[0]; cp(pi/2) q[0], q[1];')
>>> qc.num_qubits, [inst.operation.name for inst in qc.data]
(2, ['h', 'cp'])
"""

from __future__ import annotations

import ctypes
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from qiskit import QuantumCircuit

from rubriq.budget import NO_DEADLINE, BudgetExceeded, Deadline
from rubriq.extract import quirks


class QASMError(ValueError):
    """The text is not a loadable (or acceptable) OpenQASM program."""


class QASMLimitError(QASMError):
    """The text declares or references more than a cap of :class:`QASMLimits` allows (qubits,
    classical bits, gate applications, ...): refused before the parser allocates anything
    (the evaluator's ``error_type="limit"``)."""


class QASMDeadline(BaseException):
    """Raised in the parsing thread when the evaluation's deadline passes during a parse (a
    BaseException, so that no ``except Exception`` of a parser can swallow it)."""


@dataclass(frozen=True)
class QASMLimits:
    """Caps checked on QASM text before it is parsed: one bound on every size the text can
    declare or reference (see :func:`precheck_program`).

    ``max_gates`` None: ``max(200_000, max_bytes)`` (trusted callers raise ``max_bytes`` for
    large suite circuits; completions get ``extraction.max_gates``)."""

    max_bytes: int = 65536
    max_qubits: int = 64
    max_int_digits: int = 12
    max_nesting: int = 64
    max_controls: int = 16
    max_clbits: int = 1024
    max_gates: int | None = None

    @property
    def gate_cap(self) -> int:
        return self.max_gates if self.max_gates is not None else max(200_000, self.max_bytes)


_STANDARD_INCLUDES = {"qelib1.inc", "stdgates.inc"}
_INCLUDE_NAME = re.compile(r'include\s+"([^"\n]*)"')
_INT_LITERAL = re.compile(r"(?<![\w.])\d+(?![\w.])")  # integers, not the digits of floats or names
_STRING = re.compile(r'"[^"\n]*"')
_POW = re.compile(r"\bpow\s*\(")
_CTRL = re.compile(r"\b(?:neg)?ctrl\s*(?:\(\s*(\d+)\s*\))?\s*@")
# Every way OpenQASM 2/3 declares a register (sizes must be integer literals: a size computed by
# an expression, `bit[n]` with `const int n`, could not be bounded before parsing):
_REGISTER_2 = re.compile(r"\b(qreg|creg)\s+([A-Za-z_]\w*)\s*\[")
_REGISTER_3 = re.compile(r"\b(qubit|bit)\s*\[")
_LITERAL_SIZE = re.compile(r"\s*(\d+)\s*\]\s*([A-Za-z_]\w*)?")
"""What must follow a declaration's ``[``: an integer literal, ``]`` (and the register's name);
matched at that position only, so that the scan stays linear on any text."""
_SINGLE_3 = re.compile(r"\b(qubit|bit)\s+([A-Za-z_]\w*)\s*[;=]")
_HARDWARE_QUBIT = re.compile(r"\$(\d+)")
_ALIAS = re.compile(r"\blet\s+([A-Za-z_]\w*)\s*=")
_INNER_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_RANGE = re.compile(r"\[\s*(-?\d*)\s*:\s*(?:(-?\d+)\s*:\s*)?(-?\d*)\s*\]")


def precheck_raw(text: str, limits: QASMLimits) -> None:
    """Checks on the raw text, before any rewriting: size, NUL bytes, includes."""
    if len(text) > limits.max_bytes or len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes:
        raise QASMLimitError(f"QASM text larger than {limits.max_bytes} bytes")
    if "\x00" in text:
        raise QASMError("QASM text contains NUL bytes")
    for name in _INCLUDE_NAME.findall(text):
        if name not in _STANDARD_INCLUDES:
            raise QASMError(f"include {name!r} refused: only qelib1.inc and stdgates.inc are allowed")


def _declarations(pattern: re.Pattern[str], code: str) -> Iterator[tuple[str, str, int]]:
    """(kind, name or "", size) of every declaration ``pattern`` finds; a size that is not an
    integer literal is refused (an expression, ``bit[n]`` with ``const int n``, could not be
    bounded before parsing)."""
    for head in pattern.finditer(code):
        literal = _LITERAL_SIZE.match(code, head.end())
        if literal is None:
            got = code[head.end() : head.end() + 40].split("]")[0].strip()
            raise QASMLimitError(f"{head.group(1)} size must be an integer literal, got {got!r}")
        name = head.group(2) if head.lastindex == 2 else literal.group(2) or ""
        yield head.group(1), name, int(literal.group(1))


def sizes(program: str, limits: QASMLimits) -> dict[str, int]:
    """Every size ``program`` declares or references, checked against ``limits`` before any
    parser sees it; returns the totals (``qubits``, ``clbits``, ``gates``: an upper bound on the
    instructions a parser creates, broadcasts over whole registers and ranges included).

    Qiskit's importers allocate every qubit up to the highest hardware index (``$N``) and every
    bit of a ``creg``/``bit[N]`` at once, and broadcast ``h q;`` over the register: each is
    counted here, so that no short text can make the parser allocate more than the caps allow.

    >>> sizes('OPENQASM 3.0; qubit[3] q; bit[3] c; h q; c = measure q;', QASMLimits())
    {'qubits': 3, 'clbits': 3, 'gates': 20}
    >>> sizes('OPENQASM 3.0; h $1500000;', QASMLimits())
    Traceback (most recent call last):
    ...
    rubriq.extract.qasm.QASMLimitError: hardware qubit $1500000 referenced: 1500001 qubits (cap 64)
    """
    code = _STRING.sub('""', program)
    registers: dict[str, int] = {}
    qubits = clbits = 0
    for kind, name, n in _declarations(_REGISTER_2, code):
        registers[name] = n
        if kind == "qreg":
            qubits += n
        else:
            clbits += n
    for kind, name, n in _declarations(_REGISTER_3, code):
        if name:
            registers[name] = n
        if kind == "qubit":
            qubits += n
        else:
            clbits += n
    for kind, name in _SINGLE_3.findall(code):
        registers[name] = 1
        if kind == "qubit":
            qubits += 1
        else:
            clbits += 1
    hardware = [int(n) for n in _HARDWARE_QUBIT.findall(code)]
    if hardware:
        highest = max(hardware)
        if qubits + highest + 1 > limits.max_qubits:
            raise QASMLimitError(
                f"hardware qubit ${highest} referenced: {qubits + highest + 1} qubits (cap {limits.max_qubits})"
            )
        qubits += highest + 1
    if qubits > limits.max_qubits:
        raise QASMLimitError(f"{qubits} qubits declared (cap {limits.max_qubits})")
    if clbits > limits.max_clbits:
        raise QASMLimitError(f"{clbits} classical bits declared (cap {limits.max_clbits})")
    # An index, a range, a loop range or a classical type's width (int[N], float[N], ...): no
    # integer in square brackets may pass the larger register cap (an index past its register is
    # the parser's error, but a range or a width must never be what a parser sizes a list by).
    index_cap = max(limits.max_qubits, limits.max_clbits)
    for inside in _INNER_BRACKETS.findall(code):
        for literal in _INT_LITERAL.findall(inside):
            if int(literal) > index_cap:
                raise QASMLimitError(
                    f"[{inside.strip()[:40]}]: {literal} is past every register a program may declare "
                    f"(caps: {limits.max_qubits} qubits, {limits.max_clbits} classical bits)"
                )
    # Gate applications: one per statement, plus a whole register (or an alias, which may hold
    # every declared bit) for each reference by bare name, plus each range's length.
    for alias in _ALIAS.findall(code):
        registers[alias] = qubits + clbits
    gates = code.count(";")
    if registers:
        bare = re.compile(r"\b(" + "|".join(map(re.escape, registers)) + r")\b(?!\s*\[)")
        gates += sum(registers[name] for name in bare.findall(code))
    for start, step, stop in _RANGE.findall(code):
        span = abs(int(stop or index_cap) - int(start or 0)) // max(1, abs(int(step or 1))) + 1
        gates += min(span, index_cap)
    if gates > limits.gate_cap:
        raise QASMLimitError(
            f"up to {gates} gate applications (statements, broadcasts over registers and ranges; cap {limits.gate_cap})"
        )
    return {"qubits": qubits, "clbits": clbits, "gates": gates}


def precheck_program(program: str, limits: QASMLimits) -> None:
    """Checks on the normalized program, before the parser allocates anything: ASCII, integer
    literals, every declared or referenced size (:func:`sizes`), nesting, modifiers."""
    code = _STRING.sub('""', program)  # non-ASCII is fine in string literals (and comments, gone by now)
    if not code.isascii():
        bad = next(ch for ch in code if not ch.isascii())
        line = code[: code.index(bad)].count("\n") + 1
        raise QASMError(f"line {line}: non-ASCII character {bad!r} outside a comment or string")
    for literal in _INT_LITERAL.findall(program):
        if len(literal) > limits.max_int_digits:
            raise QASMLimitError(f"integer literal with {len(literal)} digits (cap {limits.max_int_digits})")
    depth = deepest = 0
    for ch in program:
        if ch in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limits.max_nesting:
                    raise QASMLimitError(f"brackets nested deeper than {limits.max_nesting}")
        elif ch in ")]}":
            depth -= 1
    sizes(program, limits)
    if _POW.search(program):
        raise QASMError("pow() gate modifiers are not supported (their matrix powers are unbounded in cost)")
    for statement in program.split(";"):
        controls = sum(int(k or 1) for k in _CTRL.findall(statement))
        if controls > limits.max_controls:
            raise QASMLimitError(f"{controls} control qubits in one gate (cap {limits.max_controls})")


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


class _Watchdog:
    """Raises :class:`QASMDeadline` in the thread that parses when ``seconds`` pass.

    Qiskit's OpenQASM 3 importer is pure Python (an ANTLR parser) and takes no deadline, and the
    evaluation's budget must hold while it runs; the interpreter's own mechanism for raising in
    another thread (``PyThreadState_SetAsyncExc``) stops it at its next bytecode.  Hand-written:
    the libraries that wrap the same call (func_timeout, stopit) are unmaintained, and neither
    clears an exception still pending when the parse ends just as the deadline passes, which this
    does under one lock.  The Rust OpenQASM 2 parser only notices once it returns; its input is
    bounded by the caps above."""

    def __init__(self, seconds: float) -> None:
        self._thread = threading.get_ident()
        self._lock = threading.Lock()
        self._done = self.fired = False
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if not self._done:
                self.fired = True
                _async_raise(self._thread, QASMDeadline)

    def stop(self) -> bool:
        """Stop watching; True when the deadline passed (a still pending exception is cleared)."""
        self._timer.cancel()
        with self._lock:
            self._done = True
            if self.fired:
                _async_raise(self._thread, None)
        return self.fired


def _async_raise(thread: int, exc: type[BaseException] | None) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exc) if exc else None)


def _parse_within(prog: str, version: int, deadline: Deadline) -> QuantumCircuit:
    remaining = deadline.remaining()
    if remaining is None:
        return _parse(prog, version)
    deadline.check("QASM parsing")
    try:
        dog = _Watchdog(remaining)
        try:
            circuit = _parse(prog, version)
        finally:
            fired = dog.stop()
    except QASMDeadline:
        fired = True
    if fired:
        raise BudgetExceeded(f"time budget of {deadline.seconds:g} s exhausted during QASM parsing")
    return circuit


def load_qasm(text: str, limits: QASMLimits = QASMLimits(), deadline: Deadline = NO_DEADLINE) -> QuantumCircuit:
    """Parse ``text`` (2.0, 3.0 or an LLM's mix of both) into a QuantumCircuit.

    Raises :class:`QASMError` with every attempt's reason when nothing parses,
    :class:`QASMLimitError` when the text passes a cap of ``limits`` (before anything is parsed),
    and :class:`~rubriq.budget.BudgetExceeded` when ``deadline`` passes while parsing.
    """
    if not isinstance(text, str):
        raise QASMError(f"expected text, got {type(text).__name__}")
    precheck_raw(text, limits)
    try:
        version, program = quirks.normalize(text, limits.max_bytes)
    except quirks.ExpansionTooLarge as exc:
        raise QASMLimitError(str(exc)) from None
    precheck_program(program, limits)
    attempts: list[tuple[int, str]] = [(version, program)]
    if version == 3:
        # Fallback: a program that only uses 3.0 declarations often parses as 2.0.
        fallback = quirks.with_header(quirks.qasm3_declarations_to_2(program), 2)
        precheck_program(fallback, limits)
        attempts.append((2, fallback))
    errors = []
    for v, prog in attempts:
        try:
            circuit = _parse_within(prog, v, deadline)
        except BudgetExceeded:
            raise
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
            raise QASMLimitError(f"circuit has {circuit.num_qubits} qubits (cap {limits.max_qubits})")
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
