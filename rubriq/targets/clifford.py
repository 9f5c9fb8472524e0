"""Clifford targets: a seeded random Clifford, a Clifford given by its tableau, and a stabilizer
state given by its stabilizers.

A Clifford U is fixed, up to a global phase, by its tableau: the images U X_k U^dagger
(destabilizers) and U Z_k U^dagger (stabilizers) of the single-qubit Paulis.  Prompts state
the tableau in a sparse, little-endian notation (``+X0 Z2``: X on q[0], Z on q[2]); the spec
keeps Qiskit's ``Clifford.to_dict()`` labels (``{"stabilizer": ["+XZ", ...], "destabilizer":
[...]}``, big-endian strings: the last character is q[0]).  Clifford candidates are scored
exactly from tableaux at any width (``rubriq.sim.clifford``), so these targets go to 256 qubits;
others are simulated (dense up to 12 qubits, sampled up to 24).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rubriq.targets.base import Target, TargetError, completion_for


def sparse_pauli(label: str) -> str:
    """A signed Qiskit Pauli label in sparse little-endian form.

    >>> sparse_pauli("-XIZ"), sparse_pauli("+II")
    ('-Z0 X2', '+I')
    """
    sign, body = (label[0], label[1:]) if label[0] in "+-" else ("+", label)
    n = len(body)
    terms = [f"{body[n - 1 - k]}{k}" for k in range(n) if body[n - 1 - k] != "I"]
    return sign + (" ".join(terms) if terms else "I")


def tableau_text(clifford, short: bool = False) -> str:
    """The tableau as 'X0 -> ..., Z0 -> ...' lines (``short``: '; '-separated on one line)."""
    d = clifford.to_dict()
    items = []
    for k in range(clifford.num_qubits):
        items.append(f"X{k} -> {sparse_pauli(d['destabilizer'][k])}")
        items.append(f"Z{k} -> {sparse_pauli(d['stabilizer'][k])}")
    return "; ".join(items) if short else "\n".join(items)


def _check_labels(name: str, labels: Any, n: int, what: str) -> list[str]:
    if not isinstance(labels, (list, tuple)) or len(labels) != n:
        raise TargetError(f"{name}: {what} must be a list of {n} Pauli labels like '+XZ'")
    out = []
    for label in labels:
        if not isinstance(label, str):
            raise TargetError(f"{name}: {what} labels are strings like '+XZ', got {label!r}")
        body = label[1:] if label[:1] in "+-" else label
        if len(body) != n or set(body) - set("IXYZ"):
            raise TargetError(f"{name}: {what} label {label!r} must be a sign and {n} letters of I, X, Y, Z")
        out.append(label if label[:1] in "+-" else "+" + label)
    return out


class _CliffordUnitary(Target):
    family = "clifford"
    kind = "unitary"
    max_qubits = 256
    max_dense_qubits = 12

    @functools.cached_property
    def _clifford(self):
        raise NotImplementedError

    def clifford(self):
        return self._clifford

    def _build_unitary(self):
        """The reference circuit simulated on the identity (RubriQ's exact engine: Qiskit's
        ``Operator(Clifford)`` took 2.5 s at 10 qubits)."""
        from rubriq.sim.exact import simulate

        return simulate(self._reference_ops, self.num_qubits, np.eye(self.dim, dtype=complex))

    @functools.cached_property
    def _reference_ops(self):
        from rubriq.circuit.gates import canonical_ops

        return tuple(canonical_ops(self._reference))

    def apply(self, states, deadline=None):
        """The reference circuit simulated on the columns (exact; beyond the dense limit)."""
        if self.num_qubits <= self.max_dense_qubits:
            return self.unitary() @ states
        from rubriq.sim.exact import simulate

        return simulate(self._reference_ops, self.num_qubits, np.array(states, dtype=complex), deadline)

    def _build_reference(self):
        from qiskit.synthesis import synth_clifford_full

        return synth_clifford_full(self._clifford)

    def completion_size(self):
        return completion_for(len(self._reference_ops), slack=64)

    def _what(self) -> str:
        return f"the {self.num_qubits}-qubit Clifford unitary U"

    def description(self):
        return (
            f"Synthesize {self._what()} given by its stabilizer tableau, the images U P U^dagger of the "
            "single-qubit Paulis (Pk is the Pauli P on q[k]; '+X0 Z2' is X on q[0] times Z on q[2]); U is fixed by "
            f"these up to a global phase:\n{tableau_text(self._clifford)}\nUse Clifford gates only "
            "(h, s, sdg, x, y, z, cx, cz, swap)."
        )

    def short_description(self):
        return f"Clifford U with U P U^dagger: {tableau_text(self._clifford, short=True)}. Clifford gates only."


class RandomCliffordTarget(_CliffordUnitary):
    """A uniformly random n-qubit Clifford, seeded (Qiskit's ``random_clifford``)."""

    name = "random_clifford"
    summary = "seeded uniformly random Clifford (Qiskit random_clifford), stated by its tableau"
    parameters = {"seed": "seed of random_clifford (default 0)"}

    def _validate(self, params):
        seed = params.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise TargetError(f"random_clifford: seed must be a non-negative integer, got {seed!r}")
        return {"seed": seed}

    @functools.cached_property
    def _clifford(self):
        from qiskit.quantum_info import random_clifford

        return random_clifford(self.num_qubits, seed=self.params["seed"])

    def _what(self):
        return f"the {self.num_qubits}-qubit random Clifford U (seed {self.params['seed']})"


class CliffordTableauTarget(_CliffordUnitary):
    """The Clifford with a given tableau (Qiskit's ``Clifford.from_dict`` labels)."""

    name = "clifford_tableau"
    summary = "the Clifford with a given stabilizer tableau (images of X_k and Z_k)"
    parameters = {
        "stabilizer": "n signed Pauli labels U Z_k U^dagger, Qiskit order ('+XZ': X on q[1], Z on q[0]); "
        "default: the identity",
        "destabilizer": "n signed labels U X_k U^dagger (default: the identity)",
    }

    def _validate(self, params):
        from qiskit.exceptions import QiskitError
        from qiskit.quantum_info import Clifford

        n = self.num_qubits
        identity = Clifford.from_label("I" * n).to_dict()
        stab = _check_labels(self.name, params.get("stabilizer", identity["stabilizer"]), n, "stabilizer")
        destab = _check_labels(self.name, params.get("destabilizer", identity["destabilizer"]), n, "destabilizer")
        try:
            clifford = Clifford.from_dict({"stabilizer": stab, "destabilizer": destab})
        except QiskitError as exc:
            raise TargetError(f"{self.name}: not a Clifford tableau ({exc})") from None
        self.__dict__["_clifford"] = clifford
        return {"stabilizer": stab, "destabilizer": destab}

    @functools.cached_property
    def _clifford(self):  # set by _validate
        raise AssertionError("unreachable")


class StabilizerStateTarget(Target):
    """The stabilizer state with given stabilizer generators."""

    name = "stabilizer_state"
    family = "clifford"
    kind = "state"
    max_qubits = 256
    summary = "the stabilizer state of n independent commuting Pauli generators"
    parameters = {"stabilizers": "n signed Pauli labels, Qiskit order (default: the GHZ state's)"}

    def _validate(self, params):
        from qiskit.exceptions import QiskitError
        from qiskit.quantum_info import StabilizerState

        n = self.num_qubits
        default = ["+" + "X" * n] + ["+" + "I" * (n - 2 - k) + "ZZ" + "I" * k for k in range(n - 1)]
        labels = _check_labels(self.name, params.get("stabilizers", default), n, "stabilizers")
        try:
            state = StabilizerState.from_stabilizer_list(labels)
        except QiskitError as exc:
            raise TargetError(f"{self.name}: not a stabilizer group ({exc})") from None
        self.__dict__["_prep"] = state.clifford
        return {"stabilizers": labels}

    @functools.cached_property
    def _prep(self):  # set by _validate
        raise AssertionError("unreachable")

    def clifford(self):
        return self._prep

    def _text(self, sep: str) -> str:
        return sep.join(sparse_pauli(label) for label in self.params["stabilizers"])

    def description(self):
        return (
            f"Synthesize a circuit that prepares, from |0...0>, the {self.num_qubits}-qubit stabilizer state "
            "|psi> with g|psi> = |psi> for each of these generators (Pk is the Pauli P on q[k]; '+X0 Z2' is X on "
            f"q[0] times Z on q[2]): {self._text(', ')}. Use Clifford gates only."
        )

    def short_description(self):
        return f"Prepare the stabilizer state of {self._text(', ')} from |0...0>, Clifford gates only."

    def _build_state(self):
        from qiskit.quantum_info import Statevector

        return Statevector(self._prep.to_circuit()).data

    def _build_reference(self):
        from qiskit.synthesis import synth_clifford_full

        return synth_clifford_full(self._prep)

    def completion_size(self):
        return completion_for(self._reference.size(), slack=64)


CLIFFORD_TARGETS: tuple[type[Target], ...] = (RandomCliffordTarget, CliffordTableauTarget, StabilizerStateTarget)
