"""Circuits as size-capped JSON of primitive values, and their allow-listed reconstruction.

The Python sandbox's child sends ``{"num_qubits": n, "ops": [[name, [qubits], [params]], ...]}``
back to the parent; never pickle.  The parent rebuilds the circuit only from Qiskit standard
gates (allow-list below) with float parameters, so nothing the child ran can reach scoring.

>>> from qiskit import QuantumCircuit
>>> qc = QuantumCircuit(2); _ = qc.h(0); _ = qc.cp(0.5, 0, 1); _ = qc.measure_all()
>>> payload = circuit_to_payload(qc)
>>> payload["ops"]
[['h', [0], []], ['cp', [0, 1], [0.5]]]
>>> [inst.operation.name for inst in payload_to_circuit(payload).data]
['h', 'cp']
"""

from __future__ import annotations

import math
from typing import Any

from qiskit import QuantumCircuit
from qiskit.circuit import Gate

from rubriq.circuit.gates import STANDARD_GATES, STRIPPED_INSTRUCTIONS

ALLOWED_GATES: dict[str, Gate] = {
    name: gate for name, gate in STANDARD_GATES.items() if isinstance(gate, Gate) and name != "delay"
}
"""Every Qiskit standard unitary gate, by name."""


class PayloadError(ValueError):
    """The child's circuit description is malformed or over a cap."""


def circuit_to_payload(circuit: QuantumCircuit, max_ops: int = 200_000) -> dict[str, Any]:
    """Flatten to allow-listed gates (custom gates through their definitions)."""
    from rubriq.circuit.gates import is_standard

    index = {bit: i for i, bit in enumerate(circuit.qubits)}
    ops: list[list[Any]] = []

    def emit(operation, qubits, depth):
        if operation.name in STRIPPED_INSTRUCTIONS:
            return
        if len(ops) >= max_ops:
            raise PayloadError(f"more than {max_ops} gates")
        if operation.name in ALLOWED_GATES and is_standard(operation):
            ops.append([operation.name, list(qubits), [float(p) for p in operation.params]])
            return
        definition = operation.definition if depth < 64 else None
        if definition is None:
            raise PayloadError(f"gate {operation.name!r} has no definition")
        sub = {bit: qubits[i] for i, bit in enumerate(definition.qubits)}
        for inst in definition.data:
            emit(inst.operation, [sub[q] for q in inst.qubits], depth + 1)

    for inst in circuit.data:
        emit(inst.operation, [index[q] for q in inst.qubits], 0)
    return {"num_qubits": circuit.num_qubits, "ops": ops}


def _angles(params: list) -> list[float] | None:
    """The parameters as finite floats; None when one is not a number or out of float's range
    (an int of 400 digits is a number JSON can carry, but no angle)."""
    angles = []
    for p in params:
        if isinstance(p, bool) or not isinstance(p, (int, float)):
            return None
        try:
            value = float(p)
        except OverflowError:
            return None
        if not math.isfinite(value):
            return None
        angles.append(value)
    return angles


def _shown(value: Any) -> str:
    """At most 80 characters of ``value`` for an error message (ints too long for ``str`` included)."""
    try:
        return str(value)[:80]
    except ValueError:  # an int beyond sys.get_int_max_str_digits()
        return f"<{type(value).__name__} too large to show>"


def payload_to_circuit(payload: Any, max_qubits: int = 64, max_ops: int = 200_000) -> QuantumCircuit:
    """Rebuild a circuit from a payload, validating every field against the allow-list."""
    if not isinstance(payload, dict):
        raise PayloadError("payload must be an object")
    n = payload.get("num_qubits")
    ops = payload.get("ops")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= max_qubits:
        raise PayloadError(f"num_qubits must be an integer in [0, {max_qubits}], got {_shown(n)}")
    if not isinstance(ops, list) or len(ops) > max_ops:
        raise PayloadError(f"ops must be a list of at most {max_ops} gates")
    circuit = QuantumCircuit(n)
    for item in ops:
        if not (isinstance(item, list) and len(item) == 3):
            raise PayloadError(f"malformed gate entry {_shown(item)}")
        name, qubits, params = item
        template = ALLOWED_GATES.get(name) if isinstance(name, str) else None
        if template is None:
            raise PayloadError(f"gate {str(name)[:40]!r} is not allow-listed")
        if (
            not isinstance(qubits, list)
            or len(qubits) != template.num_qubits
            or not all(isinstance(q, int) and not isinstance(q, bool) and 0 <= q < n for q in qubits)
            or len(set(qubits)) != len(qubits)
        ):
            raise PayloadError(f"bad qubits {_shown(qubits)} for {name}")
        angles = _angles(params) if isinstance(params, list) and len(params) == len(template.params) else None
        if angles is None:
            raise PayloadError(f"bad parameters {_shown(params)} for {name}")
        gate = type(template)(*angles) if angles else template
        circuit.append(gate, qubits)
    return circuit
