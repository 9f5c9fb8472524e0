"""The scoring app as a Ray Serve deployment: N replicas of the same FastAPI app
(:func:`rubriq.serve.app.create_app`), each with its own scoring service, behind Ray Serve's
HTTP proxy, so that a Ray cluster's CPU nodes score for the GPU nodes (``rubriq serve --ray
--replicas N``; a Ray cluster to join with ``--ray-address``, else one is started here).

Ray Serve's documented FastAPI ingress is used as is: ``serve.deployment(serve.ingress(builder)
(cls))`` with a builder function evaluated on each replica.  Ray routes each request to one
replica and restarts a replica that dies; the client retries what a dead replica dropped (a
5xx from Ray's proxy, a connection error).  Queue bounds, API key and metrics are per replica.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from typing import Any

from rubriq.serve.settings import ServeSettings

log = logging.getLogger(__name__)

APP_NAME = "rubriq"
DEPLOYMENT = "RubriQScorer"
MAX_ONGOING = 256
"""Requests one replica holds at once (each is a coroutine; its items count against --max-pending)."""
MAX_QUEUED = 1024
"""Requests Ray's proxy queues for the deployment before it answers 503 itself (no unbounded
backlog in front of the replicas either)."""


def application(settings: ServeSettings, replicas: int, cpus_per_replica: float | None = None) -> Any:
    """The Ray Serve application: ``replicas`` copies of the app built from ``settings`` (each
    replica scores with ``settings.workers`` processes; 0 = one per CPU it reserves)."""
    from ray import serve

    per_replica = cpus_per_replica if cpus_per_replica is not None else float(max(1, settings.workers))
    # each replica resolves workers=0 on its own machine; the host and port are the proxy's
    replica_settings = dataclasses.replace(settings, workers=settings.workers or max(1, int(per_replica)))

    def build_app():  # evaluated on each replica (Ray Serve's builder-function ingress)
        from rubriq.serve.app import create_app

        return create_app(replica_settings)

    class RubriQScorer:
        """One replica of the RubriQ scoring app."""

    deployment = serve.deployment(
        name=DEPLOYMENT,
        num_replicas=replicas,
        ray_actor_options={"num_cpus": per_replica},
        # each replica bounds its items itself (--max-pending, 503 + Retry-After): Ray passes it
        # many requests at once, and its own queue in front is bounded too (beyond: Ray's 503)
        max_ongoing_requests=MAX_ONGOING,
        max_queued_requests=MAX_QUEUED,
        health_check_period_s=2,
        health_check_timeout_s=30,
        graceful_shutdown_timeout_s=10,
    )(serve.ingress(build_app)(RubriQScorer))
    return deployment.bind()


def start(
    settings: ServeSettings,
    replicas: int,
    address: str | None = None,
    cpus_per_replica: float | None = None,
    num_cpus: int | None = None,
) -> None:
    """Start (or join, ``address``) a Ray cluster, start Serve's proxy on ``settings.host:port``
    and deploy the app; returns when every replica is up."""
    import ray
    from ray import serve

    # Serve's proxy must answer its readiness check within 5 s and its health check within 10 s, or
    # the controller kills it and `serve.start` fails: on a busy 2-core machine (measured in a
    # fresh-clone test run beside a training job) a starting proxy misses that. Generous defaults,
    # read by the controller this process starts; an operator's own values win.
    for name, seconds in (
        ("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "60"),
        ("RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S", "60"),
    ):
        os.environ.setdefault(name, seconds)
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
        if address is None:  # a cluster on this machine: room for every replica, as on a dev box
            per_replica = cpus_per_replica if cpus_per_replica is not None else float(max(1, settings.workers))
            kwargs["num_cpus"] = num_cpus or max(os.cpu_count() or 1, math.ceil(replicas * per_replica))
        ray.init(address=address, **kwargs)
    serve.start(http_options={"host": settings.host, "port": settings.port})
    serve.run(application(settings, replicas, cpus_per_replica), name=APP_NAME, route_prefix="/")


def serve_forever(settings: ServeSettings, replicas: int, address: str | None = None) -> None:
    """``rubriq serve --ray``: deploy, then wait until interrupted; shut Serve down at the end."""
    import ray
    from ray import serve

    start(settings, replicas, address)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()
        ray.shutdown()
