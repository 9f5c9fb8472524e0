"""Run the compiler baselines over a collection and write CSV + markdown reports.

Per circuit: qubits, T0, bucket, and per method the T-count of its best *verified* route,
compression C = T0 / T (undefined for T0 = 0), seconds, and the verification verdict.  An
inequivalent or unverifiable output is flagged and never counted as compression.  Summary rows per method
and T0 bucket: mean C and MNTC = mean(T / T0) over verified outputs (T = 0 gives C = inf and
is reported as such, never averaged in: see ``mean_compression``).
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from qiskit import QuantumCircuit

from rubriq.baselines.compilers import METHODS, count_t
from rubriq.baselines.verify import verify
from rubriq.data.suites import BUCKETS, SuiteCircuit

VERIFIED = ("exact", "qcec")


@dataclass
class MethodResult:
    t: int | None = None
    seconds: float = 0.0
    verdict: str = "failed"
    detail: str = ""
    circuit: QuantumCircuit | None = field(default=None, repr=False, compare=False)
    """The best route's output (not written to the reports)."""

    @property
    def verified(self) -> bool:
        return self.verdict in VERIFIED


@dataclass
class Row:
    circuit: SuiteCircuit
    results: dict[str, MethodResult] = field(default_factory=dict)
    published: dict[str, str] = field(default_factory=dict)


def run_method(circuit: SuiteCircuit, method: str) -> MethodResult:
    best = MethodResult()
    start = time.perf_counter()
    for route in METHODS[method]:
        try:
            out = route(circuit.circuit)
            t = count_t(out)
            verdict, detail = verify(circuit.circuit, out)
        except Exception as exc:  # a compiler crash is a result (flagged), not an abort
            verdict, detail, t = "failed", f"{route.__name__}: {type(exc).__name__}: {str(exc)[:120]}", None
        candidate = MethodResult(t, 0.0, verdict, detail, out if t is not None else None)
        if candidate.verified and (not best.verified or t < best.t):
            best = candidate
        elif not best.verified and best.verdict == "failed":
            best = candidate
    best.seconds = time.perf_counter() - start
    return best


def compression(t0: int, t: int | None) -> float | None:
    """C = T0 / T; None when undefined (no output, or a Clifford circuit with T0 = 0);
    inf when the output has no T gate left."""
    if t is None or t0 == 0:
        return None
    return math.inf if t == 0 else t0 / t


def mean_compression(values: list[float]) -> str:
    finite = [v for v in values if math.isfinite(v)]
    zero_t = len(values) - len(finite)
    text = f"{statistics.mean(finite):.3f}" if finite else "-"
    return text + (f" (+{zero_t} with T=0)" if zero_t else "")


def run_suite(circuits: list[SuiteCircuit], methods: list[str], published: dict[str, dict] | None = None,
              progress: bool = True, on_row=None) -> list[Row]:
    """Run every method on every circuit (smallest T0 first); ``on_row(rows_done)`` is called
    after each circuit, so reports can be written incrementally."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")
    rows = [Row(c, published=(published or {}).get(c.name, {})) for c in sorted(circuits, key=lambda c: c.t0)]
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  disable=not progress) as bar:
        task = bar.add_task("baselines", total=len(rows) * len(methods))
        for i, row in enumerate(rows):
            for m in methods:
                bar.update(task, description=f"{m} on {row.circuit.name}")
                row.results[m] = run_method(row.circuit, m)
                bar.advance(task)
            if on_row is not None:
                on_row(rows[: i + 1])
    return rows


def write_reports(rows: list[Row], methods: list[str], out: Path, title: str,
                  published_columns: tuple[str, ...] = ()) -> tuple[Path, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "baselines.csv", out / "baselines.md"
    header = ["collection", "circuit", "qubits", "T0", "bucket"] + [f"published_{p}" for p in published_columns]
    for m in methods:
        header += [f"T_{m}", f"C_{m}", f"seconds_{m}", f"verified_{m}"]
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in rows:
            c = row.circuit
            line = [c.collection, c.name, c.num_qubits, c.t0, c.bucket] + [row.published.get(p, "") for p in
                                                                             published_columns]
            for m in methods:
                r = row.results[m]
                comp = compression(c.t0, r.t) if r.verified else None
                line += ["" if r.t is None else r.t, "" if comp is None else f"{comp:.4f}", f"{r.seconds:.2f}",
                         r.verdict]
            writer.writerow(line)
    md_path.write_text(markdown(rows, methods, title, published_columns), encoding="utf-8")
    return csv_path, md_path


def markdown(rows: list[Row], methods: list[str], title: str, published_columns: tuple[str, ...] = ()) -> str:
    lines = [f"# {title}", "",
             "T = T-count under RubriQ's gate table; C = T0/T over verified outputs only; "
             "`!` marks an output that is not verified equivalent (never counted).", ""]
    head = ["circuit", "qubits", "T0"] + [f"{p} (published)" for p in published_columns]
    for m in methods:
        head += [f"T {m}", f"C {m}", f"s {m}"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        c = row.circuit
        cells = [c.name, str(c.num_qubits), str(c.t0)] + [row.published.get(p, "") or "-" for p in published_columns]
        for m in methods:
            r = row.results[m]
            mark = "" if r.verified else "!"
            comp = compression(c.t0, r.t) if r.verified else None
            cells += ["-" if r.t is None else f"{r.t}{mark}", "-" if comp is None else f"{comp:.2f}",
                      f"{r.seconds:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Summary per method and T0 bucket", "",
              "| method | bucket | circuits | verified | mean C | MNTC = mean T/T0 |", "|---|---|---|---|---|---|"]
    for m in methods:
        for bucket in [b for b, _, _ in BUCKETS] + ["all"]:
            sel = [r for r in rows if bucket == "all" or r.circuit.bucket == bucket]
            ok = [r for r in sel if r.results[m].verified]
            if not sel:
                continue
            comps = [c for c in (compression(r.circuit.t0, r.results[m].t) for r in ok) if c is not None]
            mntc = [r.results[m].t / r.circuit.t0 for r in ok if r.circuit.t0 > 0]
            lines.append(f"| {m} | {bucket} | {len(sel)} | {len(ok)} | {mean_compression(comps)} | "
                         f"{statistics.mean(mntc):.3f} |" if mntc else
                         f"| {m} | {bucket} | {len(sel)} | {len(ok)} | {mean_compression(comps)} | - |")
    return "\n".join(lines) + "\n"
