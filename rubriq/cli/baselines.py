"""``rubriq baselines``: the compiler baselines with equivalence checks."""

from __future__ import annotations

from pathlib import Path

import typer

from rubriq.cli.common import (
    CONTEXT,
    app,
    check,
    console,
    new_table,
    reported,
)


@app.command(context_settings=CONTEXT)
def baselines(
    suite: str = typer.Option("tcount", metavar="NAME", help="tcount | mqt | qiskit-arith | prompts"),
    methods: str = typer.Option(
        "qiskit,tket,pyzx,best",
        metavar="LIST",
        help="Comma-separated: qiskit, tket, pyzx, best (the verified minimum of all, plus PyZX then TKET/Qiskit).",
    ),
    out: Path = typer.Option(
        Path("runs/baselines"), metavar="DIR", help="Output folder (baselines.csv, baselines.md)."
    ),
    suite_dir: Path | None = typer.Option(
        None, metavar="DIR", help="Folder of the T-count suite's .qasm files (default: the fetched copy)."
    ),
    published: Path | None = typer.Option(
        None,
        metavar="CSV",
        help="Published T-counts to show beside ours (default for --suite tcount: RubriQ's table, "
        "rubriq/suites/published_tcounts.csv).",
    ),
    max_t0: int | None = typer.Option(None, metavar="N", help="Only circuits with T0 <= N."),
    limit: int | None = typer.Option(None, metavar="N", help="At most N circuits (stratified, seed 42)."),
    route_timeout: float = typer.Option(
        180.0,
        metavar="SECONDS",
        help="Per compiler route (compile + verify); a timed-out route is recorded, the other routes still count.",
    ),
    workers: int = typer.Option(0, metavar="N", help="Worker processes (0 = one per core)."),
    resume: bool = typer.Option(False, help="Skip (circuit, method) cells already in OUT/baselines.csv."),
) -> None:
    """Run the compiler baselines (Qiskit, TKET, PyZX, best) with equivalence checks."""
    import os

    from rubriq.baselines.compilers import METHODS
    from rubriq.baselines.runner import load_done, load_published, run_suite, write_reports
    from rubriq.data import load_collection
    from rubriq.suites import PUBLISHED_TCOUNTS, stratify

    suites = ("tcount", "mqt", "qiskit-arith", "prompts")
    check(suite in suites, "--suite", f"unknown suite {suite!r}; use {', '.join(suites)}")
    method_list = [m.strip() for m in methods.split(",") if m.strip()]
    unknown = [m for m in method_list if m not in METHODS]
    check(
        bool(method_list) and not unknown,
        "--methods",
        f"unknown method(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(METHODS)}",
    )
    check(route_timeout > 0, "--route-timeout", f"must be > 0 seconds, got {route_timeout}")
    check(workers >= 0, "--workers", f"must be >= 0 (0 = one per core), got {workers}")
    check(limit is None or limit >= 1, "--limit", f"must be >= 1, got {limit}")
    check(max_t0 is None or max_t0 >= 0, "--max-t0", f"must be >= 0, got {max_t0}")
    check(suite_dir is None or suite_dir.is_dir(), "--suite-dir", f"no folder {suite_dir}")
    reference: dict[str, dict] = {}
    columns: tuple[str, ...] = ()
    if published is None and suite == "tcount":
        published = PUBLISHED_TCOUNTS
    if published is not None:
        with reported(flag=None):
            reference, columns = load_published(published)
    if suite == "tcount":  # the best known T-counts beside the published columns (best_known_tcounts.csv)
        from rubriq.suites.best_known import best_known_columns

        for name, known in best_known_columns().items():
            reference.setdefault(name, {}).update(known)
        columns = (*columns, "best_known", "best_known_ancillas")
    with reported():
        circuits = load_collection(suite, suite_dir)
    if max_t0 is not None:
        circuits = [c for c in circuits if c.t0 <= max_t0]
    check(bool(circuits), "--max-t0", f"no circuit of {suite} has T0 <= {max_t0}")
    if limit is not None:
        circuits, _ = stratify(circuits, total=limit)
    title = f"Compiler baselines: {suite}"
    done = load_done(out / "baselines.csv", method_list) if resume else {}
    if done:
        console.print(f"resuming: {len(done)} (circuit, method) cells already in {out / 'baselines.csv'}")
    with reported():
        rows = run_suite(
            circuits,
            method_list,
            reference,
            route_timeout_s=route_timeout,
            workers=workers or os.cpu_count() or 1,
            done=done,
            on_row=lambda finished: write_reports(finished, method_list, out, title + " (in progress)", columns),
        )
    csv_path, md_path = write_reports(rows, method_list, out, title, columns)
    table = new_table(title, "circuit", "T0", *method_list, keep_whole=("circuit",))
    for row in rows:
        cells = []
        for m in method_list:
            res = row.results.get(m)
            cells.append(
                "-"
                if res is None
                else f"{res.t}" + ("" if res.verified else f" ({res.verdict})")
                if res.t is not None
                else res.verdict
            )
        table.add_row(row.circuit.name, str(row.circuit.t0), *cells)
    console.print(table)
    console.print(f"wrote {csv_path} and {md_path}")
