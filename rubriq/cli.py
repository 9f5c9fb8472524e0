"""The ``rubriq`` command line (typer + rich)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="RubriQ: rubric-rewarded quantum circuit synthesis.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
console = Console()
err = Console(stderr=True)


def _parse_params(items: list[str]) -> dict:
    """`key=value` pairs; values are read as JSON when they parse (numbers, true, lists)."""
    params = {}
    for item in items:
        if "=" not in item:
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint="--param")
        key, raw = item.split("=", 1)
        try:
            params[key.strip()] = json.loads(raw)
        except ValueError:
            params[key.strip()] = raw
    return params


def _read_input(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    if not p.is_file():
        raise typer.BadParameter(f"no such file: {path}", param_hint="FILE")
    return p.read_text(encoding="utf-8", errors="replace")


@app.command()
def score(
    file: str = typer.Argument(..., help="Completion or circuit file (QASM, Python, or LLM text); '-' for stdin."),
    target: str = typer.Option(..., "--target", "-t", help="Target algorithm (see `rubriq targets`)."),
    qubits: Optional[int] = typer.Option(None, "--qubits", "-n", help="Number of qubits of the target."),
    param: list[str] = typer.Option([], "--param", "-p", help="Target parameter key=value (repeatable)."),
    target_qasm: Optional[Path] = typer.Option(None, help="QASM file of the target circuit (--target circuit)."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Rubric YAML (configs/rubric_default.yaml)."),
    as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
) -> None:
    """Score one completion with the rubric and print the breakdown."""
    from rubriq.config import ConfigError, RubricConfig
    from rubriq.evaluator import RubriQEvaluator
    from rubriq.targets import TargetError

    text = _read_input(file)
    try:
        cfg = RubricConfig.from_yaml(config) if config else RubricConfig()
        params = _parse_params(param)
        if target_qasm is not None:
            params["qasm"] = target_qasm.read_text(encoding="utf-8")
        evaluator = RubriQEvaluator(target_algorithm=target, num_qubits=qubits, config=cfg, **params)
    except (ConfigError, TargetError, OSError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    result = evaluator.evaluate(text)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
        return
    _print_result(result)


def _print_result(result) -> None:
    title = f"RubriQ score: target {result.target.get('algorithm')} ({result.target.get('num_qubits')} qubits)"
    table = Table(title=title, show_lines=False)
    table.add_column("dimension")
    table.add_column("score", justify="right")
    table.add_column("weight", justify="right")
    table.add_column("detail")
    details = {
        "clifford": f"{result.num_gates} gates as written" if result.parsed else "",
        "tcount": f"T(c) = {result.t_count}" if result.t_count is not None else "",
        "hardware": f"best: {result.best_backend}" if result.best_backend else "",
        "fidelity": (f"F_process = {result.process_fidelity:.10f}, F_avg = {result.average_fidelity:.10f}"
                     if result.fidelity_kind == "process" else
                     f"F_state = {result.process_fidelity:.10f}" if result.fidelity_kind else ""),
        "efficiency": f"depth {result.depth}, {result.num_qubits} qubits" if result.depth is not None else "",
    }
    for name in ("clifford", "tcount", "hardware", "fidelity", "efficiency"):
        weight = result.weights.get(name)
        table.add_row(name, f"{result.scores[name]:.4f}", "" if weight is None else f"{weight:.2f}", details[name])
    table.add_row("[bold]reward[/bold]", f"[bold]{result.reward:.4f}[/bold]", "", "")
    console.print(table)
    if result.error:
        console.print(f"[red]{result.error_type} error:[/red] {result.error}")
    else:
        console.print(f"extracted by: {result.strategy}")
    if result.hardware:
        hw = Table(title="hardware fit per backend")
        for col in ("backend", "S_H", "fits qubits", "fits depth", "native frac", "swaps"):
            hw.add_column(col)
        for name, row in result.hardware.items():
            hw.add_row(name, f"{row['score']:.4f}", str(row["fits_qubits"]), str(row["fits_depth"]),
                       f"{row['native_fraction']:.2f}", "-" if row["swaps"] is None else str(row["swaps"]))
        console.print(hw)


@app.command()
def targets() -> None:
    """List the target algorithms and their parameters."""
    from rubriq.targets import TARGETS

    table = Table(title="RubriQ targets")
    table.add_column("name", no_wrap=True)
    table.add_column("kind")
    table.add_column("qubits")
    table.add_column("what")
    table.add_column("parameters")
    for name, cls in TARGETS.items():
        qubit_range = "from the QASM" if name == "circuit" else f"{cls.min_qubits}-{cls.max_qubits}"
        params = "\n".join(f"{k}: {v}" for k, v in cls.parameters.items()) or "-"
        table.add_row(name, cls.kind, qubit_range, cls.summary, params)
    console.print(table)


data_app = typer.Typer(help="Build prompt datasets and fetch circuit collections.", no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("build")
def data_build(
    out: Path = typer.Option(Path("data"), "--out", help="Output folder."),
    small: bool = typer.Option(False, "--small", help="A few rows per family (tests, quickstart)."),
    collections: str = typer.Option("tcount,mqt,qiskit-arith", help="Rewrite collections, comma-separated."),
    suite_dir: Optional[Path] = typer.Option(None, help="Folder of the T-count suite's .qasm files."),
    seed: int = typer.Option(42, help="Split and sampling seed."),
) -> None:
    """Write the synthesis prompt dataset and the rewrite-with-fewer-T datasets."""
    from rubriq.data import build_all

    names = tuple(c.strip() for c in collections.split(",") if c.strip())
    try:
        report = build_all(out, small=small, collections=names, suite_dir=suite_dir, seed=seed)
    except (FileNotFoundError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    table = Table(title=f"datasets written to {out}")
    for col in ("dataset", "rows (train/val/test)", "T0 buckets: selected/available", "skipped"):
        table.add_column(col)
    for name, info in report.items():
        rows = info if name == "prompts" else info["rows"]
        buckets = "" if name == "prompts" else ", ".join(
            f"{b}: {v['selected']}/{v['available']}" for b, v in info["buckets"].items())
        skipped = "" if name == "prompts" else ", ".join(f"{k}: {v}" for k, v in info["skipped"].items())
        table.add_row(name, "/".join(str(rows.get(k, 0)) for k in ("train", "validation", "test")), buckets, skipped)
    console.print(table)


@data_app.command("fetch")
def data_fetch(
    what: str = typer.Argument(..., help="tcount-suite"),
    dest: Optional[Path] = typer.Option(None, help="Destination folder (default ~/.cache/rubriq/tcount_suite)."),
) -> None:
    """Download a public circuit collection."""
    from rubriq.data.suites import fetch_tcount_suite

    if what != "tcount-suite":
        err.print(f"[red]error:[/red] unknown collection {what!r}; available: tcount-suite")
        raise typer.Exit(2)
    try:
        path = fetch_tcount_suite(dest)
    except RuntimeError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1)
    console.print(f"T-count suite in {path}")


@app.command()
def baselines(
    suite: str = typer.Option("tcount", help="tcount | mqt | qiskit-arith | prompts"),
    methods: str = typer.Option("qiskit,tket,pyzx", help="Comma-separated: qiskit, tket, pyzx."),
    out: Path = typer.Option(Path("results/baselines"), help="Output folder (baselines.csv, baselines.md)."),
    suite_dir: Optional[Path] = typer.Option(None, help="Folder of the T-count suite's .qasm files."),
    published: Optional[Path] = typer.Option(None, help="published_tcounts.csv to show as reference columns."),
    max_t0: Optional[int] = typer.Option(None, help="Only circuits with T0 <= this."),
    limit: Optional[int] = typer.Option(None, help="At most this many circuits (stratified, seed 42)."),
) -> None:
    """Run the compiler baselines (Qiskit O3, TKET, PyZX) with equivalence checks."""
    import csv as _csv

    from rubriq.baselines.runner import run_suite, write_reports
    from rubriq.data.suites import load_collection, stratify

    method_list = [m.strip() for m in methods.split(",") if m.strip()]
    try:
        if suite == "prompts":
            circuits = _prompt_reference_circuits()
        else:
            circuits = load_collection(suite, suite_dir)
    except (FileNotFoundError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    if max_t0 is not None:
        circuits = [c for c in circuits if c.t0 <= max_t0]
    if limit is not None:
        circuits, _ = stratify(circuits, total=limit)
    reference: dict[str, dict] = {}
    columns: tuple[str, ...] = ()
    if published is not None:
        with open(published, encoding="utf-8") as fh:
            reference = {r["circuit"]: r for r in _csv.DictReader(fh)}
        columns = ("PyZX", "Tpar", "Nam", "Feynman")
    title = f"Compiler baselines: {suite}"
    try:
        rows = run_suite(circuits, method_list, reference,
                         on_row=lambda done: write_reports(done, method_list, out, title + " (in progress)", columns))
    except ValueError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    csv_path, md_path = write_reports(rows, method_list, out, title, columns)
    console.print(f"wrote {csv_path} and {md_path}")


def _prompt_reference_circuits():
    from rubriq.data.prompts import synthesis_targets
    from rubriq.data.suites import NotCliffordT, make_entry, to_clifford_t

    import hashlib

    out = []
    for target in synthesis_targets():
        tag = hashlib.sha256(json.dumps(target.spec(), sort_keys=True).encode()).hexdigest()[:8]
        try:
            out.append(make_entry("prompts", f"{target.name}_{target.num_qubits}_{tag}",
                                  to_clifford_t(target.reference_circuit()), "reference circuit"))
        except NotCliffordT:
            continue
    return out


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Start a sandbox worker and report which isolation layers are active on this machine."""
    from rubriq.extract.sandbox import doctor as sandbox_doctor

    report = sandbox_doctor()
    if as_json:
        print(json.dumps(report, indent=2))
        return
    table = Table(title=f"RubriQ sandbox layers (euid {report.get('euid')}, Python {report.get('python')})")
    table.add_column("layer", no_wrap=True)
    table.add_column("active")
    table.add_column("why not")
    for name, active in report["active"].items():
        table.add_row(name, "[green]yes[/green]" if active else "[yellow]no[/yellow]", report["why"].get(name, ""))
    console.print(table)
    console.print("See SECURITY.md for what holds when a layer is inactive.")


if __name__ == "__main__":  # pragma: no cover
    app()
