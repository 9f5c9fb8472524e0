"""``rubriq hardware``: the paper's hardware pipeline and the backend catalog."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from rubriq.cli.common import (
    command_group,
    console,
    err,
    new_table,
    reported,
)
from rubriq.hardware.options import HardwareOptions
from rubriq.options import typer_options

hardware_app = command_group("hardware", "Transpile and run circuits on IBM / IonQ or their offline emulation.")


@hardware_app.command("run")
@typer_options(HardwareOptions)
def hardware_run(
    circuits: list[Path] = typer.Argument(
        ..., metavar="PATH...", help=".qasm / .py files, folders of .qasm, or an evaluation records.jsonl."
    ),
    options: HardwareOptions = HardwareOptions(),
) -> None:
    """The paper's hardware pipeline (also: python -m rubriq.hardware.submit_ibm_ionq, same options)."""
    from rubriq.hardware.submit_ibm_ionq import check_options, load_circuits, pipeline, write_results
    from rubriq.redaction import redact

    with reported():
        check_options(list(options.backend), options.shots, options.top_k, options.threshold)
    with reported(flag="PATH"):
        loaded = load_circuits(circuits, options.top_k)
    run = pipeline(options, say=lambda m: err.print(m, markup=False, soft_wrap=True))
    dry_run, out, threshold = options.dry_run, Path(options.out), options.threshold
    with reported():
        rows = run.run(loaded)
    table = new_table(
        "what would be sent (dry run)" if dry_run else "results",
        "backend",
        "circuit",
        "mode",
        "qubits",
        "depth",
        "2q gates",
        "SWAPs",
        "KL",
        keep_whole=("backend",),
    )
    for r in rows:
        kl = r.get("kl")
        table.add_row(
            r["backend"],
            escape(r["circuit"]),
            r["mode"],
            str(r["qubits"]),
            str(r["depth"]),
            str(r["two_qubit_gates"]),
            str(r["swaps_inserted"]),
            "-"
            if kl is None
            else f"{kl:.4f}" + (" > threshold" if r.get("flagged") else "")
            if r.get("status", "done") == "done" or kl is not None
            else f"pending ({r.get('status')})",
        )
    console.print(table)
    if dry_run:
        console.print("nothing sent; cost: see the IBM Quantum and IonQ pricing pages (IonQ bills per gate-shot)")
        return
    paths = write_results(rows, out, threshold)
    console.print(redact("wrote " + ", ".join(str(p) for p in paths.values())), markup=False)


@hardware_app.command("backends")
def hardware_backends() -> None:
    """The backend catalog: qubits, topology, native gates, depth budget, error rates and sources."""
    from rubriq.circuit.backends import CATALOG, error_rates

    table = new_table(
        "RubriQ backend catalog (names for --backend)",
        "backend",
        "device",
        "qubits",
        "topology",
        "max depth",
        "native gates",
        keep_whole=("backend",),
    )
    for name, spec in CATALOG.items():
        table.add_row(
            name,
            spec.family,
            str(spec.num_qubits),
            spec.topology,
            str(spec.max_depth),
            " ".join(sorted(spec.native_gates)),
        )
    console.print(table)
    rates = new_table(
        "error rates (emulation; sources below)", "backend", "e_1q", "e_2q", "e_readout", keep_whole=("backend",)
    )
    for name in CATALOG:
        e = error_rates(name)
        rates.add_row(name, f"{e['error_1q']:.2e}", f"{e['error_2q']:.2e}", f"{e['error_readout']:.2e}")
    console.print(rates)
    for name, spec in CATALOG.items():
        console.print(f"{name}: {spec.source}", markup=False)
