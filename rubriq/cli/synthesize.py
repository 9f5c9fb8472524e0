"""``rubriq synthesize``: best of N sampled circuits for a spec, with a verified post-pass."""

from __future__ import annotations

import typer
from rich.markup import escape

from rubriq.cli.common import (
    CONTEXT,
    EXIT_FAILED,
    app,
    check,
    check_model,
    check_sampling,
    check_target,
    console,
    fail,
    new_table,
    param_dict,
    reported,
)
from rubriq.evaluation.settings import SYNTHESIS_SAMPLING, EndpointSettings
from rubriq.models.sampling import SamplingSpec
from rubriq.options import typer_options

FORMATS = ("qasm2", "qasm3", "python")


@app.command(context_settings=CONTEXT)
@typer_options(EndpointSettings, into="remote")
@typer_options(
    SamplingSpec,
    into="sampling",
    defaults=SYNTHESIS_SAMPLING.to_dict(),
    notes={"samples": "Candidates to sample.", "temperature": "Must be > 0 here."},
)
def synthesize(
    spec: str = typer.Argument(
        ..., metavar="SPEC", help='Natural-language spec, e.g. "Synthesize a 4-qubit QFT circuit".'
    ),
    target: str | None = typer.Option(
        None, "--target", "-t", metavar="NAME", help="Target name (rubriq targets); else read from the spec."
    ),
    qubits: int | None = typer.Option(None, "--qubits", "-q", metavar="N", help="Number of qubits (with --target)."),
    param: list[str] = typer.Option([], "--param", "-p", metavar="KEY=VALUE", help="Target parameter (repeatable)."),
    model: str | None = typer.Option(
        None,
        metavar="MODEL",
        help="Policy: model or adapter folder, hub id, 'embedded' (the default), 'tiny'; with --endpoint, "
        "the name of the served model.",
    ),
    fmt: str = typer.Option("qasm2", "--format", metavar="FORMAT", help="qasm2 | qasm3 | python"),
    optimize: bool = typer.Option(
        False,
        help="Compiler post-pass (PyZX, Qiskit) on the best circuit, kept only if "
        "verified equivalent and correct with fewer T or less depth.",
    ),
    show_all: bool = typer.Option(False, "--show-all", help="List every candidate with its score or error."),
    remote: EndpointSettings = EndpointSettings(),
    sampling: SamplingSpec = SYNTHESIS_SAMPLING,
) -> None:
    """Sample N circuits for a spec, print the best correct one with its scores and drawing. The
    prompt is the one the policy was trained with (its folder's rubriq_policy.json)."""
    from rubriq.evaluation.evaluate import prompt_style_of
    from rubriq.evaluation.synthesize import SpecNotUnderstood, target_from_text

    check_sampling(sampling, "--samples")
    check(sampling.temperature > 0, "--temperature", f"must be > 0 for sampling, got {sampling.temperature}")
    n = sampling.samples
    check(fmt in FORMATS, "--format", f"unknown format {fmt!r}; use {', '.join(FORMATS)}")
    check_target(target, qubits)
    check(
        target is not None or (qubits is None and not param),
        "--target",
        "--qubits and --param go with --target (else the spec is read from the text)",
    )
    if target is not None:
        with reported(flag="--target"):
            tgt = _make_target(target, qubits, param)
    else:
        try:
            tgt = target_from_text(spec)
        except SpecNotUnderstood as exc:
            fail(str(exc), "SPEC")
        except ValueError as exc:  # recognized, but the size or a parameter is out of range
            fail(str(exc).replace("num_qubits", "the number of qubits"), "SPEC")
    with reported():
        remote.validate()
    policy = None
    if remote.enabled:
        check(model is not None, "--model", "name the model the endpoint serves (--endpoint URL --model NAME)")
        assert model is not None
        from rubriq.evaluation.endpoint import EndpointPolicy, default_cache

        policy = EndpointPolicy(remote, model, remote.cache or default_cache())
        with reported():
            policy.check()  # key, URL and model, before any slow work
        style = "full"
        console.print(
            f"target: {tgt!r}; prompting {model} at {remote.endpoint} with the {style} {fmt} prompt", markup=False
        )
    else:
        model = model or "embedded"
        check_model(model)
        style = prompt_style_of(model)
        console.print(f"target: {tgt!r}; prompting {model} with its {style} {fmt} prompt", markup=False)
    from rubriq.evaluation.synthesize import synthesize as run_synthesis

    with reported():
        result = run_synthesis(
            tgt,
            model=model,
            sampling=sampling,
            fmt=fmt,
            optimize=optimize,
            style=style,
            policy=policy,
        )
    if policy is not None:
        u = policy.usage.to_dict(remote)
        cost = f", cost {u['cost_usd']:.4f} USD" if "cost_usd" in u else ""
        console.print(
            f"endpoint: {u['requests']} requests ({u['retries']} retries), {u['from_cache']} candidates from the "
            f"cache {policy.cache.path}; tokens {u['prompt_tokens']:,} prompt + {u['completion_tokens']:,} "
            f"completion{cost}",
            markup=False,
        )
    parsed = sum(c.result["parsed"] for c in result.candidates)
    if show_all:
        table = new_table(
            f"{n} candidates, best reward first", "#", "reward", "F_avg", "T", "depth", "extracted by / error"
        )
        ranked = sorted(result.candidates, key=lambda c: -c.result["reward"])
        for i, c in enumerate(ranked, 1):
            r = c.result
            f = r.get("average_fidelity")
            table.add_row(
                str(i),
                f"{r['reward']:.3f}",
                "-" if f is None else f"{f:.6f}",
                str(r.get("t_count", "-")),
                str(r.get("depth", "-")),
                escape(r.get("strategy") or f"{r.get('error_type')}: {(r.get('error') or '')[:160]}"),
            )
        console.print(table)
    if result.best is None:
        console.print(
            f"no functionally correct circuit among {n} candidates ({parsed} parsed; --show-all lists "
            "them); sample more (-n) or train the policy further",
            markup=False,
        )
        raise typer.Exit(EXIT_FAILED)
    from qiskit import qasm2

    best = result.best.result
    console.print(
        f"best of {n} ({parsed} parsed): reward {best['reward']:.3f}, F_avg {best['average_fidelity']:.6f}, "
        f"T = {best['t_count']} (T0 = {tgt.t0}), depth {best['depth']}",
        markup=False,
    )
    console.print("scores: " + ", ".join(f"{k} {v:.3f}" for k, v in best["scores"].items()), markup=False)
    assert result.circuit is not None  # the best candidate's circuit
    print(qasm2.dumps(result.circuit))
    print(result.circuit.draw("text", fold=80))
    if optimize:
        if result.optimized is None:
            console.print(
                "post-pass: no compiler rewrite lowered the T-count or depth while staying correct; keeping "
                "the sampled circuit"
            )
        else:
            o = result.optimized
            console.print(
                f"post-pass {o.method}: verified equivalent ({o.verdict}), correct against the target (F_avg "
                f"{o.result['average_fidelity']:.6f}), T {best['t_count']} -> {o.result['t_count']}, "
                f"depth {best['depth']} -> {o.result['depth']}",
                markup=False,
            )
            print(qasm2.dumps(o.circuit))


def _make_target(name: str, qubits: int | None, param: list[str]):
    from rubriq.targets import make_target

    return make_target(name, qubits, **param_dict(param))
