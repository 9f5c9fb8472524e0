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
    """`key=value` pairs (rubriq.targets.parse_params), errors reported against --param."""
    from rubriq.targets import TargetError, parse_params

    try:
        return parse_params(items)
    except TargetError as exc:
        raise typer.BadParameter(str(exc), param_hint="--param") from None


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
    """Write the synthesis prompt dataset and the rewrite-with-fewer-T datasets (split by target:
    no target in two splits)."""
    from rubriq.data import build_all

    names = tuple(c.strip() for c in collections.split(",") if c.strip())
    try:
        report = build_all(out, small=small, collections=names, suite_dir=suite_dir, seed=seed)
    except (FileNotFoundError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    table = Table(title=f"datasets written to {out}")
    for col in ("dataset", "rows (train/val/test)", "targets (train/val/test)", "T0 buckets: selected/available",
                "skipped"):
        table.add_column(col)
    for name, info in report.items():
        rows, targets = info["rows"], info["targets"]
        buckets = "" if name == "prompts" else ", ".join(
            f"{b}: {v['selected']}/{v['available']}" for b, v in info["buckets"].items())
        skipped = "" if name == "prompts" else ", ".join(f"{k}: {v}" for k, v in info["skipped"].items())
        table.add_row(name, *("/".join(str(counts.get(k, 0)) for k in ("train", "validation", "test"))
                              for counts in (rows, targets)), buckets, skipped)
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
    methods: str = typer.Option("qiskit,tket,pyzx,best", help="Comma-separated: qiskit, tket, pyzx, best (the "
                                                             "verified minimum of all, plus PyZX then TKET/Qiskit)."),
    out: Path = typer.Option(Path("results/baselines"), help="Output folder (baselines.csv, baselines.md)."),
    suite_dir: Optional[Path] = typer.Option(None, help="Folder of the T-count suite's .qasm files."),
    published: Optional[Path] = typer.Option(None, help="published_tcounts.csv to show as reference columns."),
    max_t0: Optional[int] = typer.Option(None, help="Only circuits with T0 <= this."),
    limit: Optional[int] = typer.Option(None, help="At most this many circuits (stratified, seed 42)."),
    route_timeout: float = typer.Option(180.0, help="Seconds per compiler route (compile + verify); a timed-out "
                                                    "route is recorded as such, the other routes still count."),
    workers: int = typer.Option(0, help="Worker processes (0 = one per core)."),
    resume: bool = typer.Option(False, help="Skip (circuit, method) cells already in OUT/baselines.csv."),
) -> None:
    """Run the compiler baselines (Qiskit O3, TKET, PyZX, best) with equivalence checks."""
    import csv as _csv
    import os

    from rubriq.baselines.runner import load_done, run_suite, write_reports
    from rubriq.data.suites import load_collection, stratify

    if route_timeout <= 0:
        raise typer.BadParameter("must be > 0 seconds", param_hint="--route-timeout")
    if workers < 0:
        raise typer.BadParameter("must be >= 0 (0 = one per core)", param_hint="--workers")
    for flag, value in (("--limit", limit), ("--max-t0", max_t0)):
        if value is not None and value < 0:
            raise typer.BadParameter("must be >= 0", param_hint=flag)
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
        # the gadgetized columns use extra ancillas (a different problem): shown, marked, never compared
        columns = ("PyZX", "Tpar", "Nam", "Feynman", "ATQ_gadgetized", "polytof_gadgetized")
    title = f"Compiler baselines: {suite}"
    done = load_done(out / "baselines.csv", method_list) if resume else {}
    if done:
        console.print(f"resuming: {len(done)} (circuit, method) cells already in {out / 'baselines.csv'}")
    try:
        rows = run_suite(circuits, method_list, reference, route_timeout_s=route_timeout,
                         workers=workers or os.cpu_count() or 1, done=done,
                         on_row=lambda finished: write_reports(finished, method_list, out, title + " (in progress)",
                                                               columns))
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
    """Start a sandbox worker and report which isolation layers hold on this machine, and the
    seccomp allow-list. Exit code 1 when a layer is missing."""
    from rubriq.extract.sandbox import SandboxUnavailable
    from rubriq.extract.sandbox import doctor as sandbox_doctor

    try:
        report = sandbox_doctor()
    except SandboxUnavailable as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1)
    if as_json:
        print(json.dumps(report, indent=2))
        raise typer.Exit(0 if all(report["active"].values()) else 1)
    table = Table(title=f"RubriQ sandbox layers (euid {report.get('euid')}, child's host uid "
                        f"{report.get('outside_uid')}, Python {report.get('python')})")
    table.add_column("layer", no_wrap=True)
    table.add_column("holds")
    table.add_column("why not")
    for name, active in report["active"].items():
        table.add_row(name, "[green]yes[/green]" if active else "[yellow]no[/yellow]", report["why"].get(name, ""))
    console.print(table)
    sc = report.get("seccomp") or {}
    if sc:
        console.print(f"seccomp: default {sc['default']}; other architectures and x32: "
                      f"{sc['other architectures and x32']}; ENOSYS: {', '.join(sc['ENOSYS'])}", highlight=False)
        console.print("allowed: " + ", ".join(sc["allowed"]), highlight=False)
        for name, condition in sc["allowed with conditions"].items():
            console.print(f"allowed if {condition}: {name}", highlight=False, markup=False)
    console.print("See SECURITY.md for what each layer does and what holds when one is missing.")
    if not all(report["active"].values()):
        raise typer.Exit(1)


