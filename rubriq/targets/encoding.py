"""Data-encoding targets: prepare a state from |0...0> (state-fidelity targets).

Data are given explicitly or drawn from a seeded generator and rounded to 3 decimals, so the
prompt shows exactly the numbers the target uses.
"""

from __future__ import annotations

import math

import numpy as np
from qiskit import QuantumCircuit

from rubriq.targets.base import Target, TargetError, check_number


def _seed(params) -> int:
    seed = params.get("seed", 42)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TargetError(f"seed must be an integer, got {seed!r}")
    return seed


def _seeded_data(params, size: int, high: float, what: str) -> list[float]:
    """``params["data"]`` checked to hold ``size`` finite numbers, or seeded uniform [0, high)
    values rounded to 3 decimals (so the prompt shows exactly the numbers the target uses)."""
    data = params.get("data")
    if data is None:
        data = [round(float(v), 3) for v in np.random.default_rng(_seed(params)).uniform(0, high, size)]
    if not isinstance(data, (list, tuple)) or len(data) != size:
        raise TargetError(f"{what}: data must hold {size} numbers")
    return [check_number(f"{what}: data item", v) for v in data]


class AmplitudeEncodingTarget(Target):
    """The normalized data vector as a state."""

    name = "amplitude_encoding"
    family = "encoding"
    kind = "state"
    max_qubits = 10
    summary = "|psi> = sum_i x_i |i> / ||x|| for a data vector x of length 2^n"
    parameters = {
        "data": "2^n real amplitudes, not all zero (default: seeded uniform [0, 1))",
        "seed": "seed for the default data (default 42)",
    }

    def _validate(self, params):
        data = _seeded_data(params, self.dim, 1.0, "amplitude_encoding")
        if not any(data):
            raise TargetError("amplitude_encoding: data must not be all zero")
        return {"data": data}

    def description(self):
        values = ", ".join(f"{v:g}" for v in self.params["data"])
        return (
            f"Synthesize a {self.num_qubits}-qubit circuit that prepares, from |0...0>, the amplitude encoding "
            f"|psi> = sum_i x_i |i> / ||x|| of the data x = [{values}] (x_i is the amplitude of basis state |i>)."
        )

    def _build_state(self):
        return np.asarray(self.params["data"], dtype=float)

    def _build_reference(self):
        from qiskit.circuit.library import StatePreparation

        qc = QuantumCircuit(self.num_qubits)
        qc.append(StatePreparation(list(self.state().real)), range(self.num_qubits))
        return qc.decompose(reps=6)


class AngleEncodingTarget(Target):
    """One RY(x_k) rotation of |0> per qubit."""

    name = "angle_encoding"
    family = "encoding"
    kind = "state"
    max_qubits = 24
    summary = "|psi> = (x) RY(x_k)|0> on qubit k, one feature per qubit"
    parameters = {
        "data": "n angles in radians (default: seeded uniform [0, pi))",
        "seed": "seed for the default data (default 42)",
    }

    def _validate(self, params):
        return {"data": _seeded_data(params, self.num_qubits, math.pi, "angle_encoding")}

    def description(self):
        values = ", ".join(f"{v:g}" for v in self.params["data"])
        return (
            f"Synthesize a {self.num_qubits}-qubit circuit that prepares, from |0...0>, the angle encoding of the "
            f"features x = [{values}]: qubit q[k] in the state RY(x_k)|0> = cos(x_k/2)|0> + sin(x_k/2)|1>."
        )

    def _build_state(self):
        psi = np.array([1.0])
        for x in self.params["data"]:  # q[0] is the least significant factor: kron(q_k, ..., q_0)
            psi = np.kron([math.cos(x / 2), math.sin(x / 2)], psi)
        return psi

    def _build_reference(self):
        qc = QuantumCircuit(self.num_qubits)
        for k, x in enumerate(self.params["data"]):
            qc.ry(x, k)
        return qc


class BasisEncodingTarget(Target):
    """The computational basis state of an integer."""

    name = "basis_encoding"
    family = "encoding"
    kind = "state"
    max_qubits = 24
    summary = "the computational basis state |value> (q[k] = bit k of value)"
    parameters = {"value": "integer in [0, 2^n) (default: seeded)", "seed": "seed for the default value (default 42)"}

    def _validate(self, params):
        seed = _seed(params)
        value = params.get("value")
        if value is None:
            value = int(np.random.default_rng(seed).integers(0, self.dim))
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.dim:
            raise TargetError(f"basis_encoding: value must be an integer in [0, {self.dim}), got {value!r}")
        return {"value": value}

    def description(self):
        v = self.params["value"]
        bits = ", ".join(f"q[{k}]={(v >> k) & 1}" for k in range(self.num_qubits))
        return (
            f"Synthesize a {self.num_qubits}-qubit circuit that prepares, from |0...0>, the basis encoding of the "
            f"integer {v}: the computational basis state |{v}>, i.e. {bits}."
        )

    def _build_state(self):
        psi = np.zeros(self.dim)
        psi[self.params["value"]] = 1.0
        return psi

    def _build_reference(self):
        qc = QuantumCircuit(self.num_qubits)
        for k in range(self.num_qubits):
            if (self.params["value"] >> k) & 1:
                qc.x(k)
        return qc
