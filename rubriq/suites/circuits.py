"""What every collection is made of: :class:`SuiteCircuit` (a benchmark circuit with its
collection, exact T0 and source), the exact Clifford+T reduction, deduplication and the T0
stratification, and the near-miss :func:`flip_one_t` of the rewrite tests.

Every circuit is reduced exactly to Clifford+T (:func:`to_clifford_t`); circuits that would
need approximate rotation synthesis (angles that are not multiples of pi/4) are refused
(:class:`NotCliffordT`), never approximated.  :func:`stratify` buckets by T0 (< 80, 80-140,
> 140, the paper's buckets) and samples up to 500 distinct circuits per collection with seed
42, never padding.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np
from qiskit import QuantumCircuit, qasm2, transpile

from rubriq.circuit.gates import TRUSTED_MAX_GATES, canonical_ops, multiple_of, strip_non_unitary
from rubriq.circuit.tcount import t_count
from rubriq.extract.qasm import QASMLimits

BUCKETS = (("<80", 0, 80), ("80-140", 80, 141), (">140", 141, math.inf))
CLIFFORD_T_BASIS = ["cx", "h", "s", "sdg", "t", "tdg", "x", "y", "z"]
SUITE_LIMITS = QASMLimits(max_bytes=50_000_000, max_qubits=256, max_int_digits=12)
"""QASM limits for benchmark circuits (trusted files, not model output: the suite has 48-qubit,
200 KB circuits)."""


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
    text = f"{circuit.num_qubits}|" + ";".join(
        f"{o.name}{o.qubits}{tuple(round(p, 12) for p in o.params)}" for o in ops
    )
    return hashlib.sha256(text.encode()).hexdigest()


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
