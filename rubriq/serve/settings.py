"""The server's settings, declared once (``rubriq/options.py``): ``rubriq serve`` derives its
flags from :class:`ServeSettings`, the app (:func:`rubriq.serve.app.create_app`) and the Ray
deployment read them.  Import-light: no FastAPI, no Qiskit."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from rubriq.options import option

API_KEY_ENV = "RUBRIQ_API_KEY"
"""The environment variable ``rubriq serve`` (and :class:`~rubriq.serve.client.RubriQClient`)
reads the API key from when ``--api-key`` is not given."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ServeSettings:
    """How ``rubriq serve`` binds, scores and bounds its work."""

    host: str = option("127.0.0.1", "Interface to bind (0.0.0.0 exposes the server: set an API key).", metavar="HOST")
    port: int = option(8000, "TCP port.", metavar="PORT")
    config: str | None = option(
        None, "Rubric YAML (configs/rubric_default.yaml); default: the defaults.", metavar="YAML"
    )
    workers: int = option(0, "Scoring processes (0: one per core; 1: one scoring thread in the server).", metavar="N")
    max_items: int = option(
        1024, "Most items in one POST /v1/score (more: 413; the client splits batches).", metavar="N"
    )
    max_body_mb: float = option(64.0, "Largest request body in MiB (more: 413).", metavar="MIB")
    max_completion_kb: int = option(
        1024,
        "Largest completion in KiB (more: 413); grows to twice a rewrite target's own completion caps.",
        metavar="KIB",
    )
    max_pending: int = option(
        4096,
        "Most items accepted and not finished; a request that does not fit gets 503 with Retry-After.",
        metavar="N",
    )
    api_key: str | None = dataclasses.field(default=None, repr=False, compare=False)
    """Bearer token every /v1 and /metrics request must carry (None: no authentication); never
    logged or printed (``repr`` leaves it out)."""

    def check(self) -> list[tuple[str, str]]:
        """(flag, what is wrong) for every bad value; empty when all are fine."""
        bad = []
        if not 1 <= self.port <= 65535:
            bad.append(("--port", f"{self.port} is not a TCP port (1-65535)"))
        if self.workers < 0:
            bad.append(("--workers", f"must be >= 0 (0: one per core), got {self.workers}"))
        for flag, value in (
            ("--max-items", self.max_items),
            ("--max-body-mb", self.max_body_mb),
            ("--max-completion-kb", self.max_completion_kb),
            ("--max-pending", self.max_pending),
        ):
            if not value > 0:
                bad.append((flag, f"must be > 0, got {value}"))
        if self.max_pending < self.max_items:
            bad.append(("--max-pending", f"must be >= --max-items ({self.max_items}), got {self.max_pending}"))
        if self.config is not None and not os.path.isfile(self.config):
            bad.append(("--config", f"no such file: {self.config}"))
        if self.api_key is not None and len(self.api_key) < 16:
            bad.append(
                (
                    "--api-key",
                    "use at least 16 characters (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')",
                )
            )
        return bad

    @property
    def scoring_workers(self) -> int:
        """``workers`` with 0 resolved to the number of cores."""
        return self.workers or os.cpu_count() or 1

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)

    @property
    def exposed(self) -> bool:
        """Whether the server binds beyond the loopback interface."""
        return self.host not in LOOPBACK


def api_key_from_env() -> str | None:
    """The API key in :data:`API_KEY_ENV`, or None (unset or empty)."""
    return os.environ.get(API_KEY_ENV) or None
