"""The HTTP app: FastAPI routes over one :class:`~rubriq.serve.service.ScoringService`.

==================  ===========================================================================
``POST /v1/score``  score a batch of ``{completion, target}`` items (:mod:`rubriq.serve.protocol`)
``GET /v1/targets`` the target algorithms, their qubit ranges and parameters
``GET /v1/rubric``  the server's rubric settings (weights, ...: what R is)
``GET /health``     liveness, version and the server's limits (no key needed)
``GET /metrics``    Prometheus text format (:mod:`rubriq.serve.metrics`)
==================  ===========================================================================

Every answer carries ``X-RubriQ-Request-ID``; an error is ``{"error": "<field>: <what>", "field",
"request_id"}`` with 400 (not JSON), 401 (no or wrong API key), 404/405, 413 (too large: body,
items, a completion), 422 (a bad field), 503 (queue full; ``Retry-After``).  A 500 is a bug: it
is logged with the request id and the traceback, and the answer says only the id.  With an API
key set, ``/v1/*`` and ``/metrics`` need ``Authorization: Bearer <key>`` (compared in constant
time; the key is never logged).  A request whose client disconnects is cancelled.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from rubriq import __version__
from rubriq.serve.metrics import Metrics
from rubriq.serve.protocol import BadRequest, parse
from rubriq.serve.service import Overloaded, ScoringService
from rubriq.serve.settings import ServeSettings

log = logging.getLogger(__name__)

DISCONNECT_POLL_S = 0.25
REQUEST_ID = "X-RubriQ-Request-ID"
"""On every answer of the app (not of a proxy in front of it: the client tells them apart)."""


def create_app(settings: ServeSettings | None = None, warm_up: bool = True) -> FastAPI:
    """The RubriQ scoring app; its service (one BatchScorer) starts here and closes at shutdown."""
    settings = settings or ServeSettings()
    metrics = Metrics()
    service = ScoringService(settings, metrics)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        if warm_up:
            await asyncio.to_thread(service.warm_up)
        try:
            yield
        finally:
            await asyncio.to_thread(service.close)

    app = FastAPI(
        title="RubriQ scoring server",
        version=__version__,
        summary="The RubriQ rubric (five dimensions and the reward) for quantum-circuit completions.",
        lifespan=lifespan,
    )
    app.state.service, app.state.metrics, app.state.settings = service, metrics, settings

    def answer(request: Request, status: int, body: dict[str, Any], headers: dict | None = None) -> JSONResponse:
        rid = request.state.request_id
        return JSONResponse({**body, "request_id": rid}, status_code=status, headers=headers)

    def error(request: Request, status: int, field: str | None, message: str, headers: dict | None = None):
        text = f"{field}: {message}" if field else message
        return answer(request, status, {"error": text, "field": field}, headers)

    app.add_middleware(RequestIds, metrics=metrics)

    @app.exception_handler(StarletteHTTPException)
    async def http_errors(request: Request, exc: StarletteHTTPException):
        return error(request, exc.status_code, None, str(exc.detail), getattr(exc, "headers", None))

    def authorized(request: Request) -> bool:
        if settings.api_key is None:
            return True
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), settings.api_key.encode())

    def unauthorized(request: Request) -> JSONResponse:
        return error(
            request,
            401,
            "Authorization",
            "missing or wrong API key (send Authorization: Bearer <key>)",
            {"WWW-Authenticate": "Bearer"},
        )

    @app.get("/health")
    async def health(request: Request) -> JSONResponse:
        return answer(
            request,
            200,
            {
                "status": "ok",
                "version": __version__,
                "pid": os.getpid(),  # which replica answered (Ray Serve)
                "workers": service.scorer.workers,
                "pending": service.pending,
                "scored": service.scorer.stats["evaluated"],
                "max_pending": settings.max_pending,
                "max_items": settings.max_items,
                "max_body_bytes": settings.max_body_bytes,
                "max_completion_bytes": settings.max_completion_kb * 1024,
                "auth": settings.api_key is not None,
            },
        )

    @app.get("/v1/targets")
    async def targets(request: Request) -> JSONResponse:
        if not authorized(request):
            return unauthorized(request)
        from rubriq.targets import TARGETS

        listing = [
            {
                "algorithm": name,
                "kind": cls.kind,
                "summary": cls.summary,
                "min_qubits": None if name == "circuit" else cls.min_qubits,
                "max_qubits": cls.max_qubits,
                "parameters": dict(cls.parameters),
            }
            for name, cls in TARGETS.items()
        ]
        return answer(request, 200, {"targets": listing})

    @app.get("/v1/rubric")
    async def rubric(request: Request) -> JSONResponse:
        if not authorized(request):
            return unauthorized(request)
        return answer(request, 200, {"rubric": service.config.to_dict()})

    @app.get("/metrics")
    async def prometheus(request: Request) -> Response:
        if not authorized(request):
            return unauthorized(request)
        metrics.queue.set(service.pending)
        return Response(metrics.render(), media_type=metrics.content_type)

    @app.post("/v1/score")
    async def score(request: Request) -> Response:
        if not authorized(request):
            return unauthorized(request)
        try:
            body = await _read_body(request, settings.max_body_bytes)
            parsed = await asyncio.to_thread(parse, body, service.limits, service.targets, service.config)
        except BadRequest as exc:
            return error(request, exc.status, exc.field, exc.message)
        size = len(parsed.items)
        try:
            service.admit(size)
        except Overloaded as exc:
            return error(request, 503, None, str(exc), {"Retry-After": str(exc.retry_after)})
        metrics.queue.set(service.pending)
        start = time.perf_counter()
        try:
            work = asyncio.ensure_future(service.score(parsed))
            while True:
                done, _ = await asyncio.wait({work}, timeout=DISCONNECT_POLL_S)
                if done:
                    break
                if await request.is_disconnected():
                    work.cancel()
                    log.info("request %s: the client went away; %d items cancelled", request.state.request_id, size)
                    return Response(status_code=499)
            results = work.result()
        except asyncio.CancelledError:
            work.cancel()
            raise
        finally:
            service.release(size)
            metrics.queue.set(service.pending)
        payload = {"request_id": request.state.request_id, "seconds": time.perf_counter() - start, "results": results}
        content = await asyncio.to_thread(json.dumps, payload, allow_nan=False) if size > 64 else json.dumps(payload)
        return Response(content, media_type="application/json")

    return app


ROUTES = ("/v1/score", "/v1/targets", "/v1/rubric", "/health", "/metrics")


class RequestIds:
    """Pure ASGI middleware: a request id on every request (``request.state.request_id``) and
    answer (``X-Request-ID``), the request counters and latency, and a logged, id-bearing 500 for
    anything a route raises."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = uuid.uuid4().hex[:16]
        scope.setdefault("state", {})["request_id"] = rid
        path = scope.get("path", "")
        route = path if path in ROUTES else "other"
        start, status, started = time.perf_counter(), 500, False

        async def send_with_id(message: dict) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status, started = message["status"], True
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (REQUEST_ID.lower().encode(), rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:  # a bug below the routes: logged with the id, answered 500
            log.exception("internal error (request %s, %s %s)", rid, scope.get("method"), path)
            if not started:
                body = json.dumps(
                    {
                        "error": f"internal error (request id {rid}); the server logged it, please report it",
                        "field": None,
                        "request_id": rid,
                    }
                ).encode()
                await send_with_id(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
        finally:
            self.metrics.requests.labels(route, str(status)).inc()
            self.metrics.latency.labels(route).observe(time.perf_counter() - start)


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused (413) as soon as it passes ``limit`` bytes (by Content-Length, or while
    it streams in)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, "body", f"{int(declared)} bytes, more than the server's --max-body-mb ({limit} bytes)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, "body", f"more than the server's --max-body-mb ({limit} bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def run(settings: ServeSettings, log_level: str = "info") -> None:
    """Serve ``settings`` with uvicorn until interrupted (``rubriq serve``)."""
    import uvicorn

    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=10,
    )
