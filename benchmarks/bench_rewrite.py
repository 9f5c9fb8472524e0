"""Rewrite-task benchmark: score every T-count suite circuit as a rewrite of itself, of a
restructured equivalent and of a near miss, with the full ``RubriQEvaluator`` (a benchmark, not
a test).

    .venv/bin/python benchmarks/bench_rewrite.py [--suite-dir DIR] [--out benchmarks/results/rewrite.md]

Candidates per circuit: ``identical`` (the target's own QASM), ``restructured`` (Qiskit's
``transpile`` at optimization level 2 into Clifford+T: the same unitary, other gates) and
``flipped`` (the first T replaced by Tdg, inside the first Toffoli's decomposition when the
T gates hide there: F_process = 1/2).  Prints per circuit: qubits, T0, target preparation
seconds, and for each candidate the fidelity method, verdict, F_process and seconds; then p50
and max over all evaluations.  Default budget (30 s) and fidelity settings.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qiskit import qasm2, transpile  # noqa: E402

from rubriq.evaluator import RubriQEvaluator  # noqa: E402
from rubriq.suites import CLIFFORD_T_BASIS, flip_one_t, load_tcount_suite, tcount_suite_dir  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--suite-dir",
        type=Path,
        default=None,
        help="the T-count suite (default: `rubriq data fetch tcount-suite`'s copy)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "rewrite.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    suite_dir = tcount_suite_dir(args.suite_dir)  # one line naming the fetch command when it is missing
    circuits = sorted(load_tcount_suite(suite_dir), key=lambda c: (c.num_qubits, c.name))
    header = (
        "| circuit | qubits | T0 | prep s | identical | s | restructured | s | flipped (F) | s |\n"
        "|---|---:|---:|---:|---|---:|---|---:|---|---:|"
    )
    print(header, flush=True)
    rows, seconds = [header], []
    for c in circuits:
        text = (suite_dir / f"{c.name}.qasm").read_text()
        start = time.perf_counter()
        evaluator = RubriQEvaluator(target_algorithm="circuit", target_qasm=text)
        prep = time.perf_counter() - start
        restructured = transpile(c.circuit, basis_gates=CLIFFORD_T_BASIS, optimization_level=2, seed_transpiler=1)
        cells = []
        for kind, candidate in (
            ("identical", text),
            ("restructured", qasm2.dumps(restructured)),
            ("flipped", qasm2.dumps(flip_one_t(c.circuit))),
        ):
            start = time.perf_counter()
            r = evaluator.evaluate(candidate)
            took = time.perf_counter() - start
            seconds.append(took)
            if r.error_type:
                what = f"error: {r.error_type}"
            else:
                what = f"{r.fidelity_method} {r.fidelity_verdict}"
                if kind == "flipped" or r.process_fidelity != 1.0:
                    what += f" ({r.process_fidelity:.3f})"
            cells += [what, f"{took:.2f}"]
        row = f"| {c.name} | {c.num_qubits} | {c.t0} | {prep:.2f} | " + " | ".join(cells) + " |"
        rows.append(row)
        print(row, flush=True)
    summary = (
        f"\n{len(seconds)} evaluations: p50 {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s "
        f"(budget 30 s), on {sys.platform} with {__import__('os').cpu_count()} cores"
    )
    print(summary)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(rows) + "\n" + summary + "\n")


if __name__ == "__main__":
    main()
