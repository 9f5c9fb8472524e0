"""Run the compiler baselines over a collection and write CSV + markdown reports.

Per circuit: qubits, T0, bucket, and per method the T-count of its best *verified* route,
compression C = T0 / T (undefined for T0 = 0), seconds, and the verification verdict.  An
inequivalent or unverifiable output is flagged and never counted as compression.  Summary rows per method
and T0 bucket: mean C and MNTC = mean(T / T0) over verified outputs (T = 0 gives C = inf and
is reported as such, never averaged in: see ``mean_compression``).
"""

from __future__ import annotations

import contextlib
import csv
import math
import signal
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from qiskit import QuantumCircuit

from rubriq.baselines.compilers import METHODS, count_t, with_layout_applied
from rubriq.baselines.verify import verify
from rubriq.rubric.tcount import compression
from rubriq.suites import BUCKETS, SuiteCircuit
from rubriq.tables import fmt, markdown_table

VERIFIED = ("exact", "qcec")


@dataclass
class MethodResult:
    """One method on one circuit: T, seconds, verification verdict and detail."""

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
    """One circuit with every method's result and its published T-counts."""

    circuit: SuiteCircuit
    results: dict[str, MethodResult] = field(default_factory=dict)
    published: dict[str, str] = field(default_factory=dict)


class RouteTimeout(Exception):
    """A compiler route ran past its time limit."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`RouteTimeout` in this (main) thread after ``seconds``.  Compiler routes are
    Python (PyZX) or return to Python often (Qiskit, TKET), so a SIGALRM ends them; hand-written
    because neither library takes a time limit.  No limit outside the main thread."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise RouteTimeout(f"over {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_method(circuit: SuiteCircuit, method: str, route_timeout_s: float | None = None) -> MethodResult:
    """The verified route of ``method`` with the fewest T gates; each route (compile + verify)
    gets at most ``route_timeout_s`` seconds (a timed-out route is recorded, the others count)."""
    best = MethodResult()
    start = time.perf_counter()
    timeouts = []
    for route in METHODS[method]:
        try:
            with time_limit(route_timeout_s):
                out = with_layout_applied(route(circuit.circuit))  # stored and verified with its layout
                t = count_t(out)
                verdict, detail = verify(circuit.circuit, out)
        except RouteTimeout as exc:
            timeouts.append(f"{route.__name__}: {exc}")
            verdict, detail, t = "timeout", f"{route.__name__}: {exc}", None
        except Exception as exc:  # a compiler crash is a result (flagged), not an abort
            verdict, detail, t = "failed", f"{route.__name__}: {type(exc).__name__}: {str(exc)[:120]}", None
        candidate = MethodResult(t, 0.0, verdict, detail, out if t is not None else None)
        if candidate.verified and t is not None and (not best.verified or best.t is None or t < best.t):
            best = candidate
        elif not best.verified and best.verdict in ("failed", "timeout"):
            best = candidate
    best.seconds = time.perf_counter() - start
    if timeouts and best.verified:
        best.detail = f"{best.detail}; timed out: {', '.join(timeouts)}"
    return best


def portfolio(row: Row) -> None:
    """Make ``row.results["best"]`` the verified minimum over every method of the row."""
    if "best" not in row.results:
        return
    own = row.results["best"]
    winner, source = own, "pyzx+cleanup"
    for name, result in row.results.items():
        if (
            name != "best"
            and result.verified
            and result.t is not None
            and (not winner.verified or winner.t is None or result.t < winner.t)
        ):
            winner, source = result, name
    if winner is not own:
        row.results["best"] = MethodResult(winner.t, own.seconds, winner.verdict, f"from {source}: {winner.detail}")


def mean_compression(values: list[float]) -> str:
    """The mean of the finite compressions, with how many outputs had no T gate left."""
    finite = [v for v in values if math.isfinite(v)]
    zero_t = len(values) - len(finite)
    text = f"{statistics.mean(finite):.3f}" if finite else "-"
    return text + (f" (+{zero_t} with T=0)" if zero_t else "")


def run_suite(
    circuits: list[SuiteCircuit],
    methods: list[str],
    published: dict[str, dict] | None = None,
    progress: bool = True,
    on_row=None,
    route_timeout_s: float | None = None,
    workers: int = 1,
    done: dict[tuple[str, str], MethodResult] | None = None,
) -> list[Row]:
    """Run every method on every circuit (smallest T0 first).

    ``workers`` > 1 spreads the (circuit, method) cells over that many processes; ``done``
    holds cells already computed (``--resume``: read back from the CSV), which are not run
    again; ``on_row(rows)`` is called whenever a cell finishes, so reports are written
    incrementally and a stopped run loses at most the cells in flight.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    rows = [Row(c, published=(published or {}).get(c.name, {})) for c in sorted(circuits, key=lambda c: c.t0)]
    by_name = {row.circuit.name: row for row in rows}
    todo = []
    for row in rows:
        for m in methods:
            if done and (row.circuit.name, m) in done:
                row.results[m] = done[(row.circuit.name, m)]
            else:
                todo.append((row, m))
    from rubriq.progress import progress as progress_bar

    def finished(row: Row, method: str, result: MethodResult) -> None:
        result.circuit = None  # reports need the numbers only
        row.results[method] = result
        if len(row.results) == len(methods):
            portfolio(row)
        if on_row is not None:
            on_row([r for r in rows if len(r.results) == len(methods)])

    with progress_bar(f"baselines ({len(todo)} circuit x method cells)", len(todo), enabled=progress) as bar:
        if workers == 1:
            for row, m in todo:
                finished(row, m, run_method(row.circuit, m, route_timeout_s))
                bar.advance(1)
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            # one task per circuit (its methods in order, so "best" reuses PyZX's teleport output in
            # the same process); the largest circuits first, so that they do not finish last
            per_circuit: dict[str, list[str]] = {}
            for row, m in todo:
                per_circuit.setdefault(row.circuit.name, []).append(m)
            order = sorted(per_circuit, key=lambda name: -by_name[name].circuit.t0)
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = {
                    pool.submit(_cells, by_name[name].circuit, per_circuit[name], route_timeout_s): name
                    for name in order
                }
                for future in as_completed(futures):
                    name = futures[future]
                    for m, result in future.result().items():
                        finished(by_name[name], m, result)
                        bar.advance(1)
    for row in rows:
        portfolio(row)
    return rows


