"""Circuit collections for the rewrite-with-fewer-T task, and their T0 stratification.

The paper's three "public collections" (UnitaryHack, qsynth-bench, QData) match no public
dataset, so RubriQ substitutes real, citable ones:

* ``tcount``: the classic arithmetic / Toffoli T-count suite (Amy, Maslov & Mosca 2014;
  Nam, Ross, Su, Childs & Maslov 2018), as distributed in the PyZX repository
  (circuits/feyn_bench/qasm).  ``rubriq data fetch tcount-suite`` downloads it.
* ``mqt``: MQT Bench algorithm circuits (``mqt.bench``, target-independent level), 2-8 qubits;
* ``qiskit-arith``: Qiskit circuit-library arithmetic: ripple-carry adders (CDKM, VBE),
  the HRS cumulative multiplier, multi-controlled X in four synthesis modes.

Every circuit is reduced exactly to Clifford+T (:func:`to_clifford_t`); circuits that would
need approximate rotation synthesis (angles that are not multiples of pi/4) are skipped and
counted, not approximated.  :func:`stratify` buckets by T0 (< 80, 80-140, > 140, the paper's
buckets) and samples up to 500 distinct circuits per collection with seed 42, never padding.
"""

from __future__ import annotations

import functools

import hashlib
import math
import warnings
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from qiskit import QuantumCircuit, qasm2, transpile

from rubriq.config import ExtractionConfig
from rubriq.extract.qasm import QASMLimits, load_qasm
from rubriq.circuit.gates import canonical_ops, TRUSTED_MAX_GATES, multiple_of, strip_non_unitary
from rubriq.rubric.tcount import t_count

BUCKETS = (("<80", 0, 80), ("80-140", 80, 141), (">140", 141, math.inf))
CLIFFORD_T_BASIS = ["cx", "h", "s", "sdg", "t", "tdg", "x", "y", "z"]
SUITE_LIMITS = QASMLimits(max_bytes=50_000_000, max_qubits=256, max_int_digits=12)
TCOUNT_NAMES = (
    "adder_8", "barenco_tof_10", "barenco_tof_3", "barenco_tof_4", "barenco_tof_5", "csla_mux_3", "csum_mux_9",
    "gf2^10_mult", "gf2^16_mult", "gf2^4_mult", "gf2^5_mult", "gf2^6_mult", "gf2^7_mult", "gf2^8_mult",
    "gf2^9_mult", "grover_5", "ham15-high", "ham15-low", "ham15-med", "hwb6", "hwb8", "mod5_4", "mod_adder_1024",
    "mod_mult_55", "mod_red_21", "qcla_adder_10", "qcla_com_7", "qcla_mod_7", "qft_4", "rc_adder_6", "tof_10",
    "tof_3", "tof_4", "tof_5", "vbe_adder_3",
)
TCOUNT_URL = "https://raw.githubusercontent.com/zxcalc/pyzx/master/circuits/feyn_bench/qasm/{name}.qasm"


class NotCliffordT(ValueError):
    """The circuit needs approximate synthesis to become Clifford+T."""


@dataclass
class SuiteCircuit:
    """A benchmark circuit with its collection, T0 and source."""

    collection: str
    name: str
    circuit: QuantumCircuit = field(repr=False)
    t0: int = 0
    source: str = ""

    @property
    def num_qubits(self) -> int:
        return self.circuit.num_qubits

    @property
    def bucket(self) -> str:
        return bucket_of(self.t0)

    def qasm(self) -> str:
        return qasm2.dumps(self.circuit)


def bucket_of(t0: int) -> str:
    """The T0 bucket (<80, 80-140, >140) of a reference T-count."""
    for name, lo, hi in BUCKETS:
        if lo <= t0 < hi:
            return name
    raise ValueError(t0)


_PHASE_GATES = {1: ["t"], 2: ["s"], 3: ["s", "t"], 4: ["z"], 5: ["z", "t"], 6: ["sdg"], 7: ["tdg"]}


def to_clifford_t(circuit: QuantumCircuit) -> QuantumCircuit:
    """Exact Clifford+T form: rotations by multiples of pi/4 become t/s/z products, anything
    else raises :class:`NotCliffordT` (we never approximate: T0 must be exact)."""
    work = transpile(strip_non_unitary(circuit), basis_gates=CLIFFORD_T_BASIS + ["rz", "p"], optimization_level=0)
    out = QuantumCircuit(work.num_qubits, global_phase=work.global_phase)
    for inst in work.data:
        op, qubits = inst.operation, inst.qubits
        if op.name in ("rz", "p"):
            theta = float(op.params[0])
            k = multiple_of(theta, math.pi / 4, 1e-9)
            if k is None:
                raise NotCliffordT(f"rotation {op.name}({theta:.6g}) is not a multiple of pi/4")
            if op.name == "rz":
                out.global_phase -= theta / 2
            for g in _PHASE_GATES.get(k % 8, []):
                getattr(out, g)(qubits[0])
            continue
        out.append(op, qubits)
    return out


