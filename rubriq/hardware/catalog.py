"""The backend catalog: one table of the hardware RubriQ targets.

The rubric's hardware dimension S_H (paper eqs. 9-10) and the hardware pipeline read their
backends from here and nowhere else.  IBM coupling maps and native gates are read from the
configuration files that ``qiskit-ibm-runtime`` ships for its fake backends (snapshots of the
real devices), without importing that package (which takes seconds): Eagle r3 is
``ibm_sherbrooke`` (127 qubits), Heron r2 is ``ibm_fez`` (156 qubits).  IonQ trapped-ion
devices are all-to-all connected; their native gate set {gpi, gpi2, ms} is IonQ's documented
native-gate interface (also what ``qiskit-ionq`` compiles to).

Depth budgets are the paper's (Table II): 1000 layers on IBM, 500 on IonQ.

>>> spec = get_backend("ibm_eagle")
>>> spec.num_qubits, sorted(spec.native_gates)
(127, ['ecr', 'id', 'rz', 'sx', 'x'])
>>> len(spec.coupling_edges())
144
>>> get_backend("ionq_forte").coupling_edges() is None
True
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path


class UnknownBackendError(KeyError):
    """No backend of that name is in the catalog."""


@dataclass(frozen=True)
class BackendSpec:
    """One row of the catalog."""

    name: str
    provider: str
    family: str
    num_qubits: int
    native_gates: frozenset[str]
    max_depth: int
    topology: str
    fake_backend: str | None = None
    """Folder of qiskit-ibm-runtime's fake backend holding the device snapshot (IBM only)."""

    @property
    def all_to_all(self) -> bool:
        return self.topology == "all-to-all"

    def coupling_edges(self) -> tuple[tuple[int, int], ...] | None:
        """Undirected coupling edges (i < j), or None for all-to-all connectivity."""
        if self.all_to_all:
            return None
        return _ibm_edges(self.fake_backend)


_IONQ_NATIVE = frozenset({"gpi", "gpi2", "ms"})

CATALOG: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("ibm_eagle", "ibm", "Eagle r3", 127, frozenset({"ecr", "id", "rz", "sx", "x"}),
                    1000, "heavy-hex", fake_backend="sherbrooke"),
        BackendSpec("ibm_heron", "ibm", "Heron r2", 156, frozenset({"cz", "id", "rz", "sx", "x"}),
                    1000, "heavy-hex", fake_backend="fez"),
        BackendSpec("ionq_forte", "ionq", "Forte", 36, _IONQ_NATIVE, 500, "all-to-all"),
        BackendSpec("ionq_aria", "ionq", "Aria", 25, _IONQ_NATIVE, 500, "all-to-all"),
    )
}


def get_backend(name: str) -> BackendSpec:
    try:
        return CATALOG[name]
    except KeyError:
        raise UnknownBackendError(
            f"unknown backend {name!r}; the catalog has: {', '.join(sorted(CATALOG))}"
        ) from None


def _fake_provider_dir() -> Path:
    spec = importlib.util.find_spec("qiskit_ibm_runtime")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "qiskit-ibm-runtime is not installed; it ships the IBM device snapshots "
            "(pip install qiskit-ibm-runtime)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "fake_provider" / "backends"


@functools.lru_cache(maxsize=None)
def _ibm_edges(folder: str | None) -> tuple[tuple[int, int], ...]:
    if folder is None:
        raise ValueError("an IBM backend needs its fake-backend folder")
    conf = _fake_provider_dir() / folder / f"conf_{folder}.json"
    data = json.loads(conf.read_text(encoding="utf-8"))
    edges = {(min(a, b), max(a, b)) for a, b in data["coupling_map"]}
    return tuple(sorted(edges))
