"""The extraction cascade: raw completion text -> QuantumCircuit (paper section III-A).

Strategies are small functions ``(text, config, deadline) -> QuantumCircuit`` tried in
priority order; the first that yields a circuit with at least one qubit wins:

1. ``direct_qasm``: the text contains an ``OPENQASM`` header; the program runs from the
   header to the end of the text or the next code fence;
2. ``fenced_block``: Markdown code blocks (```qasm, ```openqasm, ```python, untagged), in
   order; the first block that yields a circuit wins (QASM blocks are loaded, Python blocks
   executed in the sandbox);
3. ``python_code``: the whole text as Qiskit-Python code, executed out of process.

Python runs in the sandbox with one time budget per completion: every Python block of the text
and the whole-text attempt share ``python_timeout_s`` of wall-clock, counted from the start of
the extraction (and never past the evaluation's own deadline).

A strategy raises ``NotApplicable`` when it does not apply and any other error when it
applies but fails; the
reasons of every failure are kept so that a reward of 0 always comes with an explanation.

>>> result = extract("Here you go:\\n```qasm\\nOPENQASM 2.0;\\ninclude \\"qelib1.inc\\";\\nqreg q[1];\\nh q[0];\\n```")
>>> result.strategy, result.circuit.num_qubits
('direct_qasm', 1)
>>> extract("I cannot help with that.").error
'direct_qasm: no OPENQASM header; fenced_block: no code block; python_code: no Qiskit code'
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from qiskit import QuantumCircuit

from rubriq.budget import NO_DEADLINE, BudgetExceeded, Deadline
from rubriq.config import ExtractionConfig
from rubriq.extract.qasm import QASMLimitError, QASMLimits, load_qasm
from rubriq.extract.sandbox import (
    FOUND_METADATA,
    SANDBOX_METADATA,
    PythonTimeout,
    PythonUnsupported,
    SandboxBusy,
    SandboxUnavailable,
    run_python,
)

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_QASM_TAGS = {"qasm", "openqasm", "qasm2", "qasm3", "openqasm2", "openqasm3"}
_PYTHON_TAGS = {"python", "py", "python3"}
_QASM_HINT = re.compile(r"OPENQASM|\bqreg\b|\bqubit\b")
_PYTHON_HINT = re.compile(r"\bQuantumCircuit\s*\(")


class NotApplicable(Exception):
    """The strategy does not apply to this text (reason in the message)."""


@dataclass
class Extraction:
    """What the cascade found: the circuit and the strategy that produced it, or every strategy's reason."""

    circuit: QuantumCircuit | None
    strategy: str | None
    attempts: list[tuple[str, str]] = field(default_factory=list)
    """(strategy, reason) for each strategy that did not produce the circuit."""
    sandbox_error: str | None = None
    """Set when the sandbox itself failed (not the completion): the evaluator's ``sandbox`` error."""
    budget_error: str | None = None
    """Set when Python ran out of its time (running, or waiting for a job slot): the evaluator's
    ``budget`` error (not cached: it depends on the machine's load)."""
    unsupported_error: str | None = None
    """Set when Python built a circuit without a fixed unitary: the evaluator's ``unsupported``."""
    limit_error: str | None = None
    """Set when QASM passed a cap of :class:`~rubriq.extract.qasm.QASMLimits` (qubits, classical
    bits, gate applications, size ...): the evaluator's ``limit``."""
    detail: str | None = None
    """How the strategy found the circuit (for Python: which rule of harness.py, e.g.
    ``zero_arg_function: returned by calling build_bell() (...)``)."""
    sandbox: dict | None = None
    """For a circuit built by Python: {"missing": {layer: why}} (empty when every layer held)."""

    @property
    def error(self) -> str | None:
        if self.circuit is not None:
            return None
        return "; ".join(f"{name}: {reason}" for name, reason in self.attempts)


def _limits(cfg: ExtractionConfig) -> QASMLimits:
    return QASMLimits(
        max_bytes=cfg.max_qasm_bytes,
        max_qubits=cfg.max_qubits,
        max_nesting=cfg.max_nesting,
        max_controls=cfg.max_controls,
        max_clbits=cfg.max_clbits,
        max_gates=cfg.max_gates,
    )


class PythonDeadline(Deadline):
    """The Python sandbox's deadline of one completion (``python_timeout_s`` from the start of its
    extraction, within the evaluation's), which knows the evaluation's deadline: QASM parsing and
    the checks between fenced blocks use that one."""

    def __init__(self, evaluation: Deadline, seconds: float) -> None:
        sub = evaluation.within(seconds)
        super().__init__(sub.seconds)
        self.end, self.evaluation = sub.end, evaluation


def _budgets(deadline: Deadline) -> tuple[Deadline, Deadline]:
    """(the evaluation's deadline, the completion's shared Python deadline) of a strategy's
    ``deadline`` argument (:func:`extract` passes a :class:`PythonDeadline`)."""
    return (deadline.evaluation if isinstance(deadline, PythonDeadline) else deadline), deadline


