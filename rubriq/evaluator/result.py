"""The result of evaluating one completion."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qiskit import QuantumCircuit

from rubriq.rubric.engine import DIMENSION_NAMES
from rubriq.sim.measures import CORRECT_THRESHOLD, meets_threshold

ZERO_SCORES = dict.fromkeys(DIMENSION_NAMES, 0.0)
TRANSIENT_ERRORS = frozenset({"budget", "sandbox"})
"""Error types that describe the machine at that moment (a busy or broken sandbox, a time budget
spent under load) more than the completion: never cached, so the same text is scored again."""


@dataclass
class EvaluationResult:
    """Everything the rubric found about one completion; ``to_dict()`` is JSON-ready.

    ``error_type`` is None on success, else one of:
    ``parse`` (no strategy produced a circuit), ``unsupported`` (control flow, opaque gates,
    caps), ``limit`` (the QASM text declares or references more than a cap of
    ``extraction``: qubits, classical bits, gate applications, size; refused before parsing), ``simulation`` (fidelity above the exact caps), ``budget`` (time or memory budget
    of the evaluation exhausted, a Python completion that ran until its deadline, or one that
    waited its whole time for a free sandbox slot), ``sandbox`` (the Python sandbox itself
    failed: a worker could not start or died, or an isolation layer is missing in strict mode;
    not the model's fault), ``internal`` (a bug: please report).  ``budget`` and ``sandbox``
    results are never cached (:data:`TRANSIENT_ERRORS`).
    Any error gives reward 0 and all-zero scores.
    """

    reward: float = 0.0
    parsed: bool = False
    strategy: str | None = None
    strategy_detail: str | None = None
    """How the strategy found the circuit, where it had a choice (Python: which rule of
    docs/extraction.md and how, e.g. ``zero_arg_function: returned by calling build_bell() (the
    only module-level function that needs no arguments)``)."""
    error: str | None = None
    error_type: str | None = None
    scores: dict[str, float] = field(default_factory=lambda: dict(ZERO_SCORES))
    weights: dict[str, float] = field(default_factory=dict)
    t_count: int | None = None
    process_fidelity: float | None = None
    average_fidelity: float | None = None
    fidelity_kind: str | None = None
    fidelity_method: str | None = None
    """exact, sampled, qcec, torch:DEVICE or cudaq."""
    fidelity_interval: tuple[float, float] | None = None
    """Confidence interval of F_process when it was estimated by sampling."""
    fidelity_verdict: str | None = None
    """Certified equivalence with the target (mqt.qcec): equivalent, not_equivalent or unknown;
    None when the target is not certified (synthesis targets under the default backend)."""
    fidelity_note: str | None = None
    """How the fidelity came about when not by plain simulation (certification, F set to 0)."""
    depth: int | None = None
    num_qubits: int | None = None
    num_gates: int | None = None
    gate_counts: dict[str, int] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    best_backend: str | None = None
    target: dict[str, Any] = field(default_factory=dict)
    sandbox: dict[str, Any] | None = None
    """For a circuit built by sandboxed Python: ``{"missing": {layer: why}}`` (empty: every
    isolation layer of SECURITY.md held for this completion)."""
    circuit: QuantumCircuit | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values (no circuit; NaN and inf become None)."""
        out = {k: v for k, v in self.__dict__.items() if k != "circuit"}
        return _jsonable(out)


def is_correct(result: EvaluationResult | Mapping[str, Any], threshold: float = CORRECT_THRESHOLD) -> bool:
    """Functionally correct: parsed, scored without error, and F_avg >= ``threshold`` (a result
    or its ``to_dict()``; an unparsed or unscored completion is never correct).  The one
    definition of "correct" in RubriQ: metrics, rewards, reports, the CLI and the app use it.

    >>> is_correct({"parsed": True, "error_type": None, "average_fidelity": 0.995})
    True
    >>> is_correct({"parsed": True, "error_type": None, "average_fidelity": 0.989}), is_correct({"parsed": False})
    (False, False)
    """
    if isinstance(result, EvaluationResult):
        result = {"parsed": result.parsed, "error_type": result.error_type, "average_fidelity": result.average_fidelity}
    f_avg = result.get("average_fidelity")
    return bool(result.get("parsed")) and result.get("error_type") is None and meets_threshold(f_avg, threshold)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def is_cacheable(result: EvaluationResult) -> bool:
    """Whether ``result`` is a deterministic outcome of its text (anything but a transient error).

    >>> is_cacheable(EvaluationResult(error_type="parse")), is_cacheable(EvaluationResult(error_type="budget"))
    (True, False)
    """
    return result.error_type not in TRANSIENT_ERRORS
