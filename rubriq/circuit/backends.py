"""The backend catalog: one table of the hardware RubriQ targets.

The rubric's hardware dimension S_H (paper eqs. 9-10) and the hardware pipeline read their
backends from here and nowhere else.  IBM coupling maps and native gates are read from the
configuration files that ``qiskit-ibm-runtime`` ships for its fake backends (snapshots of the
real devices), without importing that package (which takes seconds): Eagle r3 is
``ibm_sherbrooke`` (127 qubits), Heron r2 is ``ibm_fez`` (156 qubits), Nighthawk r1 is
qiskit-ibm-runtime's ``fake_nighthawk`` (120 qubits on a square lattice).  IBM error rates are
the medians of the same snapshots' calibration files (``props_*.json``).

IonQ trapped-ion devices are all-to-all connected; their native gates are IonQ's native-gate
interface {gpi, gpi2, ms}.  qiskit-ionq 1.x compiles Forte to {gpi, gpi2, zz} (ZZ instead of MS
as its entangler), so Forte lists both entanglers.  No package ships IonQ error rates; the
catalog's numbers are IonQ's published system specifications, each with its source
(``IONQ_SOURCES``).  They are medians/averages for the device class, not a calibration of the
machine you will get: check the provider's current figures before relying on an emulation.

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
    provider_name: str | None = None
    """The provider's name of the device (IonQ: qiskit-ionq's backend name)."""
    error_1q: float | None = None
    """Single-qubit gate error (IBM: median of the snapshot; IonQ: published, see source)."""
    error_2q: float | None = None
    """Two-qubit gate error (same sources)."""
    error_readout: float | None = None
    """State-preparation-and-measurement / readout error (same sources)."""
    source: str = ""
    """Where the error rates come from."""

    @property
    def all_to_all(self) -> bool:
        """Whether every qubit pair is coupled (trapped ions): routing never inserts SWAPs."""
        return self.topology == "all-to-all"

    def coupling_edges(self) -> tuple[tuple[int, int], ...] | None:
        """Undirected coupling edges (i < j), or None for all-to-all connectivity."""
        if self.all_to_all:
            return None
        return _ibm_edges(self.fake_backend)


_IONQ_NATIVE = frozenset({"gpi", "gpi2", "ms"})

IONQ_SOURCES = {
    "ionq_aria": "IonQ Aria system page, https://ionq.com/quantum-systems/aria (1q fidelity 99.97 %, "
    "2q fidelity 99.6 %, SPAM 99.4 %; published averages)",
    "ionq_forte": "IonQ Forte system page, https://ionq.com/quantum-systems/forte (1q fidelity 99.98 %, "
    "2q fidelity 99.6 %, SPAM 99.5 %; published averages)",
}

_IBM_SOURCE = "median of qiskit-ibm-runtime's fake_provider snapshot props_{}.json"

CATALOG: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            "ibm_eagle",
            "ibm",
            "Eagle r3",
            127,
            frozenset({"ecr", "id", "rz", "sx", "x"}),
            1000,
            "heavy-hex",
            fake_backend="sherbrooke",
            provider_name="ibm_sherbrooke",
            source=_IBM_SOURCE.format("sherbrooke"),
        ),
        BackendSpec(
            "ibm_heron",
            "ibm",
            "Heron r2",
            156,
            frozenset({"cz", "id", "rz", "sx", "x"}),
            1000,
            "heavy-hex",
            fake_backend="fez",
            provider_name="ibm_fez",
            source=_IBM_SOURCE.format("fez"),
        ),
        BackendSpec(
            "ibm_nighthawk",
            "ibm",
            "Nighthawk r1",
            120,
            frozenset({"cz", "id", "rz", "sx", "x"}),
            1000,
            "square",
            fake_backend="nighthawk",
            provider_name="fake_nighthawk",
            source=_IBM_SOURCE.format("nighthawk"),
        ),
        BackendSpec(
            "ionq_forte",
            "ionq",
            "Forte",
            36,
            _IONQ_NATIVE | {"zz"},
            500,
            "all-to-all",
            provider_name="qpu.forte-1",
            error_1q=2e-4,
            error_2q=4e-3,
            error_readout=5e-3,
            source=IONQ_SOURCES["ionq_forte"],
        ),
        BackendSpec(
            "ionq_aria",
            "ionq",
            "Aria",
            25,
            _IONQ_NATIVE,
            500,
            "all-to-all",
            provider_name="qpu.aria-1",
            error_1q=3e-4,
            error_2q=4e-3,
            error_readout=6e-3,
            source=IONQ_SOURCES["ionq_aria"],
        ),
    )
}


def error_rates(name: str) -> dict[str, float]:
    """1q, 2q and readout error of a backend (IBM: medians of the snapshot calibration)."""
    spec = get_backend(name)
    if spec.provider != "ibm":
        rates = {"error_1q": spec.error_1q, "error_2q": spec.error_2q, "error_readout": spec.error_readout}
        missing = [k for k, v in rates.items() if v is None]
        if missing:
            raise ValueError(f"{name}: the catalog gives no {', '.join(missing)}")
        return {k: float(v) for k, v in rates.items() if v is not None}
    return dict(_ibm_errors(spec.fake_backend))


@functools.cache
def _ibm_errors(folder: str) -> tuple[tuple[str, float], ...]:
    import statistics

    props = json.loads((_fake_provider_dir() / folder / f"props_{folder}.json").read_text(encoding="utf-8"))
    one, two = [], []
    for gate in props["gates"]:
        err = next((p["value"] for p in gate["parameters"] if p["name"] == "gate_error"), None)
        if err is None or err >= 1:  # 1.0 marks a broken gate in IBM's files
            continue
        if gate["gate"] == "sx":
            one.append(err)
        elif len(gate["qubits"]) == 2:
            two.append(err)
    readout = [p["value"] for q in props["qubits"] for p in q if p["name"] == "readout_error" and p["value"] < 1]
    return (
        ("error_1q", statistics.median(one)),
        ("error_2q", statistics.median(two)),
        ("error_readout", statistics.median(readout)),
    )


def get_backend(name: str) -> BackendSpec:
    """The catalog entry of ``name``; an ``UnknownBackendError`` listing the catalog otherwise."""
    try:
        return CATALOG[name]
    except KeyError:
        raise UnknownBackendError(f"unknown backend {name!r}; the catalog has: {', '.join(sorted(CATALOG))}") from None


def _fake_provider_dir() -> Path:
    spec = importlib.util.find_spec("qiskit_ibm_runtime")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "qiskit-ibm-runtime is not installed; it ships the IBM device snapshots (pip install qiskit-ibm-runtime)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "fake_provider" / "backends"


@functools.cache
def _ibm_edges(folder: str | None) -> tuple[tuple[int, int], ...]:
    if folder is None:
        raise ValueError("an IBM backend needs its fake-backend folder")
    conf = _fake_provider_dir() / folder / f"conf_{folder}.json"
    data = json.loads(conf.read_text(encoding="utf-8"))
    edges = {(min(a, b), max(a, b)) for a, b in data["coupling_map"]}
    return tuple(sorted(edges))
