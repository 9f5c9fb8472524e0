"""The rubric's gate table and the canonical decomposition into it.

Every circuit is reduced to a flat list of :class:`Op` drawn from one table before any
dimension is scored, so that the score of a gate never depends on how it was spelled:

========================  ==========================================  ==============
class                     gates                                       T-cost
========================  ==========================================  ==============
Clifford                  id x y z h s sdg sx sxdg cx cy cz swap       0
                          iswap dcx ecr
T                         t tdg                                       1
rotation                  rz rx ry p u1                               0 if theta is a
                                                                      multiple of pi/2;
                                                                      1 if an odd
                                                                      multiple of pi/4;
                                                                      else 3*ceil(log2(1/eps))
Toffoli-like              ccx ccz cswap                               7
========================  ==========================================  ==============

Gates outside the table are decomposed canonically and deterministically:

* ``u``, ``u3``, ``u2``: their Euler angles, u3(theta, phi, lam) = rz(phi) ry(theta) rz(lam)
  (zero angles dropped; theta = 0 gives the single rz(phi + lam));
* any other gate (``cp``, ``crz``, ``rzz``, ``ch``, ``mcx``, ``r``, ``unitary``, custom
  gates...): its Qiskit ``definition``, recursively;
* a one-qubit gate with a matrix but no definition: the ZYZ Euler angles of its matrix
  (Qiskit's ``OneQubitEulerDecomposer``).

A gate is trusted by name only if it *is* Qiskit's standard gate of that name (same base
class): a custom gate called ``t`` whose body is something else is decomposed like any other
custom gate.  Measurements, resets, barriers and delays are stripped (unitary analysis);
classical control flow is rejected.

>>> from qiskit import QuantumCircuit
>>> qc = QuantumCircuit(2); _ = qc.cp(1.0, 0, 1); _ = qc.u(0.5, 0.0, 3.141592653589793, 1)
>>> [op.name for op in canonical_ops(qc)]
['p', 'cx', 'p', 'cx', 'p', 'rz', 'ry']
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from qiskit import QuantumCircuit
from qiskit.circuit import ControlFlowOp, Instruction
from qiskit.circuit.library import get_standard_gate_name_mapping

CLIFFORD_GATES = frozenset(
    {"id", "x", "y", "z", "h", "s", "sdg", "sx", "sxdg", "cx", "cy", "cz", "swap", "iswap", "dcx", "ecr"}
)
T_GATES = frozenset({"t", "tdg"})
ROTATION_GATES = frozenset({"rz", "rx", "ry", "p", "u1"})
TOFFOLI_LIKE_GATES = frozenset({"ccx", "ccz", "cswap"})
TOFFOLI_T_COST = 7
TABLE_GATES = CLIFFORD_GATES | T_GATES | ROTATION_GATES | TOFFOLI_LIKE_GATES

STRIPPED_INSTRUCTIONS = frozenset({"measure", "reset", "barrier", "delay"})
"""Non-unitary instructions removed before unitary analysis."""

STANDARD_GATES = get_standard_gate_name_mapping()
"""Qiskit's standard gates by name: what a gate name is trusted to mean (:func:`is_standard`),
and the only gates a sandboxed circuit is rebuilt from (``extract/serialize.py``)."""
TRUSTED_MAX_GATES = 10**7
"""The canonical-gate cap for circuits we chose ourselves (benchmark suites, baselines, rewrite
targets); completions get ``extraction.max_gates`` (200,000 by default)."""
_MAX_DEFINITION_DEPTH = 64


class UnsupportedCircuitError(ValueError):
    """The circuit cannot be reduced to the gate table (control flow, opaque gates, ...)."""


@dataclass(frozen=True, slots=True)
class Op:
    """One gate of the canonical form: a table gate name, flat qubit indices, float angles."""

    name: str
    qubits: tuple[int, ...]
    params: tuple[float, ...] = ()


def multiple_of(theta: float, unit: float, tol: float) -> int | None:
    """Return k if theta = k * unit within ``tol`` (in units of ``unit``), else None.

    >>> multiple_of(3 * math.pi / 2, math.pi / 2, 1e-8)
    3
    >>> multiple_of(0.3, math.pi / 2, 1e-8) is None
    True
    """
    k = theta / unit
    r = round(k)
    return int(r) if abs(k - r) <= tol else None


def is_standard(operation: Instruction, name: str | None = None) -> bool:
    """True if ``operation`` is Qiskit's standard gate called ``name`` (not a look-alike)."""
    name = name or operation.name
    std = STANDARD_GATES.get(name)
    return std is not None and getattr(operation, "base_class", None) is std.base_class


