"""``rubriq serve``: the rubric as an HTTP scoring service (uvicorn on one machine, or Ray Serve
replicas with ``--ray``); docs/integrations.md shows verl, OpenRLHF and TRL using it."""

from __future__ import annotations

import typer

from rubriq.cli.common import CONTEXT, app, check, console, err, fail, reported
from rubriq.options import typer_options
from rubriq.serve.settings import API_KEY_ENV, ServeSettings


@app.command("serve", context_settings=CONTEXT)
@typer_options(ServeSettings, into="settings")
def serve(
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar=API_KEY_ENV,
        metavar="KEY",
        show_envvar=True,
        help=f"Require Authorization: Bearer KEY on /v1 and /metrics (prefer the {API_KEY_ENV} variable: "
        "a flag shows in ps). Never logged.",
    ),
    ray: bool = typer.Option(False, "--ray", help="Deploy as Ray Serve replicas (needs the ray extra)."),
    replicas: int = typer.Option(2, "--replicas", metavar="N", help="Ray Serve replicas (with --ray)."),
    ray_address: str | None = typer.Option(
        None, "--ray-address", metavar="ADDR", help="Ray cluster to join (default: start one on this machine)."
    ),
    settings: ServeSettings = ServeSettings(),
) -> None:
    """Serve the rubric over HTTP: POST /v1/score (batches of completion + target items), GET
    /health, /v1/targets, /v1/rubric, /metrics (docs/integrations.md). Binds 127.0.0.1 unless
    --host says otherwise."""
    import dataclasses

    settings = dataclasses.replace(settings, api_key=api_key or None)
    for flag, message in settings.check():
        fail(message, flag)
    check(replicas >= 1, "--replicas", f"must be >= 1, got {replicas}")
    check(ray or (replicas == 2 and ray_address is None), "--ray", "--replicas and --ray-address go with --ray")
    try:
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        fail(f"the server needs the serve extra: pip install -e '.[serve]' ({exc})")
    if settings.exposed and settings.api_key is None:
        err.print(
            f"warning: binding {settings.host} without an API key: anyone who reaches this port can use "
            f"its CPUs (set {API_KEY_ENV})",
            markup=False,
            soft_wrap=True,
        )
    auth = "required" if settings.api_key else "none"
    if ray:
        try:
            import ray as _ray  # noqa: F401
            from ray import serve as _serve  # noqa: F401
        except ImportError as exc:
            fail(f"--ray needs the ray extra: pip install -e '.[ray]' ({exc})", "--ray")
        from rubriq.serve.ray_serve import serve_forever

        console.print(
            f"RubriQ scoring server (Ray Serve, {replicas} replicas) on http://{settings.host}:{settings.port}/ "
            f"(API key: {auth}); Ctrl+C stops it",
            markup=False,
        )
        with reported():
            serve_forever(settings, replicas, ray_address)
        return
    from rubriq.serve.app import run

    console.print(
        f"RubriQ scoring server on http://{settings.host}:{settings.port}/ ({settings.scoring_workers} scoring "
        f"workers, API key: {auth}); Ctrl+C stops it",
        markup=False,
    )
    with reported():
        run(settings)
