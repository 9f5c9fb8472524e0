"""``rubriq data``: build the prompt datasets, fetch circuit collections."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from rubriq.cli.common import (
    CONTEXT,
    EXIT_FAILED,
    app,
    check,
    console,
    new_table,
    reported,
)

data_app = typer.Typer(
    help="Build prompt datasets and fetch circuit collections.", no_args_is_help=True, context_settings=CONTEXT
)
app.add_typer(data_app, name="data")


@data_app.command("build")
def data_build(
    out: Path = typer.Option(Path("data"), "--out", metavar="DIR", help="Output folder."),
    small: bool = typer.Option(False, "--small", help="A few rows per family (tests, quickstart)."),
    collections: str = typer.Option(
        "tcount,mqt,qiskit-arith",
        metavar="LIST",
        help="Rewrite collections, comma-separated (tcount, mqt, qiskit-arith).",
    ),
    suite_dir: Path | None = typer.Option(None, metavar="DIR", help="Folder of the T-count suite's .qasm files."),
    seed: int = typer.Option(42, metavar="N", help="Split and sampling seed."),
) -> None:
    """Write the synthesis prompt dataset and the rewrite-with-fewer-T datasets (split by target:
    no target in two splits). A collection that is not on this machine is skipped, with how to
    get it."""
    from rubriq.data import COLLECTIONS, build_all

    names = tuple(c.strip() for c in collections.split(",") if c.strip())
    unknown = [c for c in names if c not in COLLECTIONS]
    check(not unknown, "--collections", f"unknown collection(s) {', '.join(unknown)}; use {', '.join(COLLECTIONS)}")
    check(suite_dir is None or suite_dir.is_dir(), "--suite-dir", f"no folder {suite_dir}")
    check(not out.is_file(), "--out", f"{out} is a file, not a folder")
    with reported():
        report = build_all(out, small=small, collections=names, suite_dir=suite_dir, seed=seed)
    table = new_table(
        f"datasets written to {out} (counts: train/validation/test; T0 buckets: selected/available)",
        "dataset",
        "rows",
        "targets",
        "T0 buckets",
        "circuits skipped",
        keep_whole=("dataset",),
    )
    for name, info in report.items():
        if name == "unavailable":
            continue
        rows, tgts = info["rows"], info["targets"]
        buckets = (
            ""
            if name == "prompts"
            else "; ".join(f"{b} {v['selected']}/{v['available']}" for b, v in info["buckets"].items())
        )
        skipped = "" if name == "prompts" else ", ".join(f"{k}: {v}" for k, v in info["skipped"].items())
        table.add_row(
            name,
            *("/".join(str(counts.get(k, 0)) for k in ("train", "validation", "test")) for counts in (rows, tgts)),
            buckets,
            escape(skipped),
        )
    console.print(table)
    families = report.get("prompts", {}).get("families", {})
    if families:
        per_family = new_table(
            "prompts per target family (train/validation/test)", "family", "rows", "targets", keep_whole=("family",)
        )
        for family, info in families.items():
            per_family.add_row(
                family,
                *(
                    "/".join(str(info[what].get(k, 0)) for k in ("train", "validation", "test"))
                    for what in ("rows", "targets")
                ),
            )
        console.print(per_family)
    for name, why in report.get("unavailable", {}).items():
        console.print(f"skipped collection {name}: {why}", markup=False)


@data_app.command("fetch")
def data_fetch(
    what: str = typer.Argument(..., metavar="COLLECTION", help="tcount-suite"),
    dest: Path | None = typer.Option(None, metavar="DIR", help="Destination (default ~/.cache/rubriq/tcount_suite)."),
) -> None:
    """Download a public circuit collection (needs network)."""
    from rubriq.data.suites import fetch_tcount_suite

    check(what == "tcount-suite", "COLLECTION", f"unknown collection {what!r}; available: tcount-suite")
    with reported(code=EXIT_FAILED):
        path = fetch_tcount_suite(dest)
    console.print(f"T-count suite in {path}")
