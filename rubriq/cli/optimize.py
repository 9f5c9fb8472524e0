"""``rubriq optimize``: a user's circuit with fewer T gates from a policy, verified, beside the
compilers (rubriq/evaluation/optimize.py)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from rubriq.cli.common import (
    CONTEXT,
    EXIT_FAILED,
    app,
    check,
    check_model,
    check_sampling,
    console,
    fail,
    new_table,
    reported,
)
from rubriq.evaluation.settings import OPTIMIZE_SAMPLING, EndpointSettings
from rubriq.models.sampling import SamplingSpec
from rubriq.options import typer_options

STYLES = ("full", "compact", "minimal")


@app.command(context_settings=CONTEXT)
@typer_options(EndpointSettings, into="remote")
@typer_options(
    SamplingSpec,
    into="sampling",
    defaults=OPTIMIZE_SAMPLING.to_dict(),
    notes={
        "samples": "Rewrites to sample (0: the compilers only).",
        "max_new_tokens": "0: enough for a rewrite as long as the input.",
    },
)
def optimize(
    circuit: str = typer.Argument(
        ..., metavar="CIRCUIT", help="OpenQASM 2/3 file, Qiskit Python file (run in the sandbox), or - for stdin."
    ),
    model: str | None = typer.Option(
        None,
        metavar="MODEL",
        help="Policy: model or adapter folder (e.g. results/studies/rewriting/warm_start), 'embedded' (the "
        "default), 'tiny'; with --endpoint, the name of the served model.",
    ),
    compilers: str | None = typer.Option(
        None,
        metavar="LIST",
        help="Compilers on the same input: qiskit,tket,pyzx (default: those installed; '' or none: no compiler).",
    ),
    then: str = typer.Option(
        "", metavar="PASS", help="pyzx: run PyZX on the policy's best circuit (kept if lower in T)."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        metavar="FILE.qasm",
        help="The best verified circuit (default runs/optimize/NAME.opt.qasm); its JSON sidecar beside it (.json).",
    ),
    prompt_style: str | None = typer.Option(
        None,
        metavar="STYLE",
        help="full | compact | minimal (default: the style the policy was trained with, its rubriq_policy.json; "
        "full for an endpoint).",
    ),
    route_timeout: float = typer.Option(300.0, metavar="SECONDS", help="Time limit of each compiler route."),
    show_all: bool = typer.Option(False, "--show-all", help="List every sampled rewrite with its verdict."),
    remote: EndpointSettings = EndpointSettings(),
    sampling: SamplingSpec = OPTIMIZE_SAMPLING,
) -> None:
    """Rewrite CIRCUIT with fewer T gates: N samples from a policy and the compilers (Qiskit, TKET,
    PyZX), every circuit checked against the input (exact simulation, stabilizer tableaux or
    mqt.qcec; a sampled estimate is shown with its interval and never counts as verified). Prints
    one table and writes the best verified circuit with a JSON sidecar. Exit 1 when no verified
    circuit has T <= T0."""
    from rubriq.evaluation.optimize import THEN, PolicySpec, installed_compilers, missing_compiler

    n = sampling.samples
    check(n >= 0, "--samples", f"must be >= 0 (0: the compilers only), got {n}")
    if n:
        check_sampling(sampling.replace(max_new_tokens=max(sampling.max_new_tokens, 1)), "--samples")
    check(
        sampling.max_new_tokens >= 0,
        "--max-new-tokens",
        f"must be >= 0 (0: automatic), got {sampling.max_new_tokens}",
    )
    check(route_timeout > 0, "--route-timeout", f"must be > 0 seconds, got {route_timeout}")
    check(prompt_style is None or prompt_style in STYLES, "--prompt-style", f"use one of {', '.join(STYLES)}")
    if compilers is None:
        names = installed_compilers()
    else:
        names = tuple(c.strip() for c in compilers.split(",") if c.strip() and c.strip() != "none")
        for name in names:
            why = missing_compiler(name)
            check(why is None, "--compilers", str(why))
    passes = tuple(p.strip() for p in then.split(",") if p.strip())
    check(all(p in THEN for p in passes), "--then", f"unknown post-pass {then!r}; use {', '.join(THEN)}")
    check(not passes or n > 0, "--then", "runs on the policy's best circuit: needs --samples > 0")
    check(not passes or missing_compiler("pyzx") is None, "--then", str(missing_compiler("pyzx")))
    check(out is None or out.suffix == ".qasm", "--out", f"name a .qasm file, got {out}")
    check(out is None or not out.is_dir(), "--out", f"{out} is a folder; name a .qasm file")
    with reported():
        remote.validate()
    check(n > 0 or bool(names), "--compilers", "nothing to run: --samples 0 and no compiler")
    from rubriq.suites.user import CircuitFileError, load_circuit_file, load_circuit_text

    try:
        if circuit == "-":
            import sys

            source = load_circuit_text(sys.stdin.read(), "stdin")
        else:
            source = load_circuit_file(circuit)
    except CircuitFileError as exc:
        fail(str(exc), "CIRCUIT")
    spec = None
    if n:
        if remote.enabled:
            check(model is not None, "--model", "name the model the endpoint serves (--endpoint URL --model NAME)")
            assert model is not None
            from rubriq.evaluation.endpoint import EndpointPolicy, default_cache

            endpoint = EndpointPolicy(remote, model, remote.cache or default_cache())
            with reported():
                endpoint.check()  # key, URL and model, before any slow work
            style = prompt_style or "full"
        else:
            from rubriq.evaluation.evaluate import prompt_style_of

            model = model or "embedded"
            check_model(model)
            endpoint, style = None, prompt_style or prompt_style_of(model)
        spec = PolicySpec(model=model, sampling=sampling, style=style, endpoint=endpoint)
    target = out or Path("runs/optimize") / f"{source.name}.opt.qasm"
    dropped = ", ".join(f"{v} {k}" for k, v in source.dropped.items())
    console.print(
        f"{circuit if circuit != '-' else 'stdin'}: {source.circuit.num_qubits} qubits, "
        f"{source.circuit.size()} gates, T0 = {source.t0} ({source.kind}"
        + (f"; dropped {dropped}" if dropped else "")
        + ")",
        markup=False,
    )
    if spec is not None:
        where = f" at {remote.endpoint}" if remote.enabled else ""
        console.print(f"policy: {spec.model}{where}, {spec.style} prompt, {n} samples", markup=False)
    from rubriq.evaluation.optimize import optimize as run_optimize

    with reported():
        result = run_optimize(source, names, spec, passes, route_timeout)
    table = new_table(
        f"{source.name}: T0 = {result.t0}; every circuit checked against the input",
        "method",
        "T",
        "2q gates",
        "depth",
        "verdict",
        "seconds",
        keep_whole=("method",),
    )
    for row in result.rows:
        verdict = row.verdict if not row.how else f"{row.verdict} ({row.how})"
        if row is result.best:
            verdict += " *best*"
        table.add_row(
            row.method,
            "-" if row.t is None else str(row.t),
            "-" if row.two_qubit is None else str(row.two_qubit),
            "-" if row.depth is None else str(row.depth),
            escape(verdict),
            "-" if row.method == "input" else f"{row.seconds:.1f}",
        )
    console.print(table)
    for row in result.rows:
        if row.note:
            console.print(f"{row.method}: {row.note}", markup=False)
    if show_all and result.candidates:
        listing = new_table("sampled rewrites", "#", "parsed", "T", "verdict", "F_avg")
        for c in result.candidates:
            f = c.get("F_avg")
            listing.add_row(
                str(c["sample"]),
                "yes" if c["parsed"] else f"no ({c.get('error')})",
                str(c.get("t", "-")),
                escape(f"{c.get('verdict', '-')} ({c.get('how', '')})" if c.get("verdict") else "-"),
                "-" if f is None else f"{f:.6f}",
            )
        console.print(listing)
    best = result.best
    if best is None:
        console.print(
            f"no verified circuit with T <= T0 = {result.t0}: nothing written (the rows above say why)", markup=False
        )
        raise typer.Exit(EXIT_FAILED)
    from qiskit import qasm2

    assert best.circuit is not None
    sidecar = target.with_suffix(".json")
    with reported(flag="--out"):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(qasm2.dumps(best.circuit) + "\n", encoding="utf-8")
        sidecar.write_text(json.dumps(result.sidecar(circuit, str(target)), indent=2) + "\n", encoding="utf-8")
    how = f"{best.verdict} by {best.how}" + (f": {best.fidelity['note']}" if best.fidelity.get("note") else "")
    console.print(
        f"best: {best.method}, T {result.t0} -> {best.t}, two-qubit gates {result.rows[0].two_qubit} -> "
        f"{best.two_qubit}, depth {result.rows[0].depth} -> {best.depth} ({how})",
        markup=False,
    )
    console.print(f"wrote {target} and {sidecar}", markup=False)