def _float_params(operation: Instruction) -> tuple[float, ...]:
    out = []
    for p in operation.params:
        try:
            value = float(p)
        except (TypeError, ValueError):
            raise UnsupportedCircuitError(
                f"gate {operation.name!r} has a non-numeric or unbound parameter {p!r}"
            ) from None
        if not math.isfinite(value):
            raise UnsupportedCircuitError(f"gate {operation.name!r} has a non-finite angle {value!r}")
        out.append(value)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def _euler():
    from qiskit.synthesis import OneQubitEulerDecomposer

    return OneQubitEulerDecomposer(basis="ZYZ")


def _zyz_ops(theta: float, phi: float, lam: float, qubit: int, tol: float = 1e-12) -> list[Op]:
    """rz(phi) ry(theta) rz(lam) in time order (rz(lam) first); zero angles dropped, and a
    diagonal gate (theta = 0) becomes the single rz(phi + lam)."""
    if abs(theta) <= tol:
        total = phi + lam
        return [Op("rz", (qubit,), (total,))] if abs(total) > tol else []
    ops = [Op("rz", (qubit,), (lam,)), Op("ry", (qubit,), (theta,)), Op("rz", (qubit,), (phi,))]
    return [op for op in ops if abs(op.params[0]) > tol]


def _euler_from_params(operation: Instruction, qubit: int) -> list[Op] | None:
    """u / u3 / u2 by their own Euler angles; None for any other gate."""
    name = operation.name
    if name in ("u", "u3") and is_standard(operation):
        theta, phi, lam = _float_params(operation)
        return _zyz_ops(theta, phi, lam, qubit)
    if name == "u2" and is_standard(operation):
        phi, lam = _float_params(operation)
        return _zyz_ops(math.pi / 2, phi, lam, qubit)
    return None


def _euler_from_matrix(operation: Instruction, qubit: int) -> list[Op]:
    """ZYZ angles of a one-qubit gate that has a matrix but no definition."""
    try:
        matrix = np.asarray(operation.to_matrix(), dtype=complex)
    except Exception as exc:  # opaque gate: no matrix and no definition
        raise UnsupportedCircuitError(f"gate {operation.name!r} has no matrix or definition: {exc}") from None
    theta, phi, lam = _euler().angles(matrix)
    return _zyz_ops(float(theta), float(phi), float(lam), qubit)


class _Walk:
    """Counters of one decomposition: emitted gates, visited instructions, the deadline."""

    def __init__(self, cap: int, deadline) -> None:
        self.cap = cap
        self.visits = 0
        self.deadline = deadline
        self.sizes: dict[tuple, int] = {}


def canonical_ops(circuit: QuantumCircuit, max_gates: int = 200_000, deadline=None) -> list[Op]:
    """Reduce ``circuit`` to a flat list of table gates (see the module docstring).

    Raises :class:`UnsupportedCircuitError` when the expansion would exceed ``max_gates``
    (checked with memoized definition sizes *before* expanding, so a "billion laughs" chain
    of gate definitions is rejected at once) and ``BudgetExceeded`` past ``deadline``.
    """
    from rubriq.budget import NO_DEADLINE

    index = {bit: i for i, bit in enumerate(circuit.qubits)}
    out: list[Op] = []
    walk = _Walk(max_gates, deadline or NO_DEADLINE)
    for inst in circuit.data:
        _emit(inst.operation, tuple(index[q] for q in inst.qubits), out, 0, walk)
    return out


