"""Generated collections: MQT Bench algorithm circuits (``mqt.bench``, target-independent
level, 2-8 qubits) and Qiskit circuit-library arithmetic (ripple-carry adders CDKM and VBE, the
HRS cumulative multiplier, multi-controlled X in four synthesis modes), each reduced exactly to
Clifford+T; a circuit that cannot be is counted in ``report``, never approximated."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

from qiskit import QuantumCircuit

from rubriq.config import ExtractionConfig
from rubriq.suites.circuits import NotCliffordT, SuiteCircuit, make_entry, to_clifford_t

MQT_BENCHMARKS = (
    "ghz",
    "graphstate",
    "dj",
    "bv",
    "wstate",
    "qft",
    "qftentangled",
    "grover",
    "cdkm_ripple_carry_adder",
    "vbe_ripple_carry_adder",
    "draper_qft_adder",
    "full_adder",
    "half_adder",
    "multiplier",
    "hrs_cumulative_multiplier",
    "modular_adder",
    "qpeexact",
    "ae",
    "randomcircuit",
)


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
