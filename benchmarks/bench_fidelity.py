"""Fidelity benchmark: Qiskit Operator, Aer, our exact engine, our sampled estimator and the
full `evaluate`, timed in ONE run on the same circuits (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_fidelity.py [--quick | --clifford-only]

Circuits (all transpiled to {h, cx, rz, sx, x} with optimization level 0): the textbook QFT,
a random Clifford+T circuit (10 n gates from {h, s, t, tdg, cx}, seed 7), and a 2nd-order
Trotterized Heisenberg chain (4 steps); n = 4, 6, 8, 10, 12, and 16, 20 for the sampled
estimator (whose target is the QFT through its FFT, or the circuit itself as a circuit target,
simulated on the k input states).  Each cell is the median of several repetitions (fewer for slow cells); Operator is
skipped above 10 qubits (the issue measured ~250 s at n = 12).  From n = 10 on, every method
gets one untimed warm-up call (first touch of large allocations).  Prints one table with absolute
medians and ratios and writes it to benchmarks/results/fidelity.md.

Exact Clifford checking (issue #27; ``--clifford-only`` runs just this case and rewrites only its
section of fidelity.md): seeded random Cliffords of 4 to 200 qubits against their reference and
a one-gate-off candidate, by stabilizer tableaux (rubriq.sim.clifford), by Qiskit's Clifford
compositions, and by the sampled estimator (up to 20 qubits), side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from qiskit import QuantumCircuit, qasm2, transpile  # noqa: E402

from rubriq.circuit.gates import canonical_ops  # noqa: E402
from rubriq.config import FidelityConfig, RubricConfig  # noqa: E402
from rubriq.evaluator import RubriQEvaluator  # noqa: E402
from rubriq.sim.exact import unitary_fidelity  # noqa: E402
from rubriq.sim.sampled import sampled_fidelity  # noqa: E402
from rubriq.targets import make_target  # noqa: E402
from rubriq.targets.circuit import CircuitTarget  # noqa: E402

BASIS = ["h", "cx", "rz", "sx", "x"]


def family_circuit(family: str, n: int) -> QuantumCircuit:
    if family == "qft":
        qc = make_target("qft", n).reference_circuit()
    elif family == "clifford+t":
        rng = np.random.default_rng(7)
        qc = QuantumCircuit(n)
        for _ in range(10 * n):
            g = rng.choice(["h", "s", "t", "tdg", "cx"])
            if g == "cx":
                a, b = rng.choice(n, size=2, replace=False)
                qc.cx(int(a), int(b))
            else:
                getattr(qc, g)(int(rng.integers(n)))
    else:
        qc = make_target("heisenberg", n, t=0.5).reference_circuit()
    return transpile(qc, basis_gates=BASIS, optimization_level=0)


def timed(fn, reps: int, warmup: bool = False) -> float:
    if warmup:  # first touch of a large allocation costs page faults; time the steady state
        fn()
    values = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        values.append(time.perf_counter() - start)
    return statistics.median(values)


def aer_unitary(qc: QuantumCircuit) -> np.ndarray:
    from qiskit_aer import AerSimulator

    c = qc.copy()
    c.save_unitary()
    return np.asarray(AerSimulator(method="unitary").run(c).result().get_unitary())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="n <= 10 only")
    parser.add_argument(
        "--only-circuit-target",
        action="store_true",
        help="only the circuit-target (rewrite) rows; rewrites their section of fidelity.md",
    )
    parser.add_argument(
        "--clifford-only",
        action="store_true",
        help="only the exact Clifford case (random Cliffords to 200 qubits); rewrites its section of fidelity.md",
    )
    args = parser.parse_args()
    if args.only_circuit_target:
        write_section(CIRCUIT_BEGIN, CIRCUIT_END, render_circuit_target(bench_circuit_target()))
        return
    if args.clifford_only:
        write_section(CLIFFORD_BEGIN, CLIFFORD_END, render_clifford(bench_clifford()))
        return
    exact_sizes = [4, 6, 8, 10] if args.quick else [4, 6, 8, 10, 12]
    sampled_only = [] if args.quick else [16, 20]
    rows = []
    for family in ("qft", "clifford+t", "heisenberg"):
        for n in exact_sizes + sampled_only:
            qc = family_circuit(family, n)
            ops = tuple(canonical_ops(qc))
            row = {"family": family, "n": n, "gates": len(ops)}
            reps = 5 if n <= 8 else (2 if n <= 10 else 1)
            warm = n >= 10
            # the sampled estimator's target: QFT via FFT, others as circuit targets (simulated)
            target = make_target("qft", n) if family == "qft" else CircuitTarget(qasm=qasm2.dumps(qc))
            if n <= 12:
                u_target = make_target("qft", n).unitary() if family == "qft" else aer_unitary(qc)
                if n <= 10:
                    from qiskit.quantum_info import Operator, process_fidelity

                    row["operator"] = timed(
                        lambda: process_fidelity(Operator(qc), Operator(u_target)), 1 if n >= 10 else reps
                    )
                row["aer"] = timed(lambda: aer_unitary(qc), reps, warm)
                row["exact"] = timed(lambda: unitary_fidelity(ops, n, u_target, 14, threads=0), reps, warm)
                row["exact_1t"] = timed(lambda: unitary_fidelity(ops, n, u_target, 14, threads=1), reps, warm)
            row["sampled"] = timed(
                lambda: sampled_fidelity(ops, n, target, samples=16, seed=1), reps if n <= 12 else 1, warm and n <= 12
            )
            rows.append(row)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    evaluate_rows = bench_evaluate()
    text = render(rows, evaluate_rows)
    print(text)
    out = Path(__file__).resolve().parent / "results" / "fidelity.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    write_section(CIRCUIT_BEGIN, CIRCUIT_END, render_circuit_target(bench_circuit_target()))
    write_section(CLIFFORD_BEGIN, CLIFFORD_END, render_clifford(bench_clifford()))


CIRCUIT_BEGIN = "<!-- circuit target: written by bench_fidelity.py (--only-circuit-target) -->"
CIRCUIT_END = "<!-- end circuit target -->"
CLIFFORD_BEGIN = "<!-- clifford: written by bench_fidelity.py (--clifford-only) -->"
CLIFFORD_END = "<!-- end clifford -->"


def write_section(begin: str, end: str, body: str) -> None:
    """Replace (or append) the delimited section of fidelity.md."""
    out = Path(__file__).resolve().parent / "results" / "fidelity.md"
    text = out.read_text() if out.exists() else ""
    block = f"{begin}\n{body}{end}\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    out.write_text(text)
    print(body)


def qiskit_choi_fidelity(candidate: QuantumCircuit, target_clifford) -> float:
    """The same exact F with Qiskit's Clifford doing the work (tableau from the circuit, four
    compositions of the 2n-qubit Choi circuit): the alternative rubriq.sim.clifford replaced."""
    from qiskit.quantum_info import Clifford

    from rubriq.sim.clifford import zero_overlap

    n = target_clifford.num_qubits
    bell = QuantumCircuit(2 * n)
    for i in range(n):
        bell.h(i)
        bell.cx(i, n + i)
    choi = Clifford(bell).compose(Clifford(candidate), qargs=list(range(n)))
    choi = choi.compose(target_clifford.adjoint(), qargs=list(range(n)))
    return zero_overlap(choi.compose(Clifford(bell.inverse())))


def bench_clifford(sizes=(4, 8, 12, 16, 20, 50, 100, 200), sampled_max: int = 20) -> list[dict]:
    """A seeded random Clifford target (random_clifford, seed 27) against its reference circuit
    (correct) and the reference with one S gate appended (one gate off: F = 1/2): the exact
    tableau check (rubriq.sim.clifford, what compute_fidelity now does), the same number through
    Qiskit's Clifford compositions, and today's sampled estimator (k = 16) up to ``sampled_max``
    qubits (the path such candidates took before; nothing above 24 qubits); plus the whole
    ``evaluate`` of the QASM text at 100 qubits."""
    from rubriq.circuit.facts import CircuitFacts
    from rubriq.sim.clifford import clifford_fidelity

    rows = []
    for n in sizes:
        target = make_target("random_clifford", n, seed=27)
        good = target.reference_circuit()
        bad = good.copy()
        bad.s(n // 2)
        facts = {"good": CircuitFacts.from_circuit(good), "bad": CircuitFacts.from_circuit(bad)}
        clifford_fidelity(facts["good"], target)  # compiles the kernels once, caches U_A^dagger's gates
        row: dict = {"n": n, "gates": len(facts["good"].ops)}
        for name in ("good", "bad"):
            result = clifford_fidelity(facts[name], target)
            row[f"F_{name}"] = result.process_fidelity
            row[f"tableau_{name}"] = timed(lambda: clifford_fidelity(facts[name], target), 5)
        row["qiskit_bad"] = timed(lambda: qiskit_choi_fidelity(bad, target.clifford()), 1 if n >= 100 else 3)
        if n <= sampled_max:
            reps = 1 if n >= 16 else 3
            for name in ("good", "bad"):
                f = facts[name]
                result = sampled_fidelity(f.ops, n, target, samples=16, seed=1)
                row[f"sampled_F_{name}"] = (result.process_fidelity, result.interval)
                row[f"sampled_{name}"] = timed(lambda: sampled_fidelity(f.ops, n, target, samples=16, seed=1), reps)
        if n == 100:
            texts = {name: qasm2.dumps(c) for name, c in (("good", good), ("bad", bad))}
            RubriQEvaluator(target=target).evaluate(texts["good"])  # first call: imports, compiled kernels
            for name, text in texts.items():  # a fresh evaluator each time: no cache hits
                row[f"evaluate_{name}"] = timed(lambda: RubriQEvaluator(target=target).evaluate(text), 3)
        rows.append(row)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    return rows


def render_clifford(rows: list[dict]) -> str:
    lines = [
        "Exact Clifford equivalence (rubriq/sim/clifford.py): seeded random Clifford targets (random_clifford, "
        "seed 27) against their reference circuit (correct) and the reference plus one S gate (one gate off, "
        "F = 1/2), medians, one run on a shared 2-core CPU. `tableau` is what compute_fidelity does now for "
        "Clifford pairs, at any width; `Qiskit Clifford` is the same exact number through Qiskit's tableau "
        "compositions; `sampled` is the path these candidates took before (k = 16 random states, an "
        "interval; none above 24 qubits).",
        "",
        "| n | gates | tableau, correct (F) | tableau, one gate off (F) | Qiskit Clifford, one off | sampled, correct (F) "
        "| sampled, one off (F [interval]) | sampled/tableau |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:

        def cell(key):
            return fmt(r.get(key))

        sampled_good = sampled_bad = "- (above 24 qubits: none)" if r["n"] > 24 else "-"
        if "sampled_good" in r:
            fg, _ = r["sampled_F_good"]
            fb, (lo, hi) = r["sampled_F_bad"]
            sampled_good = f"{cell('sampled_good')} ({fg:.6f})"
            sampled_bad = f"{cell('sampled_bad')} ({fb:.3f} [{lo:.3f}, {hi:.3f}])"
        lines.append(
            f"| {r['n']} | {r['gates']} | {cell('tableau_good')} ({r['F_good']:g}) | {cell('tableau_bad')} "
            f"({r['F_bad']:g}) | {cell('qiskit_bad')} | {sampled_good} | {sampled_bad} | "
            f"{ratio(r.get('sampled_bad'), r.get('tableau_bad'))} |"
        )
    full = [r for r in rows if "evaluate_good" in r]
    if full:
        r = full[0]
        lines += [
            "",
            f"Whole `evaluate` of the QASM completion at n = {r['n']} ({r['gates']} gates; parse, five dimensions, "
            f"fidelity by tableaux; a fresh evaluator each time): correct {fmt(r['evaluate_good'])}, one gate off "
            f"{fmt(r['evaluate_bad'])}.",
        ]
    return "\n".join(lines) + "\n"


def bench_evaluate() -> list[tuple[int, float, float, float]]:
    """Full evaluate of distinct QASM completions for QFT-n (one thread, caches as in training:
    no text/circuit cache hits, routing cache shared within the group)."""
    from rubriq.rubric import hardware

    out = []
    for n in (4, 6, 8):
        cfg = RubricConfig(fidelity=FidelityConfig(threads=1))  # one core, as the goal states
        ev = RubriQEvaluator(target_algorithm="qft", num_qubits=n, config=cfg, cache_size=0)
        base = qasm2.dumps(family_circuit("qft", n))
        texts = [base.replace("rz(", f"rz({0.001 * i}+", 1) for i in range(40)]
        hardware.swap_overhead.cache_clear()
        start = time.perf_counter()
        ev.evaluate(texts[0])
        cold = time.perf_counter() - start
        times = []
        for t in texts[1:]:
            start = time.perf_counter()
            ev.evaluate(t)
            times.append(time.perf_counter() - start)
        times.sort()
        out.append((n, statistics.median(times), times[int(0.95 * (len(times) - 1))], cold))
    return out


def bench_circuit_target(sizes=(4, 6, 8, 10), count: int = 30) -> list[dict]:
    """Full evaluate against a `circuit` target (the rewrite task) built from QFT-n (Qiskit's
    synthesis of the reference, transpiled like the table above), on distinct completions of the
    same family: ``tweaked`` (one rz angle off by 1e-3 i: not equivalent, an exact distance) and
    ``equivalent`` (the target plus i pairs of x gates: equivalent, never the same text, so no
    cache answers).  Beside them, on the same candidates: Qiskit's Operator + process_fidelity
    and Aer's unitary simulator (the candidate's unitary alone)."""
    from qiskit.quantum_info import Operator, process_fidelity

    out = []
    for n in sizes:
        base_qc = family_circuit("qft", n)
        base = qasm2.dumps(base_qc)
        cfg = RubricConfig(fidelity=FidelityConfig(threads=1))
        ev = RubriQEvaluator(target_algorithm="circuit", target_qasm=base, config=cfg, cache_size=0)
        tweaked = [base.replace("rz(", f"rz({0.001 * (i + 1)}+", 1) for i in range(count)]
        equivalent = [base + "".join("x q[0];\nx q[0];\n" for _ in range(i + 1)) for i in range(count)]
        ev.evaluate(tweaked[0])  # warm: routing cache, qcec worker start (when used), numba
        row = {"n": n, "gates": len(canonical_ops(base_qc))}
        for name, texts in (("tweaked", tweaked[1:]), ("equivalent", equivalent)):
            times, verdicts = [], set()
            for t in texts:
                start = time.perf_counter()
                r = ev.evaluate(t)
                times.append(time.perf_counter() - start)
                verdicts.add(f"{r.fidelity_method} {r.fidelity_verdict}")
            row[name] = statistics.median(times)
            row[f"{name}_how"] = ", ".join(sorted(verdicts))
        cand = QuantumCircuit.from_qasm_str(tweaked[1])
        reps = 5 if n <= 8 else 2
        row["operator"] = timed(lambda: process_fidelity(Operator(cand), Operator(base_qc)), 1 if n >= 10 else reps)
        row["aer"] = timed(lambda: aer_unitary(cand), reps, n >= 10)
        out.append(row)
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    return out


def render_circuit_target(rows: list[dict]) -> str:
    lines = [
        "Full `evaluate` against a `circuit` target (rewrite task) built from QFT-n, one thread, distinct "
        "completions (medians); Operator and Aer on the same candidates:",
        "",
        "| n | gates | evaluate, tweaked (not equivalent) | how | evaluate, equivalent | how | "
        "Operator+process_fidelity | Aer unitary | Operator/evaluate | Aer/evaluate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        slow = max(r["tweaked"], r["equivalent"])
        lines.append(
            f"| {r['n']} | {r['gates']} | {fmt(r['tweaked'])} | {r['tweaked_how']} | {fmt(r['equivalent'])} | "
            f"{r['equivalent_how']} | {fmt(r['operator'])} | {fmt(r['aer'])} | {ratio(r['operator'], slow)} | "
            f"{ratio(r['aer'], slow)} |"
        )
    lines.append("")
    lines.append("Ratios use the slower of the two evaluate columns.")
    return "\n".join(lines) + "\n"


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.1f}x"


def render(rows, evaluate_rows) -> str:
    lines = [
        f"Fidelity benchmark ({os.cpu_count()} cores; medians). Ratios: how many times faster our engine is.",
        "",
        "| circuit | n | gates | Operator+process_fidelity | Aer unitary | exact (threads auto, default) "
        "| exact (1 thread) | sampled k=16 | Operator/exact | Aer/exact | Aer/sampled |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['family']} | {r['n']} | {r['gates']} | {fmt(r.get('operator'))} | {fmt(r.get('aer'))} | "
            f"{fmt(r.get('exact'))} | {fmt(r.get('exact_1t'))} | {fmt(r['sampled'])} | "
            f"{ratio(r.get('operator'), r.get('exact'))} | {ratio(r.get('aer'), r.get('exact'))} | "
            f"{ratio(r.get('aer'), r['sampled'])} |"
        )
    lines += [
        "",
        "Full `evaluate` per distinct QASM completion (QFT-n target, one thread):",
        "",
        "| n | p50 | p95 | first completion (cold routing cache) |",
        "|---|---|---|---|",
    ]
    for n, p50, p95, cold in evaluate_rows:
        lines.append(f"| {n} | {fmt(p50)} | {fmt(p95)} | {fmt(cold)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
