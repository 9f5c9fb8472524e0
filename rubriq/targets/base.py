"""What a target is: an analytic unitary or state, its prompt, and a reference circuit.

Conventions shared by every target (and stated in every prompt):

* Qiskit's little-endian order: qubit q[k] is bit k of the basis-state index, so the
  basis state |x> has q[k] = (x >> k) & 1;
* unitary targets are compared up to a global phase; extra qubits are clean ancillas.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from qiskit import QuantumCircuit

SYSTEM_PROMPT = (
    "You are an expert in quantum circuit synthesis and compilation. Given a specification, "
    "write a quantum circuit that implements it exactly. Optimize it: prefer Clifford gates, "
    "use as few T gates and arbitrary-angle rotations as possible, keep the depth low, and "
    "keep it executable on IBM heavy-hex and IonQ all-to-all hardware. Reply with the circuit "
    "only, in a single fenced code block, without measurements."
)

OUTPUT_FORMATS = {
    "qasm2": 'OpenQASM 2.0 (header `OPENQASM 2.0;`, `include "qelib1.inc";`) in a ```qasm block',
    "qasm3": 'OpenQASM 3.0 (header `OPENQASM 3.0;`, `include "stdgates.inc";`) in a ```qasm block',
    "python": "Qiskit Python in a ```python block that builds a QuantumCircuit named `qc` "
    "(import only qiskit, numpy and math; do not run or measure it)",
}

COMPACT_FORMATS = {
    "qasm2": "OpenQASM 2.0 with qelib1.inc in a ```qasm block",
    "qasm3": "OpenQASM 3.0 with stdgates.inc in a ```qasm block",
    "python": "Qiskit Python building QuantumCircuit `qc` in a ```python block",
}

MINIMAL_FORMATS = {
    "qasm2": "OpenQASM 2.0 in a ```qasm block",
    "qasm3": "OpenQASM 3.0 in a ```qasm block",
    "python": "Qiskit Python building `qc` in a ```python block",
}

COMPACT_CONVENTION = "Little-endian: q[k] is bit k. Equal up to global phase."

CONVENTION = (
    "Use Qiskit's little-endian qubit order: qubit q[k] is bit k of the basis-state index "
    "(|x> has q[k] = (x >> k) & 1). The circuit is compared with the target up to a global phase; "
    "any qubits beyond the target's are ancillas that start in |0> and must be returned to |0>."
)


class TargetError(ValueError):
    """Unknown target or invalid target parameters."""


class Target(ABC):
    """A synthesis target; subclasses define ``name``, ``kind`` and the three builders."""

    name: ClassVar[str]
    family: ClassVar[str]
    kind: ClassVar[str]  # "unitary" or "state"
    summary: ClassVar[str]
    parameters: ClassVar[dict[str, str]] = {}
    """Extra parameters (besides num_qubits) and what they mean, for `rubriq targets`."""
    min_qubits: ClassVar[int] = 1
    max_qubits: ClassVar[int] = 12
    max_dense_qubits: ClassVar[int] = 14
    """Largest width for which ``unitary()`` builds the dense 2^n x 2^n matrix."""
    reference_is_exact: ClassVar[bool] = True
    """Whether ``reference_circuit()`` implements the target exactly (certified backends)."""
    max_dense_state_qubits: ClassVar[int] = 26
    """Largest width for which ``state()`` builds the dense 2^n state vector."""
    default_qubits: ClassVar[int | None] = None
    """Width used when ``make_target`` gets no ``num_qubits`` (fixed-width gates: Toffoli 3)."""

    def __init__(self, num_qubits: int, **params: Any) -> None:
        if not isinstance(num_qubits, int) or isinstance(num_qubits, bool):
            raise TargetError(f"{self.name}: num_qubits must be an integer, got {num_qubits!r}")
        if not self.min_qubits <= num_qubits <= self.max_qubits:
            raise TargetError(
                f"{self.name}: num_qubits must lie in [{self.min_qubits}, {self.max_qubits}], got {num_qubits}"
            )
        unknown = set(params) - set(self.parameters)
        if unknown:
            raise TargetError(
                f"{self.name}: unknown parameter(s) {sorted(unknown)}; known: {sorted(self.parameters) or 'none'}"
            )
        self.num_qubits = num_qubits
        self.params = self._validate(dict(params))

    # -- to implement -------------------------------------------------------------------
    def _validate(self, params: dict[str, Any]) -> dict[str, Any]:
        """Fill defaults, check values; return JSON-ready parameters."""
        return params

    @abstractmethod
    def description(self) -> str:
        """What to build, with the target's own conventions (one paragraph)."""

    @classmethod
    def default_width(cls, params: dict[str, Any]) -> int | None:
        """The width ``make_target`` uses when it gets no ``num_qubits`` (None: it must be given)."""
        return cls.default_qubits

    def short_description(self) -> str:
        """The compact prompt's statement of the task (one or two sentences); defaults to
        :meth:`description`."""
        return self.description()

    def minimal_description(self) -> str:
        """The minimal prompt's statement of the task; defaults to :meth:`short_description`."""
        return self.short_description()

    def clifford(self):
        """The target as a Clifford, or None when it is not one (the default).

        Unitary targets: a ``qiskit.quantum_info.Clifford`` equal to the target unitary up to a
        global phase.  State targets: a Clifford C with C|0...0> = the target state up to a
        phase (a stabilizer state).  Candidates for such targets that are Clifford circuits
        themselves are scored exactly from stabilizer tableaux at any width
        (``rubriq.sim.clifford``)."""
        return None

    def completion_size(self) -> tuple[int, int] | None:
        """(QASM bytes, canonical gates) a correct completion may need beyond the extraction
        defaults, or None; wide targets (a 100-qubit Clifford) say so here so that the
        evaluator's caps let a correct answer in."""
        return None

    @abstractmethod
    def _build_reference(self) -> QuantumCircuit: ...

    def _build_unitary(self) -> np.ndarray:
        raise NotImplementedError

    def _build_state(self) -> np.ndarray:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        return 2**self.num_qubits

    @functools.cached_property
    def _unitary(self) -> np.ndarray:
        u = np.asarray(self._build_unitary(), dtype=complex)
        u.setflags(write=False)
        return u

    @functools.cached_property
    def _state(self) -> np.ndarray:
        psi = np.asarray(self._build_state(), dtype=complex).reshape(-1)
        psi = psi / np.linalg.norm(psi)
        psi.setflags(write=False)
        return psi

    def unitary(self) -> np.ndarray:
        """The target unitary (read-only, computed once)."""
        self._check_dense(
            "unitary", "state-preparation", self.max_dense_qubits, "; use apply() (the sampled fidelity estimator does)"
        )
        return self._unitary

    def apply(self, states: np.ndarray, deadline=None) -> np.ndarray:
        """U_A applied to the columns of ``states`` (shape (2^n, k)); ``deadline`` (a
        :class:`rubriq.budget.Deadline`) is checked by targets whose ``apply`` can run long.

        Dense matrix product by default; targets with structure (QFT: FFT, QPE, Hamiltonians:
        sparse expm_multiply, circuits: simulation) override it so that the sampled fidelity
        estimator works far beyond the dense limit.
        """
        return self.unitary() @ states

    def state(self) -> np.ndarray:
        """The target state (read-only, computed once)."""
        self._check_dense(
            "state",
            "unitary",
            self.max_dense_state_qubits,
            " (Clifford candidates of a stabilizer-state target are scored from tableaux)",
        )
        return self._state

    def _check_dense(self, kind: str, other: str, limit: int, instead: str) -> None:
        """``TargetError`` unless this is a ``kind`` target (not an ``other`` one) of at most
        ``limit`` qubits, whose dense ``kind`` may be built (``instead``: what to do beyond)."""
        if self.kind != kind:
            raise TargetError(f"{self.name} is a {other} target")
        if self.num_qubits > limit:
            raise TargetError(f"{self.name}: no dense {kind} above {limit} qubits{instead}")

    def reference_circuit(self) -> QuantumCircuit:
        """A circuit implementing the target (see each target for its exactness)."""
        return self._reference.copy()

    @functools.cached_property
    def _reference(self) -> QuantumCircuit:
        return self._build_reference()

    @functools.cached_property
    def t0(self) -> int:
        """T-count of the reference circuit under the rubric's gate table."""
        from rubriq.circuit.gates import canonical_ops
        from rubriq.circuit.tcount import t_count

        return t_count(canonical_ops(self._reference))

    def spec(self) -> dict[str, Any]:
        """JSON spec from which :func:`rubriq.targets.target_from_spec` rebuilds the target."""
        return {"algorithm": self.name, "num_qubits": self.num_qubits, **self.params}

    def prompt(self, output_format: str = "qasm2", style: str = "full") -> list[dict[str, str]]:
        """The chat prompt for this target: ``full`` (system + user, as in the paper),
        ``compact`` (one short user message, ~1/3 of the tokens: for CPU runs, where every
        prompt token is paid for at each GRPO step) or ``minimal`` (an empty system message, which
        keeps a chat template's default system prompt out, and the task in the fewest words:
        27% fewer tokens than compact for the small rewrites of rubriq.data.rewrites)."""
        if output_format not in OUTPUT_FORMATS:
            raise TargetError(f"unknown output format {output_format!r}; use one of {sorted(OUTPUT_FORMATS)}")
        if style == "minimal":
            return [
                {"role": "system", "content": ""},
                {"role": "user", "content": f"{self.minimal_description()} Reply in {MINIMAL_FORMATS[output_format]}."},
            ]
        if style == "compact":
            return [
                {
                    "role": "user",
                    "content": f"{self.short_description()} {COMPACT_CONVENTION} Reply with "
                    f"{COMPACT_FORMATS[output_format]} only.",
                }
            ]
        if style != "full":
            raise TargetError(f"unknown prompt style {style!r}; use 'full', 'compact' or 'minimal'")
        user = (
            f"{self.description()} {CONVENTION} Minimize the T-count, then the depth. "
            f"Output format: {OUTPUT_FORMATS[output_format]}."
        )
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}(num_qubits={self.num_qubits}{', ' if args else ''}{args})"


def check_number(name: str, value: Any, low: float = -math.inf, high: float = math.inf) -> float:
    """``value`` as a float, or ``TargetError`` when it is not a finite number in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TargetError(f"{name} must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise TargetError(f"{name} must lie in [{low}, {high}], got {value}")
    return float(value)


def bit_reversal(n: int) -> np.ndarray:
    """Permutation p with p[x] = x with its n bits reversed."""
    x = np.arange(2**n)
    r = np.zeros_like(x)
    for k in range(n):
        r |= ((x >> k) & 1) << (n - 1 - k)
    return r


def reference_clifford(target: Target) -> Any:
    """The ``qiskit.quantum_info.Clifford`` of ``target``'s reference circuit (a target whose
    reference is a Clifford circuit: ``_clifford = functools.cached_property(reference_clifford)``)."""
    from qiskit.quantum_info import Clifford

    return Clifford(target._reference)


def completion_for(gates: int, slack: int = 0) -> tuple[int, int]:
    """A :meth:`Target.completion_size` for a correct completion of about ``gates`` gates: 40
    QASM bytes a gate plus 200, and 4 canonical gates a gate plus ``slack``."""
    return (40 * gates + 200, 4 * gates + slack)
