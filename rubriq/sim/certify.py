"""Certified equivalence with mqt.qcec (decision diagrams and ZX-calculus).

Returns a verdict instead of a number: ``equivalent`` (up to global phase), ``not_equivalent``,
or ``unknown`` (qcec gave no proof, e.g. a timeout).  Used by the ``qcec`` fidelity backend
(a certified verdict short-circuits simulation for wide structured circuits) and by the
baselines, which must never count an unverified output as compression.

>>> from qiskit import QuantumCircuit
>>> a = QuantumCircuit(2); _ = a.h(0); _ = a.cx(0, 1)
>>> b = QuantumCircuit(2); _ = b.h(0); _ = b.cx(0, 1); _ = b.z(0); _ = b.z(0)
>>> certify(a, b).verdict
'equivalent'
"""

from __future__ import annotations

from dataclasses import dataclass

from qiskit import QuantumCircuit


@dataclass(frozen=True)
class Verdict:
    verdict: str
    """'equivalent', 'not_equivalent' or 'unknown'."""
    detail: str
    seconds: float


def certify(a: QuantumCircuit, b: QuantumCircuit, timeout_s: float = 60.0) -> Verdict:
    """Decide whether ``a`` and ``b`` implement the same unitary up to global phase."""
    try:
        from mqt import qcec
    except ImportError:
        from rubriq.sim.torch_backend import BackendUnavailable

        raise BackendUnavailable("certified equivalence needs mqt.qcec: pip install mqt.qcec") from None
    import time

    from rubriq.rubric.gates import strip_non_unitary

    start = time.perf_counter()
    result = qcec.verify(strip_non_unitary(a), strip_non_unitary(b), timeout=timeout_s)
    name = str(result.equivalence).rsplit(".", 1)[-1]
    if name in ("equivalent", "equivalent_up_to_global_phase"):
        verdict = "equivalent"
    elif name == "not_equivalent":
        verdict = "not_equivalent"
    else:  # probably_equivalent, probably_not_equivalent, no_information, timeout
        verdict = "unknown"
    return Verdict(verdict, name, time.perf_counter() - start)
