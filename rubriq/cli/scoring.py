"""``rubriq score`` (one completion, its rubric breakdown) and ``rubriq targets``."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from rubriq.cli.common import (
    CONTEXT,
    EXIT_FAILED,
    app,
    check_target,
    console,
    err,
    fail,
    new_table,
    param_dict,
    read_input,
    reported,
)


@app.command(context_settings=CONTEXT)
def score(
    file: str = typer.Argument(
        ..., metavar="FILE", help="Completion or circuit file (QASM, Python, or LLM text); '-' for stdin."
    ),
    target: str = typer.Option(..., "--target", "-t", metavar="NAME", help="Target algorithm (rubriq targets)."),
    qubits: int | None = typer.Option(None, "--qubits", "-q", metavar="N", help="Number of qubits of the target."),
    param: list[str] = typer.Option([], "--param", "-p", metavar="KEY=VALUE", help="Target parameter (repeatable)."),
    target_qasm: Path | None = typer.Option(
        None, metavar="FILE", help="QASM file of the target circuit (--target circuit)."
    ),
    config: Path | None = typer.Option(
        None, "--config", "-c", metavar="YAML", help="Rubric YAML (configs/rubric_default.yaml)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
) -> None:
    """Score one completion with the rubric and print the breakdown. Exit 0: scored; 1: nothing
    could be parsed or scored (the reason is printed); 2: bad input."""
    from rubriq.config import RubricConfig
    from rubriq.evaluator import RubriQEvaluator
    from rubriq.evaluator.result import is_correct

    check_target(target, qubits)
    params = param_dict(param)
    if target_qasm is not None:
        params["qasm"] = read_input(str(target_qasm), "--target-qasm", allow_empty=False)
    elif target == "circuit":
        fail("--target circuit needs the target circuit: --target-qasm FILE", "--target-qasm")
    text = read_input(file)
    with reported(flag="--config"):
        cfg = RubricConfig.from_yaml(config) if config else RubricConfig()
    with reported():
        evaluator = RubriQEvaluator(target_algorithm=target, num_qubits=qubits, config=cfg, **params)
    result = evaluator.evaluate(text)
    threshold = cfg.fidelity.correct_threshold
    correct = is_correct(result, threshold)
    if as_json:
        print(json.dumps({**result.to_dict(), "correct": correct, "correct_threshold": threshold}, indent=2))
    else:
        _print_result(result, correct, threshold)
    width = (result.target or {}).get("num_qubits")
    if result.parsed and result.num_qubits is not None and width and result.num_qubits < width:
        err.print(
            f"warning: the circuit has {result.num_qubits} qubits, the target {width}: it was scored against "
            f"the {width}-qubit target with the missing qubits left idle (identity)",
            markup=False,
            soft_wrap=True,
        )
    if result.error:
        raise typer.Exit(EXIT_FAILED)


def _print_result(result, correct: bool, threshold: float) -> None:
    title = f"RubriQ score: target {result.target.get('algorithm')} ({result.target.get('num_qubits')} qubits)"
    table = new_table(title, "dimension", "score", "weight", "detail", keep_whole=("dimension",))
    details = {
        "clifford": f"{result.num_gates} gates as written" if result.parsed else "",
        "tcount": f"T(c) = {result.t_count}" if result.t_count is not None else "",
        "hardware": f"best: {result.best_backend}" if result.best_backend else "",
        "fidelity": (
            f"F_process = {result.process_fidelity:.10f}, F_avg = {result.average_fidelity:.10f}"
            if result.fidelity_kind == "process"
            else f"F_state = {result.process_fidelity:.10f}"
            if result.fidelity_kind
            else ""
        ),
        "efficiency": f"depth {result.depth}, {result.num_qubits} qubits" if result.depth is not None else "",
    }
    for name, value in result.scores.items():
        weight = result.weights.get(name)
        table.add_row(name, f"{value:.4f}", "" if weight is None else f"{weight:.2f}", escape(details.get(name, "")))
    table.add_row("reward", f"{result.reward:.4f}", "", "R = sum of weight x score")
    console.print(table)
    if result.error:
        console.print(f"not scored ({result.error_type} error): {result.error}", markup=False, soft_wrap=True)
        return
    f = result.average_fidelity
    verdict = "CORRECT" if correct else "NOT CORRECT"
    console.print(
        f"{verdict}: F_avg = {f:.6f} {'>=' if correct else '<'} {threshold} (the correctness threshold); "
        f"reward {result.reward:.4f}. The reward is a weighted sum: a wrong circuit can score close to a "
        "correct one (README, 'Reading a score')."
        if f is not None
        else f"{verdict}: no fidelity",
        markup=False,
    )
    console.print(f"extracted by: {result.strategy}", markup=False)
    if result.hardware:
        hw = new_table(
            "hardware fit per backend",
            "backend",
            "S_H",
            "fits qubits",
            "fits depth",
            "native frac",
            "swaps",
            keep_whole=("backend",),
        )
        for name, row in result.hardware.items():
            hw.add_row(
                name,
                f"{row['score']:.4f}",
                str(row["fits_qubits"]),
                str(row["fits_depth"]),
                f"{row['native_fraction']:.2f}",
                "-" if row["swaps"] is None else str(row["swaps"]),
            )
        console.print(hw)


# -- targets --------------------------------------------------------------------------------------
@app.command(context_settings=CONTEXT)
def targets() -> None:
    """List the target algorithms and their parameters (--param KEY=VALUE)."""
    from rubriq.targets import TARGETS

    table = new_table("RubriQ targets", "target", "qubits", "what it is; parameters", keep_whole=("target",))
    for name, cls in TARGETS.items():
        qubit_range = "any" if name == "circuit" else f"{cls.min_qubits}-{cls.max_qubits}"
        params = "".join(f"\n  {k}: {v}" for k, v in cls.parameters.items())
        table.add_row(f"{name}\n({cls.kind})", qubit_range, escape(cls.summary + params))
        table.add_row("", "", "")
    console.print(table)
