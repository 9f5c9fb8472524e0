"""The core layer: what a circuit is to RubriQ, below every other package.

- ``gates.py``: the gate table (Clifford / T / rotation / Toffoli-like), :class:`Op`,
  :func:`canonical_ops` (any Qiskit circuit -> a flat list over the table), ``STANDARD_GATES``
  (Qiskit's standard gates by name), the stripped non-unitary instructions;
- ``facts.py``: :class:`CircuitFacts`, what every rubric dimension reads, computed once;
- ``backends.py``: the hardware backend catalog (qubits, coupling maps, native gates, error
  rates), read by the rubric's S_H and by the hardware pipeline alike;
- ``tcount.py``: :func:`t_count` T(c) and the per-gate T cost (the rubric's S_T, the targets' T0,
  the suites, the datasets and the baselines all count with it);
- ``layout.py``: :func:`with_layout_applied`, a compiled circuit with its transpiler layout made
  explicit as swaps (baseline outputs, answers that return ``transpile(...)``).

Nothing here imports a RubriQ package outside the core layer (tests/test_layers.py).
"""

from rubriq.circuit.gates import (
    STANDARD_GATES,
    STRIPPED_INSTRUCTIONS,
    TRUSTED_MAX_GATES,
    Op,
    UnsupportedCircuitError,
    canonical_ops,
)

__all__ = [
    "STANDARD_GATES",
    "STRIPPED_INSTRUCTIONS",
    "TRUSTED_MAX_GATES",
    "Op",
    "UnsupportedCircuitError",
    "canonical_ops",
]