def make_entry(collection: str, name: str, circuit: QuantumCircuit, source: str) -> SuiteCircuit:
    """A SuiteCircuit with its exact T0."""
    return SuiteCircuit(collection, name, circuit, t_count(canonical_ops(circuit, max_gates=TRUSTED_MAX_GATES)), source)


def circuit_key(circuit: QuantumCircuit) -> str:
    """Hash of the canonical gate list: equal keys = the same circuit (deduplication)."""
    ops = canonical_ops(circuit, max_gates=TRUSTED_MAX_GATES)
    text = f"{circuit.num_qubits}|" + ";".join(f"{o.name}{o.qubits}{tuple(round(p, 12) for p in o.params)}" for o in ops)
    return hashlib.sha256(text.encode()).hexdigest()


# -- collections -----------------------------------------------------------------------------
def default_tcount_dir() -> Path:
    """Where ``rubriq data fetch tcount-suite`` puts the suite."""
    return Path.home() / ".cache" / "rubriq" / "tcount_suite"


def fetch_tcount_suite(dest: Path | None = None, timeout: float = 30.0) -> Path:
    """Download the T-count suite's QASM files from the PyZX repository into ``dest``."""
    dest = Path(dest or default_tcount_dir())
    dest.mkdir(parents=True, exist_ok=True)
    for name in TCOUNT_NAMES:
        target = dest / f"{name}.qasm"
        if target.exists():
            continue
        url = TCOUNT_URL.format(name=urllib.parse.quote(name))
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (fixed https URL)
                target.write_bytes(response.read())
        except OSError as exc:
            raise RuntimeError(
                f"could not download {url}: {exc}. Without network access, copy the folder "
                f"circuits/feyn_bench/qasm of the PyZX repository to {dest} (or pass --suite-dir)."
            ) from None
    return dest


def load_tcount_suite(directory: Path | str | None = None) -> list[SuiteCircuit]:
    """The suite's circuits from ``directory`` (default: the fetched copy)."""
    directory = Path(directory or default_tcount_dir())
    files = sorted(directory.glob("*.qasm"))
    if not files:
        raise FileNotFoundError(f"no .qasm files in {directory}: run `rubriq data fetch tcount-suite` "
                                "or pass the folder that holds them with --suite-dir")
    return [make_entry("tcount", f.stem, load_qasm(f.read_text(), SUITE_LIMITS), f"PyZX feyn_bench/{f.name}")
            for f in files]


MQT_BENCHMARKS = ("ghz", "graphstate", "dj", "bv", "wstate", "qft", "qftentangled", "grover", "cdkm_ripple_carry_adder",
                  "vbe_ripple_carry_adder", "draper_qft_adder", "full_adder", "half_adder", "multiplier",
                  "hrs_cumulative_multiplier", "modular_adder", "qpeexact", "ae", "randomcircuit")


def load_mqt(sizes=range(2, 9), benchmarks=MQT_BENCHMARKS, report: dict | None = None) -> list[SuiteCircuit]:
    """MQT Bench circuits (target-independent level) reduced exactly to Clifford+T."""
    from mqt.bench import BenchmarkLevel, get_benchmark

    out = []
    for name in benchmarks:
        for n in sizes:
            try:
                circuit = get_benchmark(name, BenchmarkLevel.INDEP, circuit_size=n, random_parameters=False)
                out.append(make_entry("mqt", f"{name}_{n}", to_clifford_t(circuit), f"mqt.bench {name} n={n}"))
            except NotCliffordT:
                _count(report, "needs approximate synthesis")
            except Exception:  # sizes a benchmark does not support
                _count(report, "not available at this size")
    return out


def load_qiskit_arith(report: dict | None = None) -> list[SuiteCircuit]:
    """Qiskit circuit-library arithmetic and multi-controlled X, exactly in Clifford+T."""
    from qiskit.circuit.library import CDKMRippleCarryAdder, HRSCumulativeMultiplier, VBERippleCarryAdder
    from qiskit.synthesis import (
        synth_mcx_1_clean_b95,
        synth_mcx_n_clean_m15,
        synth_mcx_n_dirty_i15,
        synth_mcx_noaux_v24,
    )

    builders: list[tuple[str, Callable[[], QuantumCircuit]]] = []
    for k in range(1, 6):
        for kind in ("full", "half", "fixed"):
            builders.append((f"cdkm_{kind}_{k}", functools.partial(CDKMRippleCarryAdder, k, kind=kind)))
    for k in range(1, 5):
        for kind in ("full", "half", "fixed"):
            builders.append((f"vbe_{kind}_{k}", functools.partial(VBERippleCarryAdder, k, kind=kind)))
    for k in range(1, 3):
        builders.append((f"hrs_mult_{k}", functools.partial(HRSCumulativeMultiplier, k)))
    for m in range(2, 9):
        builders.append((f"mcx_noaux_{m}", functools.partial(synth_mcx_noaux_v24, m)))
        builders.append((f"mcx_recursion_{m}", functools.partial(synth_mcx_1_clean_b95, m)))
        builders.append((f"mcx_vchain_{m}", functools.partial(synth_mcx_n_clean_m15, m)))
        builders.append((f"mcx_vchain_dirty_{m}", functools.partial(synth_mcx_n_dirty_i15, m)))
    out = []
    for name, build in builders:
        try:
            with warnings.catch_warnings():  # the Adder/Multiplier classes are deprecated in Qiskit 2.1+
                warnings.simplefilter("ignore", DeprecationWarning)
                circuit = build()
            # any width a completion may have is scorable (rewrites are certified with qcec)
            if not isinstance(circuit, QuantumCircuit) or circuit.num_qubits > ExtractionConfig().max_qubits:
                _count(report, "too wide")
                continue
            out.append(make_entry("qiskit-arith", name, to_clifford_t(circuit), "qiskit.circuit.library"))
        except NotCliffordT:
            _count(report, "needs approximate synthesis")
        except Exception:
            _count(report, "failed to build")
    return out