def _cells(circuit: SuiteCircuit, methods: list[str], route_timeout_s: float | None) -> dict[str, MethodResult]:
    out = {}
    for m in methods:
        out[m] = run_method(circuit, m, route_timeout_s)
        out[m].circuit = None
    return out


def load_done(csv_path: Path, methods: list[str]) -> dict[tuple[str, str], MethodResult]:
    """Cells of an earlier run's CSV (``--resume``): (circuit, method) -> its recorded result."""
    done: dict[tuple[str, str], MethodResult] = {}
    if not Path(csv_path).is_file():
        return done
    with open(csv_path, encoding="utf-8") as fh:
        for line in csv.DictReader(fh):
            for m in methods:
                verdict = line.get(f"verified_{m}")
                if verdict:
                    t = line.get(f"T_{m}")
                    done[(line["circuit"], m)] = MethodResult(
                        int(t) if t else None, float(line.get(f"seconds_{m}") or 0.0), verdict, "resumed from the CSV"
                    )
    return done


def write_reports(
    rows: list[Row], methods: list[str], out: Path, title: str, published_columns: tuple[str, ...] = ()
) -> tuple[Path, Path]:
    """Write ``baselines.csv`` and ``baselines.md`` for ``rows`` into ``out``; return both paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "baselines.csv", out / "baselines.md"
    header = ["collection", "circuit", "qubits", "T0", "bucket"] + [f"published_{p}" for p in published_columns]
    for m in methods:
        header += [f"T_{m}", f"C_{m}", f"seconds_{m}", f"verified_{m}"]
    ratio = "best_known" in published_columns and "pyzx" in methods
    if ratio:
        header.append("pyzx_over_best_known")
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for row in rows:
            c = row.circuit
            line = [c.collection, c.name, c.num_qubits, c.t0, c.bucket] + [
                row.published.get(p, "") for p in published_columns
            ]
            for m in methods:
                r = row.results[m]
                comp = compression(c.t0, r.t) if r.verified else None
                line += [
                    "" if r.t is None else r.t,
                    "" if comp is None else f"{comp:.4f}",
                    f"{r.seconds:.2f}",
                    r.verdict,
                ]
            if ratio:
                value = pyzx_over_best_known(row)
                line.append("" if value is None else f"{value:.4f}")
            writer.writerow(line)
    md_path.write_text(markdown(rows, methods, title, published_columns), encoding="utf-8")
    return csv_path, md_path


def markdown(rows: list[Row], methods: list[str], title: str, published_columns: tuple[str, ...] = ()) -> str:
    """The baselines table and the per-bucket summary as markdown."""
    lines = [
        f"# {title}",
        "",
        "T = T-count under RubriQ's gate table; C = T0/T over verified outputs only; "
        "`!` marks an output that is not verified equivalent (never counted); `-` with `timeout` in the CSV: "
        "every route ran past --route-timeout. Published *gadgetized* columns (AlphaTensor-Quantum, polytof) "
        "use extra ancilla qubits: a different problem, shown for reference, never a fair comparison.",
        "",
    ]
    if "best_known" in published_columns:
        lines += [
            "best known = the lowest published ancilla-free T-count, its sources in "
            "rubriq/suites/best_known_tcounts.csv; best known (ancillas) = a lower published count that needs extra "
            "ancillas (blank: none); PyZX / best known = our verified PyZX T over the ancilla-free best known.",
            "",
        ]
    head = ["circuit", "qubits", "T0"] + [column_label(p) for p in published_columns]
    for m in methods:
        head += [f"T {m}", f"C {m}", f"s {m}"]
    ratio = "best_known" in published_columns and "pyzx" in methods
    if ratio:
        head.append("PyZX / best known")
    table = []
    for row in rows:
        c = row.circuit
        cells = [c.name, str(c.num_qubits), str(c.t0)] + [row.published.get(p, "") or "-" for p in published_columns]
        for m in methods:
            r = row.results[m]
            mark = "" if r.verified else "!"
            comp = compression(c.t0, r.t) if r.verified else None
            cells += ["-" if r.t is None else f"{r.t}{mark}", fmt(comp, 2), f"{r.seconds:.1f}"]
        if ratio:
            cells.append(fmt(pyzx_over_best_known(row), 3))
        table.append(cells)
    lines += markdown_table(head, table)
    lines += ["", "## Summary per method and T0 bucket", ""]
    summary = []
    for m in methods:
        for bucket in [b for b, _, _ in BUCKETS] + ["all"]:
            sel = [r for r in rows if bucket == "all" or r.circuit.bucket == bucket]
            ok = [r for r in sel if r.results[m].verified]
            if not sel:
                continue
            comps = [c for c in (compression(r.circuit.t0, r.results[m].t) for r in ok) if c is not None]
            mntc = [t / r.circuit.t0 for r in ok if r.circuit.t0 > 0 and (t := r.results[m].t) is not None]
            summary.append(
                [
                    m,
                    bucket,
                    str(len(sel)),
                    str(len(ok)),
                    mean_compression(comps),
                    fmt(statistics.mean(mntc) if mntc else None),
                ]
            )
    lines += markdown_table(["method", "bucket", "circuits", "verified", "mean C", "MNTC = mean T/T0"], summary)
    return "\n".join(lines) + "\n"


PUBLISHED_COLUMNS = (
    "PyZX",
    "Tpar",
    "Nam",
    "Feynman",
    "ATQ_gadgetized",
    "polytof_gadgetized",
    "best_known",
    "best_known_ancillas",
)
"""Columns of ``published_tcounts.csv`` (and of ``best_known_tcounts.csv``, joined by the CLI)
shown next to our methods; the gadgetized ones and ``best_known_ancillas`` use extra ancillas (a
different problem): shown, marked, never compared."""


def column_label(column: str) -> str:
    """A published column's header in the markdown report.

    >>> column_label("PyZX"), column_label("best_known"), column_label("best_known_ancillas")
    ('PyZX (published)', 'best known', 'best known (ancillas)')
    """
    if column == "best_known":
        return "best known"
    if column == "best_known_ancillas":
        return "best known (ancillas)"
    return f"{column} (published{', ancillas' if 'gadgetized' in column else ''})"


def pyzx_over_best_known(row: Row) -> float | None:
    """Our verified PyZX T-count over the ancilla-free best known (None when either is missing
    or the best known is 0)."""
    r, best = row.results.get("pyzx"), row.published.get("best_known")
    if r is None or not r.verified or r.t is None or not best or int(best) == 0:
        return None
    return r.t / int(best)


def load_published(path: Path | str) -> tuple[dict[str, dict], tuple[str, ...]]:
    """(circuit -> row, the columns to show) of a published T-count CSV with a ``circuit`` column."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--published: {path} is not a file")
    with open(path, encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if "circuit" not in (reader.fieldnames or []):
            raise ValueError(f"--published: {path} has no 'circuit' column (columns: {reader.fieldnames})")
        rows = {r["circuit"]: r for r in reader}
    return rows, tuple(c for c in PUBLISHED_COLUMNS if c in next(iter(rows.values()), {}))


def comparison_markdown(csv_path: Path | str) -> list[str]:
    """A compact table of a ``baselines.csv``: per circuit, T0, every published column present and
    each method's T (``!`` when not verified, ``-`` when none), the gadgetized columns marked ``*``
    (extra ancillas, a different problem).  The README's T-count table is this table of the
    committed results (tests/test_docs.py recomputes it)."""
    with open(csv_path, encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        fields = reader.fieldnames or []
        lines = list(reader)
    published = [f.removeprefix("published_") for f in fields if f.startswith("published_")]
    methods = [f.removeprefix("verified_") for f in fields if f.startswith("verified_")]
    head = ["circuit", "T0"] + [f"{p}{'*' if 'gadgetized' in p or 'ancillas' in p else ''}" for p in published]
    head += [f"**{m}**" for m in methods]
    ratio = "pyzx_over_best_known" in fields
    if ratio:
        head.append("PyZX / best known")
    table = []
    for line in lines:
        cells = [line["circuit"], line["T0"]] + [line[f"published_{p}"] or "-" for p in published]
        for m in methods:
            t = line[f"T_{m}"]
            cells.append("-" if not t else t + ("" if line[f"verified_{m}"] in VERIFIED else "!"))
        if ratio:
            value = line["pyzx_over_best_known"]
            cells.append(f"{float(value):.3f}" if value else "-")
        table.append(cells)
    return markdown_table(head, table)