def _expanded_size(operation: Instruction, walk: _Walk, depth: int) -> int:
    """Instructions visited when expanding ``operation`` (memoized per custom gate)."""
    name = operation.name
    if name in STRIPPED_INSTRUCTIONS or name in TABLE_GATES or name in ("u", "u3", "u2"):
        return 1
    key = (name, operation.num_qubits, len(operation.params))
    if key in walk.sizes:
        return walk.sizes[key]
    if depth >= _MAX_DEFINITION_DEPTH:
        raise UnsupportedCircuitError(f"gate definitions nested deeper than {_MAX_DEFINITION_DEPTH}")
    try:
        definition = operation.definition
    except Exception:
        definition = None
    size = 1
    if definition is not None:
        for inst in definition.data:
            size += _expanded_size(inst.operation, walk, depth + 1)
            if size > walk.cap:
                break
    walk.sizes[key] = size
    return size


def _emit(operation: Instruction, qubits: tuple[int, ...], out: list[Op], depth: int, walk: _Walk) -> None:
    name = operation.name
    walk.visits += 1
    if walk.visits & 255 == 0:
        walk.deadline.check("circuit decomposition")
    if isinstance(operation, ControlFlowOp):
        raise UnsupportedCircuitError(f"classical control flow ({name}) is not supported")
    if name in STRIPPED_INSTRUCTIONS:
        return
    if operation.num_clbits:
        raise UnsupportedCircuitError(f"instruction {name!r} acts on classical bits")
    if len(out) >= walk.cap or walk.visits > 4 * walk.cap:
        raise UnsupportedCircuitError(f"more than {walk.cap} gates after canonical decomposition")
    if name in TABLE_GATES and is_standard(operation):
        out.append(Op(name, qubits, _float_params(operation)))
        return
    if name == "global_phase" or operation.num_qubits == 0:
        return
    if operation.num_qubits == 1:
        euler = _euler_from_params(operation, qubits[0])
        if euler is not None:
            out.extend(euler)
            return
    if depth >= _MAX_DEFINITION_DEPTH:
        raise UnsupportedCircuitError(f"gate definitions nested deeper than {_MAX_DEFINITION_DEPTH}")
    _float_params(operation)
    if depth == 0 and len(out) + _expanded_size(operation, walk, 0) > walk.cap:
        raise UnsupportedCircuitError(
            f"gate {name!r} expands to more than {walk.cap} gates (cap on the canonical decomposition)"
        )
    try:
        definition = operation.definition
    except Exception as exc:
        raise UnsupportedCircuitError(f"gate {name!r} could not be decomposed: {exc}") from None
    if definition is None:
        if operation.num_qubits == 1:
            out.extend(_euler_from_matrix(operation, qubits[0]))
            return
        raise UnsupportedCircuitError(f"gate {name!r} is opaque (no definition)")
    sub_index = {bit: qubits[i] for i, bit in enumerate(definition.qubits)}
    for inst in definition.data:
        _emit(inst.operation, tuple(sub_index[q] for q in inst.qubits), out, depth + 1, walk)


def strip_non_unitary(circuit: QuantumCircuit) -> QuantumCircuit:
    """A copy of ``circuit`` without measurements, resets, barriers, delays and classical bits."""
    out = QuantumCircuit(circuit.num_qubits, name=circuit.name, global_phase=circuit.global_phase)
    index = {bit: i for i, bit in enumerate(circuit.qubits)}
    for inst in circuit.data:
        operation = inst.operation
        if isinstance(operation, ControlFlowOp):
            raise UnsupportedCircuitError(f"classical control flow ({operation.name}) is not supported")
        if operation.name in STRIPPED_INSTRUCTIONS:
            continue
        if operation.num_clbits:
            raise UnsupportedCircuitError(f"instruction {operation.name!r} acts on classical bits")
        out.append(operation, [out.qubits[index[q]] for q in inst.qubits], copy=False)
    return out


@functools.lru_cache(maxsize=65536)
def op_matrix(name: str, params: tuple[float, ...]) -> np.ndarray:
    """The matrix of table gate ``name`` in Qiskit's little-endian qubit order."""
    gate = STANDARD_GATES[name]
    if params:
        gate = type(gate)(*params)
    return np.asarray(gate.to_matrix(), dtype=complex)