def direct_qasm(text: str, cfg: ExtractionConfig, deadline: Deadline = NO_DEADLINE) -> QuantumCircuit:
    """The program from the ``OPENQASM`` header to the end of the text or the next code fence."""
    start = text.find("OPENQASM")
    if start < 0:
        raise NotApplicable("no OPENQASM header")
    program = text[start:]
    end = program.find("```")
    if end >= 0:
        program = program[:end]
    return load_qasm(program, _limits(cfg), _budgets(deadline)[0])


def fenced_block(text: str, cfg: ExtractionConfig, deadline: Deadline = NO_DEADLINE) -> QuantumCircuit:
    """The first Markdown code block that yields a circuit (QASM loaded, Python run in the sandbox)."""
    blocks = _FENCE.findall(text)
    if not blocks:
        raise NotApplicable("no code block")
    evaluation, python = _budgets(deadline)
    errors, timed_out, unsupported, limited = [], False, False, False
    for i, (tag, body) in enumerate(blocks, 1):
        evaluation.check(f"extraction (before block {i} of {len(blocks)})")  # the blocks share the budget
        tag = tag.lower()
        try:
            if tag in _QASM_TAGS or (not tag and _QASM_HINT.search(body)):
                return load_qasm(body, _limits(cfg), evaluation)
            if tag in _PYTHON_TAGS or (not tag and _PYTHON_HINT.search(body)):
                if not cfg.allow_python:
                    raise ValueError("Python execution is disabled")
                return run_python(body, cfg, python.remaining())
            errors.append(f"block {i} ({tag or 'untagged'}): neither QASM nor Qiskit Python")
        except (SandboxUnavailable, SandboxBusy, BudgetExceeded):
            raise
        except Exception as exc:
            timed_out |= isinstance(exc, PythonTimeout)
            unsupported |= isinstance(exc, PythonUnsupported)
            limited |= isinstance(exc, QASMLimitError)
            errors.append(f"block {i} ({tag or 'untagged'}): {exc}")
    kind = (
        PythonTimeout if timed_out else PythonUnsupported if unsupported else QASMLimitError if limited else ValueError
    )
    raise kind(" | ".join(errors))


def python_code(text: str, cfg: ExtractionConfig, deadline: Deadline = NO_DEADLINE) -> QuantumCircuit:
    """The whole text as Qiskit Python, run in the sandbox."""
    if not _PYTHON_HINT.search(text):
        raise NotApplicable("no Qiskit code")
    if not cfg.allow_python:
        raise NotApplicable("Python execution is disabled")
    return run_python(text, cfg, _budgets(deadline)[1].remaining())


STRATEGIES: tuple[tuple[str, Callable[[str, ExtractionConfig, Deadline], QuantumCircuit]], ...] = (
    ("direct_qasm", direct_qasm),
    ("fenced_block", fenced_block),
    ("python_code", python_code),
)


# A strategy's expected failures, the first class that matches: the Extraction field that keeps
# its message besides the attempt (None: the attempt only), and whether the later strategies are
# skipped (a busy sandbox pool: they would wait for the same pool).
_FAILURES: tuple[tuple[type[Exception], str | None, bool], ...] = (
    (NotApplicable, None, False),
    (SandboxUnavailable, "sandbox_error", False),
    (SandboxBusy, "budget_error", True),
    (PythonTimeout, "budget_error", False),
    (PythonUnsupported, "unsupported_error", False),
    (QASMLimitError, "limit_error", False),
)


def extract(text: str, cfg: ExtractionConfig = ExtractionConfig(), deadline: Deadline = NO_DEADLINE) -> Extraction:
    """Run the cascade on ``text``; never raises for any string (BudgetExceeded aside)."""
    result = Extraction(circuit=None, strategy=None)
    if not isinstance(text, str):
        result.attempts.append(("input", f"expected a string, got {type(text).__name__}"))
        return result
    # One sandbox time budget per completion: its Python blocks (and the whole-text attempt)
    # share python_timeout_s of wall-clock from here, so that several blocks cannot each take it.
    sandbox_deadline = PythonDeadline(deadline, cfg.python_timeout_s)
    for name, strategy in STRATEGIES:
        deadline.check("extraction")
        try:
            circuit = strategy(text, cfg, sandbox_deadline)
        except tuple(cls for cls, _, _ in _FAILURES) as exc:
            noted, stop = next((noted, stop) for cls, noted, stop in _FAILURES if isinstance(exc, cls))
            result.attempts.append((name, str(exc)))
            if noted is not None:
                setattr(result, noted, str(exc))
            if stop:
                break
            continue
        except BudgetExceeded:
            raise
        except Exception as exc:
            result.attempts.append((name, str(exc) or type(exc).__name__))
            continue
        except BaseException as exc:  # pyo3 PanicException and the like; never Ctrl-C
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            result.attempts.append((name, f"{type(exc).__name__}: {exc}"))
            continue
        if circuit is not None and circuit.num_qubits >= 1:
            result.circuit, result.strategy = circuit, name
            if SANDBOX_METADATA in (circuit.metadata or {}):
                result.sandbox = {"missing": circuit.metadata[SANDBOX_METADATA]}
                result.detail = circuit.metadata.get(FOUND_METADATA) or None
            return result
        result.attempts.append((name, "circuit has no qubits"))
    return result
