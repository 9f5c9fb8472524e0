"""``rubriq doctor``: which sandbox isolation layers hold on this machine."""

from __future__ import annotations

import json

import typer
from rich.markup import escape

from rubriq.cli.common import (
    CONTEXT,
    EXIT_FAILED,
    EXIT_OK,
    app,
    console,
    fail,
    new_table,
)


@app.command(context_settings=CONTEXT)
def doctor(as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Start a sandbox worker and report which isolation layers hold on this machine, and the
    seccomp allow-list. Exit code 1 when a layer is missing."""
    from rubriq.extract.sandbox import SandboxUnavailable
    from rubriq.extract.sandbox import doctor as sandbox_doctor

    try:
        report = sandbox_doctor()
    except SandboxUnavailable as exc:
        fail(str(exc), code=EXIT_FAILED)
    if as_json:
        print(json.dumps(report, indent=2))
        raise typer.Exit(EXIT_OK if all(report["active"].values()) else EXIT_FAILED)
    table = new_table(
        f"RubriQ sandbox layers (euid {report.get('euid')}, child's host uid {report.get('outside_uid')}, "
        f"Python {report.get('python')})",
        "layer",
        "holds",
        "why not",
        keep_whole=("layer",),
    )
    for name, active in report["active"].items():
        table.add_row(name, "yes" if active else "NO", escape(report["why"].get(name, "")))
    console.print(table)
    sc = report.get("seccomp") or {}
    if sc:
        console.print(
            f"seccomp: default {sc['default']}; other architectures and x32: "
            f"{sc['other architectures and x32']}; ENOSYS: {', '.join(sc['ENOSYS'])}",
            markup=False,
        )
        console.print("allowed: " + ", ".join(sc["allowed"]), markup=False)
        for name, condition in sc["allowed with conditions"].items():
            console.print(f"allowed if {condition}: {name}", markup=False)
    console.print("See SECURITY.md for what each layer does and what holds when one is missing.")
    if not all(report["active"].values()):
        raise typer.Exit(EXIT_FAILED)