def _count(report: dict | None, reason: str) -> None:
    if report is not None:
        report[reason] = report.get(reason, 0) + 1


def dedupe(circuits: list[SuiteCircuit]) -> list[SuiteCircuit]:
    """The circuits without repeats (same gates on the same qubits), first kept."""
    seen, out = set(), []
    for c in circuits:
        key = circuit_key(c.circuit)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def stratify(circuits: list[SuiteCircuit], total: int = 500, seed: int = 42) -> tuple[list[SuiteCircuit], dict]:
    """Up to ``total`` distinct circuits, balanced over the T0 buckets (equal shares, a
    bucket's unused share passed on); returns (selection, {bucket: {"available", "selected"}})."""
    circuits = dedupe(circuits)
    rng = np.random.default_rng(seed)
    by_bucket = {name: [c for c in circuits if c.bucket == name] for name, _, _ in BUCKETS}
    for items in by_bucket.values():
        order = rng.permutation(len(items))
        items[:] = [items[i] for i in order]
    # water-filling: equal shares, a bucket's unused share passed on to the others
    quota = {name: 0 for name in by_bucket}
    remaining = total
    while remaining > 0:
        open_buckets = [b for b in by_bucket if quota[b] < len(by_bucket[b])]
        if not open_buckets:
            break
        share = max(1, remaining // len(open_buckets))
        for b in open_buckets:
            give = min(share, len(by_bucket[b]) - quota[b], remaining)
            quota[b] += give
            remaining -= give
    selected, report = [], {}
    for b, items in by_bucket.items():
        take = items[: quota[b]]
        selected += take
        report[b] = {"available": len(items), "selected": len(take)}
    selected.sort(key=lambda c: (c.t0, c.name))
    return selected, report


def prompt_reference_circuits() -> list[SuiteCircuit]:
    """The reference circuits of the synthesis prompts' targets that reduce exactly to Clifford+T
    (the ``prompts`` collection of ``rubriq baselines``)."""
    import hashlib
    import json

    from rubriq.data.prompts import synthesis_targets

    out = []
    for target in synthesis_targets():
        tag = hashlib.sha256(json.dumps(target.spec(), sort_keys=True).encode()).hexdigest()[:8]
        try:
            out.append(make_entry("prompts", f"{target.name}_{target.num_qubits}_{tag}",
                                  to_clifford_t(target.reference_circuit()), "reference circuit"))
        except NotCliffordT:
            continue
    return out


def load_collection(name: str, suite_dir: Path | str | None = None, report: dict | None = None) -> list[SuiteCircuit]:
    """The circuits of one collection: ``tcount``, ``mqt``, ``qiskit-arith`` or ``prompts``."""
    if name == "prompts":
        return prompt_reference_circuits()
    if name == "tcount":
        return load_tcount_suite(suite_dir)
    if name == "mqt":
        return load_mqt(report=report)
    if name == "qiskit-arith":
        return load_qiskit_arith(report=report)
    raise ValueError(f"unknown collection {name!r}; use tcount, mqt, qiskit-arith or prompts")


def flip_one_t(circuit: QuantumCircuit) -> QuantumCircuit:
    """A copy of ``circuit`` with its first T gate replaced by T-dagger (inside the first
    Toffoli/CCZ's Clifford+T definition when the T gates are hidden there): a near miss that
    must never count as a correct rewrite.  Used by the rewrite tests and benchmark.

    >>> qc = QuantumCircuit(1); _ = qc.h(0); _ = qc.t(0)
    >>> [inst.operation.name for inst in flip_one_t(qc).data]
    ['h', 'tdg']
    """
    from qiskit.circuit.library import TdgGate

    out = circuit.copy_empty_like()
    done = False
    for inst in circuit.data:
        op = inst.operation
        if not done and op.name == "t":
            out.append(TdgGate(), inst.qubits)
            done = True
        elif not done and op.name in ("ccx", "ccz", "cu1", "mcx") and op.definition is not None:
            inner = flip_one_t(transpile(op.definition, basis_gates=CLIFFORD_T_BASIS, optimization_level=0))
            out.compose(inner, qubits=inst.qubits, inplace=True)
            done = True
        else:
            out.append(op, inst.qubits, inst.clbits)
    if not done:
        raise ValueError("the circuit has no T gate to flip")
    return out
