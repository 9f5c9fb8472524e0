"""Typed configuration for the rubric, one dataclass per concern.

Every number the rubric uses lives here, with its default and meaning; YAML files map onto
these dataclasses one to one (``RubricConfig.from_yaml``).  Unknown keys are an error, so a
typo in a config never silently falls back to a default.

>>> cfg = RubricConfig.from_dict({"weights": {"fidelity": 0.5, "clifford": 0.1}})
>>> round(cfg.weights.fidelity + cfg.weights.clifford, 2)
0.6
>>> RubricConfig.from_dict({"weights": {"fidelty": 0.5}})
Traceback (most recent call last):
...
rubriq.config.ConfigError: unknown key(s) ['fidelty'] for RubricWeights (known: clifford, tcount, hardware, fidelity, efficiency)
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

_SUM_TOL = 1e-9


class ConfigError(ValueError):
    """A configuration value or file is invalid."""


def _check_simplex(owner: str, values: dict[str, float]) -> None:
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise ConfigError(f"{owner}.{name} must be a finite number >= 0, got {value!r}")
    total = sum(values.values())
    if abs(total - 1.0) > _SUM_TOL:
        raise ConfigError(f"{owner} must sum to 1, got {total:.12g} ({values})")


@dataclass(frozen=True)
class RubricWeights:
    """Weights w_d of the reward R = sum_d w_d S_d (paper eq. 6); they must sum to 1."""

    clifford: float = 0.20
    """w_C: weight of the Clifford fraction S_C."""
    tcount: float = 0.15
    """w_T: weight of the T-count score S_T."""
    hardware: float = 0.15
    """w_H: weight of the hardware-fit score S_H."""
    fidelity: float = 0.40
    """w_F: weight of the fidelity score S_F."""
    efficiency: float = 0.10
    """w_E: weight of the depth-efficiency score S_E."""

    def __post_init__(self) -> None:
        _check_simplex("weights", self.as_dict())

    def as_dict(self) -> dict[str, float]:
        """Dimension name -> weight."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class ComplexityAwareConfig:
    """Complexity-aware T weight of the paper's Appendix C (off by default).

    w_T(T0) = w_T0 * (1 + kappa * log(T0 / T_ref)), clipped at 0, then all weights are
    renormalized to sum to 1.  ``kappa`` and ``t_ref`` are our defaults: the paper gives the
    form but no values.
    """

    enabled: bool = False
    kappa: float = 0.2
    """Strength of the log-scaling of w_T with the reference T-count T0."""
    t_ref: float = 50.0
    """T-count at which w_T equals its base value."""


@dataclass(frozen=True)
class TCountConfig:
    """Parameters of S_T (paper eq. 8, or relative to a rewrite's input) and of the gate table."""

    mode: Literal["absolute", "relative"] = "absolute"
    """absolute: the paper's S_T = exp(-alpha_T * T(c)).  relative (rewrite tasks, whose target
    is a circuit of T-count T0): S_T = clip((T0 - T(c)) / (T0 - T_best), 0, 1): no credit for
    T >= T0 (a copy of the input earns 0), full credit at the target's recorded best T-count
    T_best (its ``t_best`` parameter, the PyZX optimum ``rubriq data build`` records; 0 when the
    target records none), linear in between.  Targets that are not circuits keep the absolute
    score; see ``rubriq.rubric.tcount``."""
    alpha: float = 0.05
    """alpha_T: decay rate of S_T per T gate (absolute mode)."""
    epsilon: float = 1e-10
    """Synthesis precision eps for arbitrary rotations: each costs 3*ceil(log2(1/eps)) T."""
    angle_tol: float = 1e-8
    """Tolerance when deciding that theta/(pi/2) or theta/(pi/4) is an integer."""


@dataclass(frozen=True)
class HardwareConfig:
    """Parameters of S_H (paper eqs. 9-10); the backends come from ``rubriq.circuit.backends``.

    S_H = max_b [w_q 1[n <= Q_b] + w_d 1[D <= D_b] + w_n NativeFrac_b + w_r exp(-lambda SwapOH_b)].
    The four sub-weights must sum to 1 so that S_H lies in [0, 1].  The paper names the terms
    but not their values; these defaults are ours.
    """

    backends: tuple[str, ...] = ("ibm_eagle", "ibm_heron", "ionq_forte", "ionq_aria")
    w_qubits: float = 0.30
    """w_q: the circuit fits in the backend's qubit count."""
    w_depth: float = 0.20
    """w_d: the circuit's depth is within the backend's depth budget."""
    w_native: float = 0.20
    """w_n: fraction of gates already in the backend's native gate set."""
    w_routing: float = 0.30
    """w_r: routing overhead term exp(-lambda * SwapOH)."""
    swap_lambda: float = 0.1
    """lambda: decay per inserted SWAP."""
    routing_seed: int = 42
    """Seed of the (deterministic) SABRE layout and routing."""

    def __post_init__(self) -> None:
        _check_simplex(
            "hardware sub-weights",
            {
                "w_qubits": self.w_qubits,
                "w_depth": self.w_depth,
                "w_native": self.w_native,
                "w_routing": self.w_routing,
            },
        )
        if not self.backends:
            raise ConfigError("hardware.backends must name at least one backend")
        if self.swap_lambda < 0:
            raise ConfigError("hardware.swap_lambda must be >= 0")


