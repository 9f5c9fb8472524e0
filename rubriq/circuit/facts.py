"""CircuitFacts: what the rubric knows about one circuit, computed once.

Every dimension reads the same facts, so a completion is parsed, stripped and decomposed once
no matter how many dimensions (or TRL reward functions) look at it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from qiskit import QuantumCircuit

from rubriq.circuit.gates import Op, canonical_ops, strip_non_unitary


@dataclass(frozen=True)
class CircuitFacts:
    """The circuit as extracted (measurements etc. stripped) and its canonical gate list."""

    circuit: QuantumCircuit
    """Stripped circuit, gates as written (used for depth and native-gate fraction)."""
    ops: tuple[Op, ...]
    """Canonical decomposition into the rubric's gate table (used for S_C, S_T, S_F)."""
    num_qubits: int
    depth: int
    """D(c): depth of the stripped circuit as written."""
    gate_counts: dict[str, int] = field(default_factory=dict)
    """Counts of the stripped circuit's gates by name, as written."""

    @classmethod
    def from_circuit(cls, circuit: QuantumCircuit, max_gates: int = 200_000, deadline=None) -> CircuitFacts:
        """The facts of ``circuit``: non-unitary instructions stripped, canonical gates (at most
        ``max_gates``, within ``deadline``), depth, width and gate counts."""
        stripped = strip_non_unitary(circuit)
        ops = tuple(canonical_ops(stripped, max_gates=max_gates, deadline=deadline))
        return cls(
            circuit=stripped,
            ops=ops,
            num_qubits=stripped.num_qubits,
            depth=stripped.depth(),
            gate_counts=dict(Counter(inst.operation.name for inst in stripped.data)),
        )

    @classmethod
    def from_qasm(cls, text: str) -> CircuitFacts:
        """Convenience for examples and tests: facts of a trusted OpenQASM 2.0 string, read by
        Qiskit's own parser (completions go through ``rubriq.extract``, with its caps)."""
        from qiskit import qasm2

        return cls.from_circuit(qasm2.loads(text, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS))

    def key(self) -> tuple:
        """Everything the rubric reads: equal keys give equal scores (the evaluator's cache)."""
        return (self.num_qubits, self.depth, tuple(sorted(self.gate_counts.items())), self.ops)

    @property
    def num_gates(self) -> int:
        """|c|: number of operational gates as written (after stripping)."""
        return sum(self.gate_counts.values())
