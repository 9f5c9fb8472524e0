"""Target algorithms: analytic unitaries or states, prompts and reference circuits.

>>> target = make_target("qft", num_qubits=3)
>>> target.kind, target.unitary().shape, target.spec()
('unitary', (8, 8), {'algorithm': 'qft', 'num_qubits': 3, 'inverse': False, 'do_swaps': True})
>>> target_from_spec(target.spec()).params == target.params
True
"""

from __future__ import annotations

from typing import Any

from rubriq.targets.algorithms import ALGORITHMS
from rubriq.targets.arithmetic import ARITHMETIC
from rubriq.targets.base import Target, TargetError
from rubriq.targets.circuit import CircuitTarget
from rubriq.targets.clifford import CLIFFORD_TARGETS
from rubriq.targets.encoding import AmplitudeEncodingTarget, AngleEncodingTarget, BasisEncodingTarget
from rubriq.targets.hamiltonian import HeisenbergTarget, QAOATarget, TFIMTarget, XYTarget
from rubriq.targets.primitives import PRIMITIVES
from rubriq.targets.qft import QFTTarget, QPETarget
from rubriq.targets.states import STATES

_REGISTERED: tuple[type[Target], ...] = (
    QFTTarget,
    QPETarget,
    HeisenbergTarget,
    TFIMTarget,
    XYTarget,
    AmplitudeEncodingTarget,
    AngleEncodingTarget,
    BasisEncodingTarget,
    *STATES,
    *PRIMITIVES,
    *ALGORITHMS,
    *ARITHMETIC,
    QAOATarget,
    *CLIFFORD_TARGETS,
    CircuitTarget,
)
TARGETS: dict[str, type[Target]] = {cls.name: cls for cls in _REGISTERED}

ALIASES = {
    "ising": "tfim",
    "xxx": "heisenberg",
    "amplitude": "amplitude_encoding",
    "angle": "angle_encoding",
    "basis": "basis_encoding",
    "hamiltonian": "heisenberg",
    "ccx": "toffoli",
    "controlled_s": "cs",
    "controlled_h": "ch",
    "w": "w_state",
    "graph": "graph_state",
    "clifford": "random_clifford",
    "tableau": "clifford_tableau",
    "bv": "bernstein_vazirani",
    "dj": "deutsch_jozsa",
    "cuccaro": "cuccaro_adder",
    "draper": "draper_adder",
    "xy_chain": "xy",
}


def make_target(name: str, num_qubits: int | None = None, **params: Any) -> Target:
    """Build a target by name (see ``rubriq targets``)."""
    key = ALIASES.get(str(name).lower(), str(name).lower())
    cls = TARGETS.get(key)
    if cls is None:
        raise TargetError(f"unknown target {name!r}; known: {', '.join(sorted(TARGETS))}")
    if cls is CircuitTarget:
        return cls(num_qubits, **params)
    if num_qubits is None:
        num_qubits = cls.default_width(params)
    if num_qubits is None:
        raise TargetError(f"target {key!r} needs num_qubits")
    return cls(num_qubits, **params)


def parse_params(items: list[str]) -> dict[str, Any]:
    """Target parameters from ``key=value`` items (the CLI's ``--param``, the app's parameter
    box); values are read as JSON when they parse (numbers, true, lists), else kept as text.

    >>> parse_params(["phase=0.25", "inverse=true", "label=x"])
    {'phase': 0.25, 'inverse': True, 'label': 'x'}
    """
    import json

    params: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise TargetError(f"expected key=value, got {item!r}")
        key, raw = item.split("=", 1)
        try:
            params[key.strip()] = json.loads(raw)
        except ValueError:
            params[key.strip()] = raw.strip()
    return params


def target_from_spec(spec: dict[str, Any]) -> Target:
    """Rebuild a target from its JSON spec (``Target.spec()``), e.g. a dataset column."""
    if not isinstance(spec, dict) or "algorithm" not in spec:
        raise TargetError(f"a target spec is a mapping with an 'algorithm' key, got {spec!r}")
    params = dict(spec)
    name = params.pop("algorithm")
    return make_target(name, params.pop("num_qubits", None), **params)


__all__ = ["TARGETS", "Target", "TargetError", "make_target", "parse_params", "target_from_spec"]