@dataclass(frozen=True)
class FidelityConfig:
    """How S_F (paper eq. 11) is computed."""

    metric: Literal["process", "average"] = "process"
    """Which fidelity S_F is: F_process = |Tr(U_A^+ U_c)|^2/d^2 (default: it is 0 for an
    orthogonal circuit, whereas F_avg = (d F_process + 1)/(d + 1) never drops below 1/(d+1)),
    or F_avg.  Both are always reported."""
    backend: Literal["auto", "numpy", "torch", "cudaq", "qcec"] = "auto"
    """auto/numpy: exact NumPy engine up to ``max_exact_qubits``, sampled estimator above;
    torch: the same algorithm on torch (CUDA when available); cudaq: CUDA-Q state vectors
    (state targets and sampled unitaries); qcec: certified equivalence with mqt.qcec against
    the target's exact reference circuit, falling back to auto when not certified."""
    max_exact_qubits: int = 12
    """Largest width simulated exactly for unitary targets (cost ~ gates x 4^n)."""
    max_sampled_qubits: int = 24
    """Largest width for the sampled estimator (cost ~ gates x k x 2^n)."""
    max_state_qubits: int = 24
    """Largest circuit width simulated for state-preparation targets (memory ~ 2^n_c)."""
    max_ancillas: int = 8
    """Most qubits a circuit may have beyond the target's (clean ancillas); more: no simulation."""
    samples: int = 16
    """k: random input states of the sampled estimator."""
    confidence_z: float = 3.0
    """Width of the sampled estimator's interval in standard errors of the complex mean: with
    z = 3 it holds with probability ~1 - e^{-9} (sim/sampled.py)."""
    sample_seed: int = 1234
    """Seed of the sampled estimator's input states (results are deterministic)."""
    threads: int = 0
    """Threads of the exact engine (numba kernels parallelize over rows; without numba the
    input columns are split in chunks).  0 = auto: every core for programs that are mostly
    dense updates on >= 10 qubits (compute-bound, e.g. Trotter circuits), one thread otherwise
    (memory-bound: on the 2-vCPU development machines one thread already saturates memory)."""
    torch_device: str = "auto"
    """Device of the torch backend: auto (cuda if available), cpu, cuda, cuda:1 ..."""
    correct_threshold: float = 0.99
    """F_avg at or above which a circuit is reported as functionally correct."""
    certify_timeout_s: float = 20.0
    """Most seconds of certified equivalence checking (mqt.qcec, in a killable worker) per
    candidate, for targets that are certified first (rewrite targets; every exact target with
    ``backend: qcec``); never more than what is left of the evaluation's time budget."""
    estimate_time_s: float = 5.0
    """For a candidate certified NOT equivalent (or left undecided), the most seconds spent on
    estimating how far it is (exact, then sampled with its interval); beyond, or above
    ``max_sampled_qubits``, F_process = 0 with the verdict in the details (docs/fidelity.md)."""


@dataclass(frozen=True)
class EfficiencyConfig:
    """Parameters of S_E = exp(-beta * D(c) / n^2) (paper eq. 12)."""

    beta: float = 0.5


@dataclass(frozen=True)
class ExtractionConfig:
    """Limits of the extraction cascade (text -> circuit)."""

    allow_python: bool = True
    """Execute Qiskit-Python completions in the sandbox (rubriq/extract/sandbox)."""
    python_prefilter: bool = True
    """Reject code outside the honest subset (AST check) before spending a process on it.
    A fast path, not the security boundary: the sandbox holds with it off."""
    python_timeout_s: float = 10.0
    """Wall-clock limit of the Python of one completion: its Python blocks (and the attempt to run
    the whole text) share it (Qiskit is pre-imported by the sandbox worker)."""
    sandbox_workers: int = 2
    """Pre-started sandbox workers (zygotes) per evaluating process."""
    sandbox_max_jobs: int = 0
    """Python completions run at once by the sandbox of one evaluating process (each in its own
    process tree); 0: 4 per worker, at most physical memory / ``python_memory_mb``.  A job that
    waits for a free slot spends its own ``python_timeout_s`` doing so (``error_type="budget"``
    if it never starts)."""
    sandbox_strict: bool = True
    """Refuse to run Python (``error_type="sandbox"``) when any isolation layer of SECURITY.md is
    missing on this machine; false: run it anyway and report the missing layers on every result
    (``result.sandbox``)."""
    python_memory_mb: int = 2048
    """Address-space limit of the Python worker."""
    max_output_bytes: int = 1_000_000
    """Most bytes read back from the Python worker."""
    max_qasm_bytes: int = 65536
    """Largest QASM text accepted (bytes)."""
    max_qubits: int = 64
    """Most qubits a completion may declare or reference (registers, ``qubit[N]``, hardware
    qubits ``$N``: the importer allocates every one up to the highest index), checked before the
    parser allocates anything (``error_type="limit"`` beyond)."""
    max_clbits: int = 1024
    """Most classical bits a QASM completion may declare (``creg``, ``bit[N]``); no index, range
    or classical width in square brackets may pass the larger of this and ``max_qubits``."""
    max_gates: int = 200_000
    """Largest number of gates after canonical decomposition, and of gate applications a QASM
    text may make the parser create (statements, broadcasts over registers and ranges)."""
    max_nesting: int = 64
    """Deepest nesting of (), [] and {} accepted in QASM."""
    max_controls: int = 16
    """Most control qubits of one OpenQASM 3 ctrl/negctrl modifier chain."""