train_app = typer.Typer(help="Train a policy (GRPO, Sparse-GRPO, Sparse-PPO, ablations).", no_args_is_help=True)
app.add_typer(train_app, name="train")


@train_app.command("run")
def train_run(
    config: Path = typer.Argument(..., help="Training YAML (configs/rubriq_grpo.yaml, configs/variants/...)."),
    launcher: str = typer.Option("python", help="python (one process) or accelerate."),
    num_processes: int = typer.Option(1, help="Processes over all machines (GPUs)."),
    num_machines: int = typer.Option(1, help="Machines (multi-node needs --main-process-ip)."),
    machine_rank: int = typer.Option(0, help="Rank of this machine."),
    main_process_ip: Optional[str] = typer.Option(None, help="Rank-0 host for multi-node runs."),
    accelerate_config: Optional[Path] = typer.Option(None, help="e.g. configs/accelerate/deepspeed_zero2.yaml"),
    cpu: bool = typer.Option(False, "--cpu", help="Run the accelerate processes on CPUs (gloo): tests, debugging."),
    main_process_port: int = typer.Option(29500, help="Rendezvous port of rank 0."),
    resume: bool = typer.Option(False, help="Continue from the last checkpoint in output_dir."),
    max_steps: Optional[int] = typer.Option(None, help="Override the RL max_steps."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the config, print the command, run nothing."),
) -> None:
    """Train with the entry point rubriq/training/train_rubriq.py (here or under accelerate)."""
    import subprocess

    from rubriq.config import ConfigError
    from rubriq.training.config import TrainSettings
    from rubriq.training.launch import LaunchSettings, as_shell, check_runnable, launch_command

    launch = LaunchSettings(launcher, num_processes, num_machines, machine_rank, main_process_ip, main_process_port,
                            accelerate_config=str(accelerate_config) if accelerate_config else None, cpu=cpu)
    try:
        settings = TrainSettings.from_yaml(config)
        cmd = launch_command(config, launch, resume=resume, max_steps=max_steps)
    except (ConfigError, OSError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    if dry_run:
        console.print(f"config ok: {config} ({settings.algorithm}, reward {settings.reward.kind}, "
                      f"model {settings.model.name_or_path}, output {settings.output_dir})")
        print(as_shell(cmd))
        return
    try:
        check_runnable(launch)
    except (RuntimeError, FileNotFoundError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    raise typer.Exit(subprocess.call(cmd))


@train_app.command("variants")
def train_variants(
    base: Path = typer.Option(Path("configs/rubriq_grpo.yaml"), help="The config the variants start from."),
    out: Path = typer.Option(Path("configs/variants"), help="Folder for the variant YAML files."),
    delta: float = typer.Option(0.05, help="Weight step of the sensitivity grid."),
) -> None:
    """Write Sparse-GRPO, Sparse-PPO, no-w_H/T/E and the +/-delta weight grid as YAML files."""
    from rubriq.config import ConfigError
    from rubriq.training.variants import write_variants

    try:
        paths = write_variants(base, out, delta)
    except (ConfigError, OSError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    console.print(f"wrote {len(paths)} variants to {out}: " + ", ".join(p.stem for p in paths))


study_app = typer.Typer(help="Studies that measure what training does (docs/studies.md).", no_args_is_help=True)
app.add_typer(study_app, name="study")


@study_app.command("convergence")
def study_convergence(
    config: Path = typer.Argument(..., help="Study YAML (configs/studies/convergence_cpu.yaml)."),
    out: Optional[Path] = typer.Option(None, help="Output folder (default: the study's output_dir)."),
    arm: Optional[list[str]] = typer.Option(None, help="Run only this arm (repeatable); default: all."),
    seed: Optional[list[int]] = typer.Option(None, help="Run only this seed (repeatable); default: all."),
    summary_only: bool = typer.Option(False, "--summary-only", help="Rewrite the summary from finished arm-seeds."),
) -> None:
    """Rubric vs gated rubric vs sparse reward vs no RL from one warm-start, over seeds, evaluated on
    held-out targets by sampling. Resumable: finished arm-seeds are skipped."""
    import logging

    from rubriq.config import ConfigError
    from rubriq.studies import convergence

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        if summary_only:
            study = convergence.StudySettings.from_yaml(config)
            folder = out or Path(study.output_dir)
            rows = [r for r in (folder / "data" / f"{study.split}.jsonl").read_text().splitlines() if r.strip()]
            n = min(len(rows), study.max_prompts) if study.max_prompts else len(rows)
            report = convergence.write_summary(folder, study, n)
        else:
            report = convergence.run(config, out, arm or None, seed or None,
                                     progress=lambda m: console.print(f"[bold]study:[/] {m}"))
    except (ConfigError, OSError, RuntimeError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    console.print(f"[green]summary:[/] {report}")


hardware_app = typer.Typer(help="Transpile and run circuits on IBM / IonQ or their offline emulation.",
                           no_args_is_help=True)
app.add_typer(hardware_app, name="hardware")


@hardware_app.command("run")
def hardware_run(
    circuits: list[Path] = typer.Argument(..., help=".qasm files, folders, or an evaluation JSONL."),
    backend: list[str] = typer.Option(["ibm_eagle"], help="Catalog backend (repeatable)."),
    shots: int = typer.Option(4096, help="Shots per circuit."),
    top_k: int = typer.Option(5, help="Circuits taken from an evaluation JSONL (best correct by reward)."),
    threshold: float = typer.Option(0.05, help="KL flag threshold in nats (the paper's 0.05)."),
    out: Path = typer.Option(Path("results/hardware"), help="results.json, jobs.json, kl.png"),
    offline: bool = typer.Option(False, help="Emulate even when a provider token is set."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Transpile and print what would be sent."),
) -> None:
    """The paper's hardware pipeline (same as python -m rubriq.hardware.submit_ibm_ionq)."""
    from rubriq.hardware.submit_ibm_ionq import main as submit_main

    argv = ["--circuits", *map(str, circuits), "--shots", str(shots), "--top-k", str(top_k), "--threshold",
            str(threshold), "--out", str(out)] + [x for b in backend for x in ("--backend", b)]
    argv += ["--offline"] * offline + ["--dry-run"] * dry_run
    raise typer.Exit(submit_main(argv))


@hardware_app.command("backends")
def hardware_backends() -> None:
    """The backend catalog: qubits, topology, native gates, depth budget, error rates and sources."""
    from rubriq.hardware.catalog import CATALOG, error_rates

    table = Table(title="RubriQ backend catalog")
    for col in ("backend", "device", "qubits", "topology", "native gates", "max depth", "e_1q", "e_2q", "e_readout",
                "source"):
        table.add_column(col)
    for name, spec in CATALOG.items():
        e = error_rates(name)
        table.add_row(name, spec.family, str(spec.num_qubits), spec.topology, " ".join(sorted(spec.native_gates)),
                      str(spec.max_depth), f"{e['error_1q']:.2e}", f"{e['error_2q']:.2e}", f"{e['error_readout']:.2e}",
                      spec.source)
    console.print(table)


@app.command()
def evaluate(
    model: str = typer.Option(..., help="Hub id, model or adapter folder, 'embedded', or 'tiny' (tests)."),
    dataset: Path = typer.Option(Path("data/prompts"), help="Folder written by `rubriq data build`."),
    split: str = typer.Option("test", help="Dataset split."),
    samples: int = typer.Option(1, help="Completions per prompt (k of pass@k)."),
    temperature: float = typer.Option(0.0, help="0: greedy (then samples must be 1)."),
    max_new_tokens: int = typer.Option(512, help="Tokens per completion."),
    max_prompts: int = typer.Option(0, help="Evaluate at most this many prompts (0: all)."),
    eps: float = typer.Option(0.01, help="Correct: F_avg >= 1 - eps."),
    baselines: str = typer.Option("", help="Compiler baselines on the same targets, e.g. 'qiskit,pyzx'."),
    out: Path = typer.Option(Path("runs/eval"), help="records.jsonl, summary.json"),
) -> None:
    """Sample a policy on a split and compute the paper's metrics (docs/metrics.md)."""
    from rubriq.evaluation.evaluate import EvalRequest, run_evaluation

    req = EvalRequest(model=model, dataset=str(dataset), split=split, samples=samples, temperature=temperature,
                      max_new_tokens=max_new_tokens, max_prompts=max_prompts, eps=eps)
    try:
        summary = run_evaluation(req, out, baselines=tuple(m for m in baselines.split(",") if m))
    except (ValueError, OSError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    s = summary["overall"]
    table = Table(title=f"{model} on {dataset} [{split}] ({s['completions']} completions)")
    for col in ("parse rate", "mean F_avg", "correct", "C (correct only)", "MNTC", "V", "pass@1", "mean reward",
                "wrong rewarded", "trivial"):
        table.add_column(col)
    fmt = lambda v, d=3: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    table.add_row(fmt(s["parse_rate"], 2), fmt(s["mean_fidelity"]), fmt(s["correct_rate"], 2), fmt(s["compression"], 2),
                  fmt(s["mntc"]), fmt(s["violation_rate"], 2), fmt(s.get("pass@1"), 2), fmt(s["mean_reward"]),
                  fmt(s["wrong_rewarded_rate"], 2), fmt(s["trivial_rate"], 2))
    console.print(table)
    console.print(f"wrote {out / 'records.jsonl'} and {out / 'summary.json'}")


@app.command()
def report(
    inputs: list[Path] = typer.Argument(..., help="Training runs (metrics.jsonl) and/or evaluations (records.jsonl)."),
    out: Path = typer.Option(Path("runs/report"), help="report.md, report.html, PNGs"),
    target_metric: str = typer.Option("reward", help="Logged metric for time-to-target (e.g. compression)."),
    target_value: float = typer.Option(0.5, help="Threshold of the time-to-target (paper: compression 3.3)."),
    eps: float = typer.Option(0.01, help="Correct: F_avg >= 1 - eps."),
) -> None:
    """Tables and plots from training runs and evaluations (markdown + self-contained HTML)."""
    from rubriq.evaluation.report import write_report

    try:
        md, page = write_report(inputs, out, target_metric, target_value, eps)
    except (ValueError, OSError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    console.print(f"wrote {md} and {page}")


@app.command()
def synthesize(
    spec: str = typer.Argument(..., help='Natural-language spec, e.g. "Synthesize a 4-qubit QFT circuit".'),
    target: Optional[str] = typer.Option(None, help="Target name (see `rubriq targets`); else read from the spec."),
    qubits: Optional[int] = typer.Option(None, help="Number of qubits (with --target)."),
    param: list[str] = typer.Option([], help="Target parameter key=value (repeatable)."),
    model: str = typer.Option("embedded", help="Policy: hub id, folder, 'embedded', 'tiny'."),
    n: int = typer.Option(16, "-n", help="Candidates to sample."),
    fmt: str = typer.Option("qasm2", "--format", help="qasm2 | qasm3 | python"),
    max_new_tokens: int = typer.Option(512, help="Tokens per candidate."),
    optimize: bool = typer.Option(False, help="Verified compiler post-pass (PyZX, Qiskit) on the best circuit."),
) -> None:
    """Sample N circuits for a spec, print the best correct one with its scores and drawing."""
    from qiskit import qasm2

    from rubriq.evaluation.synthesize import SpecNotUnderstood, synthesize as run_synthesis, target_from_text
    from rubriq.targets import TargetError, make_target

    try:
        tgt = make_target(target, qubits, **_parse_params(param)) if target else target_from_text(spec)
    except (SpecNotUnderstood, TargetError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)
    console.print(f"target: {tgt!r} (prompting with the target's training prompt, format {fmt})")
    result = run_synthesis(tgt, model=model, n=n, fmt=fmt, max_new_tokens=max_new_tokens, optimize=optimize)
    parsed = sum(c["result"]["parsed"] for c in result.candidates)
    if result.best is None:
        console.print(f"[yellow]no functionally correct circuit among {n} candidates[/] ({parsed} parsed); "
                      "try a trained policy (--model runs/.../final) or a larger -n")
        raise typer.Exit(1)
    best = result.best["result"]
    console.print(f"best of {n} ({parsed} parsed): reward {best['reward']:.3f}, F_avg {best['average_fidelity']:.6f}, "
                  f"T = {best['t_count']} (T0 = {tgt.t0}), depth {best['depth']}")
    console.print("scores: " + ", ".join(f"{k} {v:.3f}" for k, v in best["scores"].items()))
    print(qasm2.dumps(result.circuit))
    print(result.circuit.draw("text", fold=120))
    if optimize:
        if result.optimized is None:
            console.print("post-pass: no verified rewrite lowered the T-count or depth; keeping the sampled circuit")
        else:
            o = result.optimized
            console.print(f"post-pass {o['method']}: verified (F_avg {o['result']['average_fidelity']:.6f}), "
                          f"T {best['t_count']} -> {o['result']['t_count']}, depth {best['depth']} -> "
                          f"{o['result']['depth']}")
            print(qasm2.dumps(o["circuit"]))


@app.command()
def quickstart(
    config: Optional[Path] = typer.Option(None, help="Training YAML (default: configs/quickstart_cpu.yaml)."),
    out: Path = typer.Option(Path("runs/quickstart"), help="Output folder (report.md, PNGs, JSONL)."),
    max_steps: Optional[int] = typer.Option(None, help="Override the number of GRPO steps."),
) -> None:
    """Embedded model -> SFT warm-start -> GRPO -> before/after evaluation and report (CPU)."""
    from rubriq.config import ConfigError
    from rubriq.training.models import ModelUnavailable
    from rubriq.training.quickstart import DEFAULT_CONFIG, run

    try:
        run(config or DEFAULT_CONFIG, out, max_steps=max_steps, console=console)
    except (ConfigError, ModelUnavailable, ValueError, OSError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2)


@app.command("app")
def serve_app(
    host: str = typer.Option("127.0.0.1", help="Interface to bind (0.0.0.0 exposes the app to your network)."),
    port: int = typer.Option(7860, help="TCP port."),
    model: str = typer.Option("none", help="Policy for the Synthesize tab: embedded, a model or adapter folder, "
                                           "tiny (random, for tests) or none."),
    concurrency: int = typer.Option(2, help="Requests processed at once (the rest wait in the queue)."),
    write_space: Optional[Path] = typer.Option(None, help="Write the files of a Hugging Face Space to this "
                                                          "folder and exit."),
) -> None:
    """Serve the interactive app (Score, Synthesize, Baselines tabs) in the browser."""
    if not 1 <= port <= 65535:
        raise typer.BadParameter(f"{port} is not a TCP port (1-65535)", param_hint="--port")
    if concurrency < 1:
        raise typer.BadParameter("must be >= 1", param_hint="--concurrency")
    if model not in ("none", "embedded", "tiny") and not Path(model).is_dir():
        raise typer.BadParameter(f"no model folder {model!r} (use embedded, none, or a folder written by "
                                 "`rubriq train run` / `rubriq quickstart`)", param_hint="--model")
    try:
        from rubriq.app import launch, write_space_files
    except ImportError as exc:
        err.print(f"[red]error:[/red] the app needs gradio: pip install -e '.[app]' ({exc})")
        raise typer.Exit(2)
    if write_space is not None:
        for path in write_space_files(write_space, model if model not in ("tiny", "none") else "embedded"):
            console.print(f"wrote {path}")
        return
    console.print(f"RubriQ app on http://{host}:{port}/ (model: {model}); Ctrl+C stops it")
    launch(host, port, model, block=True, concurrency=concurrency)


if __name__ == "__main__":  # pragma: no cover
    app()
