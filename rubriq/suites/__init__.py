"""Circuit collections for the rewrite-with-fewer-T task and the compiler baselines, below both
(``baselines/`` compiles them, ``data/`` turns them into datasets).

The paper's three "public collections" (UnitaryHack, qsynth-bench, QData) match no public
dataset, so RubriQ substitutes real, citable ones:

- ``tcount.py``: the classic T-count suite from PyZX's repository at a pinned commit, every file
  checked against the committed SHA-256 manifest (``rubriq data fetch tcount-suite``), and the
  published T-counts table with its sources;
- ``library.py``: MQT Bench circuits and Qiskit circuit-library arithmetic, generated here;
- ``circuits.py``: :class:`SuiteCircuit`, the exact Clifford+T reduction, deduplication and the
  T0 stratification every collection shares.

The ``prompts`` collection (the synthesis targets' reference circuits) is built in ``data/``,
where the prompts are (:func:`rubriq.data.load_collection` knows every collection).
"""

from rubriq.suites.circuits import (
    BUCKETS,
    CLIFFORD_T_BASIS,
    SUITE_LIMITS,
    NotCliffordT,
    SuiteCircuit,
    bucket_of,
    circuit_key,
    dedupe,
    flip_one_t,
    make_entry,
    stratify,
    to_clifford_t,
)
from rubriq.suites.library import load_mqt, load_qiskit_arith
from rubriq.suites.tcount import (
    PUBLISHED_TCOUNTS,
    SuiteMismatch,
    SuiteNotFound,
    default_tcount_dir,
    fetch_tcount_suite,
    load_tcount_suite,
    manifest,
    tcount_suite_dir,
)

__all__ = [
    "BUCKETS",
    "CLIFFORD_T_BASIS",
    "PUBLISHED_TCOUNTS",
    "SUITE_LIMITS",
    "NotCliffordT",
    "SuiteCircuit",
    "SuiteMismatch",
    "SuiteNotFound",
    "bucket_of",
    "circuit_key",
    "dedupe",
    "default_tcount_dir",
    "fetch_tcount_suite",
    "flip_one_t",
    "load_mqt",
    "load_qiskit_arith",
    "load_tcount_suite",
    "make_entry",
    "manifest",
    "stratify",
    "tcount_suite_dir",
    "to_clifford_t",
]
