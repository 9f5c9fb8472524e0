"""A client of ``rubriq serve``: timeouts, retries with backoff, batches split to the server's
limit.

Scoring is deterministic, so a retry is always safe: :class:`RubriQClient` retries a refused
request (503, waiting what ``Retry-After`` says), a gateway error (502, 504), a 5xx that did not
come from the RubriQ app (a proxy's, e.g. Ray Serve's when a replica died: the app's own answers
carry ``X-RubriQ-Request-ID``), a connection error and a timeout, with exponential backoff and
jitter, for ``patience`` seconds (default :data:`DEFAULT_PATIENCE`, or ``RUBRIQ_PATIENCE``: long
enough for the service to be restarted); then :class:`RubriQUnavailable` says what was tried,
and the caller's run stops there (a training run resumes from its last checkpoint).  A 4xx is
the request's fault and is raised at once as :class:`RubriQRequestError` with the server's
message (``items[3].target: unknown target ...``).  Every answer is checked to hold one result
per item.

Fork-safe: a client used in a process that was forked after it connected (a process pool of the
trainer's) opens connections of its own there, never the parent's.

>>> client = RubriQClient("http://127.0.0.1:8000")      # doctest: +SKIP
>>> client.score(["OPENQASM 2.0; ..."], ['{"algorithm": "qft", "num_qubits": 2}'])  # doctest: +SKIP
[{'reward': 0.83, 'scores': {...}, 'correct': True, 't0': 3, ...}]
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rubriq.serve.settings import API_KEY_ENV

log = logging.getLogger(__name__)

URL_ENV = "RUBRIQ_URL"
"""The environment variable the adapters read the server's URL from (unset: score in-process)."""
PATIENCE_ENV = "RUBRIQ_PATIENCE"
"""The environment variable the client reads its default ``patience`` (seconds) from."""
DEFAULT_PATIENCE = 600.0
"""Seconds a request keeps retrying an unavailable server by default: a restart of the service
(a new process, a Ray Serve replica, a rescheduled pod) fits, a lasting outage ends the run."""
APP_HEADER = "x-rubriq-request-id"
RETRYABLE = (502, 503, 504)


class RubriQError(RuntimeError):
    """Base of the client's errors."""


