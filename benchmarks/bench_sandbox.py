"""Sandbox overhead per Python completion (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_sandbox.py [--n 200]

Times, in one run: the sandboxed execution of a trivial Bell-pair completion (warm pool),
the same through the full `evaluate`, the zygote start-up, and, for scale, a cold
`python -c "import qiskit"` subprocess (what a naive per-completion subprocess pays).
Prints p50/p95 and writes benchmarks/results/sandbox.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rubriq.config import RubricConfig  # noqa: E402
from rubriq.evaluator import RubriQEvaluator  # noqa: E402
from rubriq.extract.sandbox import SandboxPool, doctor, run_python  # noqa: E402

CODE = "from qiskit import QuantumCircuit\nqc = QuantumCircuit(2)\nqc.h(0)\nqc.cx(0, 1)\n"


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    t = time.perf_counter()
    pool = SandboxPool(1)
    pool.ensure_started()
    startup = time.perf_counter() - t
    pool.close()
    layers = doctor()["active"]
    run_python(CODE)  # warm
    sandbox = []
    for _ in range(args.n):
        t = time.perf_counter()
        run_python(CODE)
        sandbox.append(time.perf_counter() - t)
    evaluator = RubriQEvaluator(
        target_algorithm="basis_encoding", num_qubits=2, value=0, config=RubricConfig(), cache_size=0
    )
    full = []
    for _ in range(args.n // 2):
        t = time.perf_counter()
        evaluator.evaluate("```python\n" + CODE + "```")
        full.append(time.perf_counter() - t)
    cold = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import qiskit"], check=True)
        cold.append(time.perf_counter() - t)
    rows = [
        ("sandboxed run_python (warm pool)", sandbox),
        ("full evaluate of a Python completion", full),
        ("cold subprocess importing qiskit", cold),
    ]
    lines = ["| what | n | p50 (ms) | p95 (ms) | p50 vs sandbox |", "|---|---|---|---|---|"]
    base = statistics.median(sandbox)
    for name, values in rows:
        lines.append(
            f"| {name} | {len(values)} | {1000 * statistics.median(values):.1f} | "
            f"{1000 * pct(values, 0.95):.1f} | {statistics.median(values) / base:.1f}x |"
        )
    lines.append(f"| zygote start-up (once per worker) | 1 | {1000 * startup:.0f} | | |")
    active = ", ".join(k for k, v in layers.items() if v)
    missing = ", ".join(k for k, v in layers.items() if not v) or "none"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    text = (
        "\n".join(lines) + f"\n\nLayers holding: {active}. Missing: {missing}.\n"
        f"Load average during the run (1, 5, 15 min): {load} on {os.cpu_count()} CPUs.\n"
    )
    print(text)
    out = Path(__file__).resolve().parent / "results" / "sandbox.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)


if __name__ == "__main__":
    main()
