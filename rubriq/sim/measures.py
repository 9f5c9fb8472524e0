"""The fidelity quantities RubriQ reads, each defined once (as Qiskit's
``quantum_info/operators/measures.py`` defines ``average_gate_fidelity`` once):

    F_avg = (d F_process + 1) / (d + 1)          (d = 2^n, the target's dimension)
    correct:  F_avg >= 1 - eps,  eps = 0.01       (the paper's F_avg >= 0.99)

:data:`CORRECT_THRESHOLD` is ``fidelity.correct_threshold``'s default (``rubriq/config.py``; a
config may set another), :data:`CORRECT_EPS` the same as a tolerance.  Every backend computes
F_avg with :func:`average_fidelity`, and every reading of "correct" goes through
:func:`meets_threshold` (``rubriq.evaluator.result.is_correct`` adds what else a correct result
needs: parsed, scored without error; the rubric's correctness gate reads F_avg the same way).
"""

from __future__ import annotations

from rubriq.config import FidelityConfig

CORRECT_THRESHOLD: float = FidelityConfig.correct_threshold
"""F_avg at or above which a circuit is functionally correct (the paper's 0.99); a config's
``fidelity.correct_threshold`` overrides it."""
CORRECT_EPS: float = round(1 - CORRECT_THRESHOLD, 12)
"""eps of "correct: F_avg >= 1 - eps" (0.01; the tolerance reports and metrics take as ``eps``)."""


def average_fidelity(process_fidelity: float, d: int) -> float:
    """F_avg = (d F_process + 1) / (d + 1) of a process fidelity in dimension ``d`` = 2^n (any
    n: computed as (F + 1/d) / (1 + 1/d), the same number in floating point, which needs no
    float of d).

    >>> average_fidelity(1.0, 4), average_fidelity(0.0, 4)
    (1.0, 0.2)
    >>> average_fidelity(0.5, 2**2000)  # a Clifford target of 2000 qubits: F_avg -> F_process
    0.5
    """
    inv_d = 1 / d
    return (process_fidelity + inv_d) / (1 + inv_d)


def meets_threshold(f_avg: float | None, threshold: float = CORRECT_THRESHOLD) -> bool:
    """Whether an average fidelity makes a circuit correct: F_avg >= ``threshold`` (1 - eps);
    None (no fidelity) never does.

    >>> meets_threshold(0.995), meets_threshold(0.989), meets_threshold(None)
    (True, False, False)
    """
    return f_avg is not None and f_avg >= threshold


__all__ = ["CORRECT_EPS", "CORRECT_THRESHOLD", "average_fidelity", "meets_threshold"]