class RubriQRequestError(RubriQError, ValueError):
    """The server refused the request (4xx) or failed on it (its own 500): ``status`` and the
    server's message, which names the field."""

    def __init__(self, status: int, message: str, request_id: str | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.message, self.request_id = status, message, request_id


class RubriQUnavailable(RubriQError, ConnectionError):
    """No answer within the client's patience (server down, or overloaded for that long)."""


class RubriQClient:
    """``POST /v1/score`` and friends, with retries; thread-safe, reusable, ``close()`` or ``with``.

    ``url``: the server (``http://host:8000``); ``api_key``: the bearer key (default: the
    ``RUBRIQ_API_KEY`` variable); ``timeout``: seconds to wait for one answer (a batch of slow
    completions takes a while); ``patience``: seconds a request keeps retrying (default
    ``RUBRIQ_PATIENCE``, else :data:`DEFAULT_PATIENCE`), waiting ``backoff`` s first, doubling
    to ``max_backoff``; ``retries``: at most that many retries as well (default: as many as the
    patience allows); ``parallel``: chunks of a large batch sent at once.
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = 600.0,
        connect_timeout: float = 5.0,
        patience: float | None = None,
        retries: int | None = None,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_items: int | None = None,
        parallel: int = 4,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url: expected http://host:port, got {url!r}")
        if patience is None:
            patience = _patience_from_env()
        if patience < 0 or (retries is not None and retries < 0) or backoff < 0 or parallel < 1:
            raise ValueError("patience, retries and backoff must be >= 0, parallel >= 1")
        self.url = url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._timeouts = (timeout, connect_timeout)
        self._http, self._pid = self._connect(), os.getpid()
        self.patience, self.retries, self.backoff, self.max_backoff = patience, retries, backoff, max_backoff
        self.parallel = parallel
        self._max_items = max_items
        self.stats = {"requests": 0, "retries": 0}

    def __repr__(self) -> str:  # never the key
        return f"RubriQClient({self.url!r})"

    def __enter__(self) -> RubriQClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._pid == os.getpid():  # a forked child leaves the parent's connections alone
            self._http.close()

    def _connect(self) -> Any:
        import httpx

        timeout, connect = self._timeouts
        return httpx.Client(base_url=self.url, headers=self._headers, timeout=httpx.Timeout(timeout, connect=connect))

    @property
    def http(self) -> Any:
        """This process's ``httpx.Client``: after a fork, a new one (the parent's open connections
        belong to the parent; a child writing to them garbles both processes' requests)."""
        if self._pid != os.getpid():
            self._http, self._pid = self._connect(), os.getpid()
        return self._http

    # -- routes ----------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """``GET /health`` (retried like any request)."""
        return self._request("GET", "/health")

    def targets(self) -> list[dict[str, Any]]:
        """``GET /v1/targets``: the target algorithms the server scores."""
        return self._request("GET", "/v1/targets")["targets"]

    def rubric(self) -> dict[str, Any]:
        """``GET /v1/rubric``: the server's rubric settings (``RubricConfig.to_dict()``)."""
        return self._request("GET", "/v1/rubric")["rubric"]

    @property
    def max_items(self) -> int:
        """Items per request: the server's ``--max-items`` (asked once), or the constructor's."""
        if self._max_items is None:
            self._max_items = int(self.health().get("max_items", 256))
        return self._max_items

    def score(
        self, completions: list[str], targets: list[str | dict], rubric: dict | None = None
    ) -> list[dict[str, Any]]:
        """One result per completion (``EvaluationResult.to_dict()`` + ``correct`` + ``t0``), in
        order; ``targets[i]`` is completion i's target spec (a dataset's ``target`` column).
        Batches above the server's ``--max-items`` go as several requests, ``parallel`` at once."""
        completions, targets = list(completions), list(targets)
        if len(completions) != len(targets):
            raise ValueError(f"{len(completions)} completions but {len(targets)} targets")
        if not completions:
            return []
        items = [{"completion": c, "target": t} for c, t in zip(completions, targets, strict=True)]
        size = self.max_items
        chunks = [items[i : i + size] for i in range(0, len(items), size)]

        def send(chunk: list[dict]) -> list[dict]:
            body: dict[str, Any] = {"items": chunk}
            if rubric is not None:
                body["rubric"] = rubric
            results = self._request("POST", "/v1/score", body)["results"]
            if not isinstance(results, list) or len(results) != len(chunk):
                raise RubriQError(f"the server answered {len(results)} results for {len(chunk)} items")
            return results

        if len(chunks) == 1:
            return send(chunks[0])
        with ThreadPoolExecutor(min(self.parallel, len(chunks))) as pool:
            return [r for part in pool.map(send, chunks) for r in part]

    # -- transport -----------------------------------------------------------------------------
    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        import httpx

        content = None if payload is None else json.dumps(payload).encode()
        headers = {"content-type": "application/json"} if content is not None else None
        delay, start, last = self.backoff, time.monotonic(), ""
        deadline, attempt = start + self.patience, 0
        while True:
            attempt += 1
            self.stats["requests"] += 1
            wait = delay
            try:
                response = self.http.request(method, path, content=content, headers=headers)
            except httpx.TransportError as exc:  # connect/read errors, timeouts, dropped connections
                last = f"{type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                if status < 400:
                    return response.json()
                ours = APP_HEADER in response.headers
                message = _message(response)
                if status in RETRYABLE or (status >= 500 and not ours):
                    last = f"HTTP {status}: {message}"
                    retry_after = response.headers.get("retry-after", "")
                    if retry_after.isdigit():
                        wait = max(wait, float(retry_after))
                else:
                    raise RubriQRequestError(status, message, response.headers.get(APP_HEADER))
            left = deadline - time.monotonic()
            if left <= 0 or (self.retries is not None and attempt > self.retries):
                break
            self.stats["retries"] += 1
            pause = min(min(self.max_backoff, wait) * random.uniform(0.8, 1.2), left)  # the last try at the deadline
            (log.warning if attempt == 1 else log.info)(
                "%s %s%s: %s; retry %d in %.1f s (patience left: %.0f s)",
                method,
                self.url,
                path,
                last,
                attempt,
                pause,
                left,
            )
            time.sleep(pause)
            delay = min(self.max_backoff, delay * 2)
        raise RubriQUnavailable(
            f"{method} {self.url}{path}: no answer after {attempt} tries over {time.monotonic() - start:.1f} s "
            f"(last: {last}); is `rubriq serve` running there? The client waits {self.patience:g} s "
            f"(patience=, or {PATIENCE_ENV} in the trainer's environment)"
        )


def _patience_from_env() -> float:
    value = os.environ.get(PATIENCE_ENV, "").strip()
    if not value:
        return DEFAULT_PATIENCE
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{PATIENCE_ENV}: seconds the client waits for an unavailable server, got {value!r}") from None


def _message(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(data, dict) and "error" in data:
        return str(data["error"])
    return json.dumps(data)[:300]
