"""``rubriq quickstart`` (the CPU demo) and ``rubriq app`` (the browser app)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from rubriq.cli.common import (
    CONTEXT,
    app,
    check,
    check_model,
    console,
    fail,
    reported,
)
from rubriq.evaluation.settings import EndpointSettings
from rubriq.options import typer_options


@app.command(context_settings=CONTEXT)
def quickstart(
    config: Path | None = typer.Option(
        None, metavar="YAML", help="Training YAML (default: configs/quickstart_cpu.yaml)."
    ),
    out: Path = typer.Option(Path("runs/quickstart"), metavar="DIR", help="Output folder (report.md, PNGs, JSONL)."),
    max_steps: int | None = typer.Option(None, metavar="N", help="Override the number of GRPO steps."),
) -> None:
    """Embedded model -> SFT warm-start -> GRPO -> before/after evaluation and report (CPU)."""
    from rubriq.training.quickstart import DEFAULT_CONFIG, run

    check(max_steps is None or max_steps >= 1, "--max-steps", f"must be >= 1, got {max_steps}")
    check(config is None or config.is_file(), "--config", f"no such file: {config}")
    with reported():
        report_path = run(config or DEFAULT_CONFIG, out, max_steps=max_steps, console=console)
    final = out / "train" / "final"
    console.print(
        f"\ndone. report: {report_path}\nmodel:  {final}\nnext:\n"
        f'  rubriq synthesize "Synthesize a 3-qubit QFT circuit" --model {final} -n 4 --show-all\n'
        f"  rubriq evaluate --model {final} --dataset {out / 'data'} --split test --samples 4 "
        f"--temperature 0.8 --out runs/eval\n"
        f"  rubriq report {out} runs/eval --out runs/report",
        markup=False,
    )


@app.command("app", context_settings=CONTEXT)
@typer_options(EndpointSettings, into="remote", exclude=("concurrency",))
def serve_app(
    host: str = typer.Option(
        "127.0.0.1", metavar="HOST", help="Interface to bind (0.0.0.0 exposes the app to your network)."
    ),
    port: int = typer.Option(7860, metavar="PORT", help="TCP port."),
    model: str = typer.Option(
        "none",
        metavar="MODEL",
        help="Policy for the Synthesize tab: embedded, a model or adapter folder, tiny (random, for tests) or none; "
        "with --endpoint, the name of the served model.",
    ),
    concurrency: int = typer.Option(
        2,
        metavar="N",
        help="Requests processed at once (the rest wait in the queue); with --endpoint, also the endpoint "
        "requests in flight per request.",
    ),
    write_space: Path | None = typer.Option(
        None, metavar="DIR", help="Write the files of a Hugging Face Space to DIR and exit."
    ),
    remote: EndpointSettings = EndpointSettings(),
) -> None:
    """Serve the interactive app (Score, Synthesize, Baselines tabs) in the browser. With --endpoint
    URL --model NAME the Synthesize tab samples a model behind an OpenAI-compatible server (the
    URL and key are fixed here, never taken from the page)."""
    check(1 <= port <= 65535, "--port", f"{port} is not a TCP port (1-65535)")
    check(concurrency >= 1, "--concurrency", f"must be >= 1, got {concurrency}")
    remote = dataclasses.replace(remote, concurrency=concurrency)
    with reported():
        remote.validate()
    if remote.enabled:
        check(model != "none", "--model", "name the model the endpoint serves (--endpoint URL --model NAME)")
        check(write_space is None, "--write-space", "a Space serves a local model; drop --endpoint")
    elif model != "none":
        check_model(model)
    try:
        from rubriq.app import launch, load_app_policy, write_space_files
    except ImportError as exc:
        fail(f"the app needs gradio: pip install -e '.[app]' ({exc})")
    if write_space is not None:
        for path in write_space_files(write_space, model if model not in ("tiny", "none") else "embedded"):
            console.print(f"wrote {path}", markup=False)
        return
    where = f" at {remote.endpoint}" if remote.enabled else ""
    with reported():
        policy = load_app_policy(model, remote)  # an endpoint is checked now (key, URL, model)
    console.print(f"RubriQ app on http://{host}:{port}/ (model: {model}{where}); Ctrl+C stops it", markup=False)
    launch(host, port, model, block=True, concurrency=concurrency, policy=policy)
