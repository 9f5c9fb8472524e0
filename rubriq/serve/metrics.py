"""The server's Prometheus metrics (``GET /metrics``), on a registry of its own per app (so that
two apps in one process, as in the tests, do not share counters).

- ``rubriq_requests_total{route, status}``: requests answered, by route and HTTP status
  (503: refused, the queue was full; 499: the client went away and the request was cancelled);
- ``rubriq_items_total{error_type}``: items scored, by ``error_type`` (``none``: scored);
- ``rubriq_request_seconds{route}``: latency histogram;
- ``rubriq_queue_items``: items accepted and not finished (what ``--max-pending`` bounds);
- ``rubriq_cache_hits_total``: items answered from the result cache.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    """The counters of one app."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "rubriq_requests", "Requests answered, by route and status.", ("route", "status"), registry=self.registry
        )
        self.items = Counter(
            "rubriq_items", "Items scored, by error_type (none: scored).", ("error_type",), registry=self.registry
        )
        self.latency = Histogram(
            "rubriq_request_seconds", "Request latency.", ("route",), buckets=BUCKETS, registry=self.registry
        )
        self.queue = Gauge("rubriq_queue_items", "Items accepted and not finished.", registry=self.registry)
        self.cache_hits = Counter("rubriq_cache_hits", "Items answered from the result cache.", registry=self.registry)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