@dataclass(frozen=True)
class BudgetConfig:
    """Limits on the whole evaluation of one completion (extraction + scoring)."""

    time_s: float = 30.0
    """Wall-clock budget; exceeded -> typed error ``budget``, reward 0."""
    memory_mb: int = 4096
    """Largest simulation state the fidelity engine may allocate."""


@dataclass(frozen=True)
class RubricConfig:
    """Everything the rubric needs; ``configs/rubric_default.yaml`` spells out the defaults."""

    weights: RubricWeights = field(default_factory=RubricWeights)
    fidelity_gating: Literal["none", "multiplicative", "correct"] = "none"
    """"none": the paper's R = sum_d w_d S_d.  "multiplicative": R = w_F S_F + S_F * sum_{d != F}
    w_d S_d, so that a circuit that does nothing (S_C = S_T = S_E = 1) cannot collect the
    non-fidelity weight (0.6 by default) without implementing the target.  "correct": R = w_F S_F
    + [F_avg >= fidelity.correct_threshold] * sum_{d != F} w_d S_d: the other four terms count
    only for a correct circuit, so deleting T gates and breaking the circuit earns no T credit."""
    complexity: ComplexityAwareConfig = field(default_factory=ComplexityAwareConfig)
    tcount: TCountConfig = field(default_factory=TCountConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    fidelity: FidelityConfig = field(default_factory=FidelityConfig)
    efficiency: EfficiencyConfig = field(default_factory=EfficiencyConfig)
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> RubricConfig:
        """A config from a mapping (unknown keys and wrong types are a ``ConfigError``)."""
        return from_dict(cls, data or {})

    @classmethod
    def from_yaml(cls, path: str | Path) -> RubricConfig:
        """A config from a rubric YAML, or from the ``rubric:`` section of a training YAML."""
        data = load_yaml_mapping(path)
        # A training YAML may hold the rubric under a `rubric:` key.
        if "rubric" in data and isinstance(data["rubric"], dict):
            data = data["rubric"]
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain values (``from_dict`` reads it back)."""
        return dataclasses.asdict(self)


def load_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML file (empty file: {})."""
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


def deep_merge(base: dict, override: dict) -> dict:
    """``override`` merged into ``base``: mappings key by key, everything else replaced.

    >>> deep_merge({"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"y": 3}, "b": [2]})
    {'a': {'x': 1, 'y': 3}, 'b': [2]}
    """
    out = dict(base)
    for key, value in override.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_with_base(path: str | Path, _seen: tuple = ()) -> dict[str, Any]:
    """A YAML mapping with its ``base:`` chain resolved: a file that starts with
    ``base: other.yaml`` (a path relative to the file) is ``other.yaml``'s mapping (itself
    resolved the same way) with the file's sections merged into it key by key
    (:func:`deep_merge`), so a variant states only what it changes."""
    path = Path(path).resolve()
    if path in _seen:
        raise ConfigError(f"{path}: circular base chain")
    data = load_yaml_mapping(path)
    base = data.pop("base", None)
    if base is None:
        return data
    return deep_merge(load_with_base(path.parent / base, _seen + (path,)), data)


def from_dict(cls: type, data: dict[str, Any]) -> Any:
    """Build dataclass ``cls`` from a mapping, recursively and strictly.

    Written by hand because it is 30 lines and the project's configs only need dataclasses,
    tuples and scalars; it rejects unknown keys and wrong types with the field's path.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{cls.__name__} expects a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(f"unknown key(s) {unknown} for {cls.__name__} (known: {', '.join(names)})")
    kwargs = {}
    for name, value in data.items():
        kwargs[name] = _coerce(hints[name], value, f"{cls.__name__}.{name}")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{cls.__name__}: {exc}") from exc


def _coerce(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        # a section that is not its class's fields one to one (a sampling spec's keys written flat)
        section = getattr(tp, "from_section", None)
        return section(value) if section is not None and isinstance(value, dict) else from_dict(tp, value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where} expects a list, got {value!r}")
        (inner, *_rest) = typing.get_args(tp) or (Any,)
        return tuple(_coerce(inner, v, where) for v in value)
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ConfigError(f"{where} must be one of {typing.get_args(tp)}, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(args) < len(typing.get_args(tp)):
            return None
        return _coerce(args[0], value, where) if len(args) == 1 else value  # X | None: checked as X
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} expects true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} expects an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} expects a number, got {value!r}")
        return float(value)
    if tp is str and not isinstance(value, str):
        raise ConfigError(f"{where} expects a string, got {value!r}")
    return value
