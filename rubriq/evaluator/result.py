"""The result of evaluating one completion."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from qiskit import QuantumCircuit

ZERO_SCORES = {"clifford": 0.0, "tcount": 0.0, "hardware": 0.0, "fidelity": 0.0, "efficiency": 0.0}


@dataclass
class EvaluationResult:
    """Everything the rubric found about one completion; ``to_dict()`` is JSON-ready.

    ``error_type`` is None on success, else one of:
    ``parse`` (no strategy produced a circuit), ``unsupported`` (control flow, opaque gates,
    caps), ``simulation`` (fidelity above the exact caps), ``budget`` (time or memory budget
    of the evaluation exhausted), ``sandbox`` (the Python sandbox itself failed: a worker could
    not start or died, or an isolation layer is missing in strict mode; not the model's
    fault), ``internal`` (a bug: please report).
    Any error gives reward 0 and all-zero scores.
    """

    reward: float = 0.0
    parsed: bool = False
    strategy: str | None = None
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

    @property
    def correct(self) -> bool:
        """F_avg >= 0.99 (the paper's correctness threshold)."""
        return self.average_fidelity is not None and self.average_fidelity >= 0.99

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "circuit"}
        return _jsonable(out)


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
