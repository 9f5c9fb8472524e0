"""Sandbox overhead per Python completion (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_sandbox.py [--n 200] [--baseline REF]

Times, in one run: the sandboxed execution of a trivial Bell-pair completion (warm pool),
the same through the full `evaluate`, the zygote start-up, and, for scale, a cold
`python -c "import qiskit"` subprocess (what a naive per-completion subprocess pays).
With ``--baseline REF`` (a git revision, e.g. the commit before a change of the sandbox), the
zygote of that revision runs beside this one: the two are timed in alternation, one completion
each in turn, so that both see the same load of a shared machine; and the result parser of both
is timed on a line of escaped quotes.  Prints p50/p95 and writes benchmarks/results/sandbox.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rubriq.config import RubricConfig  # noqa: E402
from rubriq.evaluator import RubriQEvaluator  # noqa: E402
from rubriq.extract.sandbox import (  # noqa: E402
    SandboxPool,
    doctor,
    run_python,
    zygote,  # noqa: E402
)
from rubriq.extract.sandbox import pool as pool_module  # noqa: E402

CODE = "from qiskit import QuantumCircuit\nqc = QuantumCircuit(2)\nqc.h(0)\nqc.cx(0, 1)\n"


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def baseline_tree(ref: str) -> Path:
    """The ``rubriq`` package of git revision ``ref``, unpacked under build/ (ignored by git)."""
    commit = subprocess.run(["git", "rev-parse", ref], cwd=REPO, capture_output=True, text=True, check=True)
    folder = REPO / "build" / f"sandbox-baseline-{commit.stdout.strip()[:12]}"
    if not (folder / "rubriq").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", commit.stdout.strip(), "rubriq"], cwd=REPO, capture_output=True)
        archive.check_returncode()
        tar = folder / "rubriq.tar"
        tar.write_bytes(archive.stdout)
        with tarfile.open(tar) as fh:
            fh.extractall(folder, filter="data")
        tar.unlink()
    return folder


def baseline_command(folder: Path) -> tuple[str, ...]:
    """The zygote of ``folder`` (its path first on sys.path, before the editable install's finder)."""
    start = f"import sys; sys.path.insert(0, {str(folder)!r}); from rubriq.extract.sandbox.zygote import main; main()"
    return (sys.executable, "-I", "-B", "-c", start)


def timed_start(command: tuple[str, ...] | None) -> tuple[SandboxPool, float]:
    t = time.perf_counter()
    pool = SandboxPool(1) if command is None else SandboxPool(1, command=command)
    pool.ensure_started()
    return pool, time.perf_counter() - t


def run_on(pool: SandboxPool) -> float:
    pool_module._POOL, pool_module._POOL_PID = pool, os.getpid()  # run_python uses this pool
    t = time.perf_counter()
    run_python(CODE)
    return time.perf_counter() - t


def parse_seconds(parse, pairs: int, repeat: int = 3) -> float:
    line = b'"' + b'\\"' * pairs + b"\n"
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        parse(line)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--baseline", metavar="REF", help="also time the sandbox of this git revision, side by side")
    args = parser.parse_args()
    layers = doctor()["active"]
    pool_module.shutdown()
    new, startup = timed_start(None)
    rows: list[tuple[str, list[float]]] = []
    startups = [("zygote start-up (once per worker)", startup)]
    old = old_parse = None
    if args.baseline:
        folder = baseline_tree(args.baseline)
        old, old_startup = timed_start(baseline_command(folder))
        startups.append((f"zygote start-up, baseline {args.baseline}", old_startup))
        spec = importlib.util.spec_from_file_location("baseline_zygote", folder / "rubriq/extract/sandbox/zygote.py")
        assert spec is not None and spec.loader is not None
        old_zygote = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old_zygote)
        old_parse = old_zygote.parse_result
    pools = [new] + ([old] if old else [])
    for p in pools:
        run_on(p)  # warm
    times: list[list[float]] = [[] for _ in pools]
    for i in range(args.n):
        order = range(len(pools)) if i % 2 == 0 else reversed(range(len(pools)))
        for k in order:
            times[k].append(run_on(pools[k]))
    rows.append(("sandboxed run_python (warm pool)", times[0]))
    if old:
        rows.append((f"sandboxed run_python, baseline {args.baseline}", times[1]))
        old.close()
    pool_module._POOL = new
    evaluator = RubriQEvaluator(
        target_algorithm="basis_encoding", num_qubits=2, value=0, config=RubricConfig(), cache_size=0
    )
    full = []
    for _ in range(args.n // 2):
        t = time.perf_counter()
        evaluator.evaluate("```python\n" + CODE + "```")
        full.append(time.perf_counter() - t)
    rows.append(("full evaluate of a Python completion", full))
    new.close()
    cold = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import qiskit"], check=True)
        cold.append(time.perf_counter() - t)
    rows.append(("cold subprocess importing qiskit", cold))
    lines = ["| what | n | p50 (ms) | p95 (ms) | p50 vs sandbox |", "|---|---|---|---|---|"]
    base = statistics.median(times[0])
    for name, values in rows:
        lines.append(
            f"| {name} | {len(values)} | {1000 * statistics.median(values):.1f} | "
            f"{1000 * pct(values, 0.95):.1f} | {statistics.median(values) / base:.2f}x |"
        )
    for name, seconds in startups:
        lines.append(f"| {name} | 1 | {1000 * seconds:.0f} | | |")
    lines += ["", "| result parser, unterminated line of escaped quotes | size | parse |", "|---|---|---|"]
    for pairs in (10_000, 20_000, 499_990):
        size = f"{(2 * pairs + 2) / 1000:.0f} KB"
        lines.append(f"| this revision | {size} | {1000 * parse_seconds(zygote.parse_result, pairs):.1f} ms |")
        if old_parse is not None and pairs <= 20_000:  # quadratic: 1 MB would take hours
            old_ms = 1000 * parse_seconds(old_parse, pairs, 1)
            lines.append(f"| baseline {args.baseline} | {size} | {old_ms:.1f} ms |")
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
