"""``rubriq serve`` as a real process on 127.0.0.1: results equal to in-process scoring, every bad
input a 4xx naming its field, the API key, a bounded queue (503 then recovery), cancellation on
disconnect, a sandbox crash as one item's typed error, a dead scoring process retried, and the
client retrying through a server restart.  Load loops are bounded in count and time; the load
and fault figures are measured by benchmarks/bench_serve.py."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import threading
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from tests.serve_helpers import (  # noqa: E402
    MIXED,
    QFT2,
    QFT2_QASM,
    Server,
    differences,
    reference,
    running_a_job,
    slow_item,
)

KEY = "test-key-0123456789abcdef"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "server.log"
    with Server(
        "--workers",
        "2",
        "--max-items",
        "16",
        "--max-pending",
        "64",
        "--max-body-mb",
        "1",
        "--max-completion-kb",
        "64",
        env={"RUBRIQ_API_KEY": KEY},
        log=log,
    ) as s:
        yield s


def post(server, body, key=KEY, **kw):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if isinstance(body, (bytes, str)):
        return httpx.post(
            server.url + "/v1/score",
            content=body,
            headers={**headers, "content-type": "application/json"},
            timeout=120,
            **kw,
        )
    return httpx.post(server.url + "/v1/score", json=body, headers=headers, timeout=120, **kw)


def test_served_results_equal_in_process_evaluation(server):
    """The mixed batch (correct, wrong, unparseable, hostile Python, sandboxed Python, rewrite
    targets) scored by the server process equals a fresh in-process RubriQEvaluator per item, to
    1e-12 in every float and exactly elsewhere."""
    response = post(server, {"items": [{"completion": c, "target": t} for _, c, t in MIXED]})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == len(MIXED)
    for (label, completion, spec), got in zip(MIXED, results, strict=True):
        want = reference(completion, spec)
        assert not differences(got, want), (label, differences(got, want))
    by_label = {label: r for (label, _, _), r in zip(MIXED, results, strict=True)}
    assert by_label["correct"]["correct"] and by_label["rewrite, fewer T"]["correct"]
    assert by_label["rewrite, fewer T"]["t_count"] == 0 and by_label["rewrite, fewer T"]["t0"] == 2
    assert not by_label["wrong"]["correct"] and by_label["unparseable"]["error_type"] == "parse"
    assert by_label["hostile Python"]["reward"] == 0.0 and not os.path.exists("/tmp/rubriq-pwned")


from tests.serve_cases import BAD_INPUTS  # noqa: E402


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c.name for c in BAD_INPUTS])
def test_bad_input_is_a_4xx_naming_the_field(server, case):
    response = case.send(server.url, KEY)
    assert response.status_code == case.status, response.text
    body = response.json()
    assert body["error"].startswith(case.field), body
    assert body["request_id"] == response.headers["x-rubriq-request-id"]


def test_api_key_is_required_compared_and_never_logged(server):
    item = {"items": [{"completion": QFT2_QASM, "target": QFT2}]}
    assert post(server, item, key=None).status_code == 401
    wrong = post(server, item, key=KEY[:-1] + "x")
    assert wrong.status_code == 401 and wrong.headers["www-authenticate"] == "Bearer"
    assert post(server, item).status_code == 200
    assert httpx.get(server.url + "/metrics", timeout=10).status_code == 401
    health = httpx.get(server.url + "/health", timeout=10).json()  # liveness needs no key
    assert health["auth"] is True and KEY not in json.dumps(health)
    assert KEY not in server.log()


def test_metrics_are_prometheus_text(server):
    post(server, {"items": [{"completion": "no circuit", "target": QFT2}]})
    text = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=10).text
    from prometheus_client.parser import text_string_to_metric_families

    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {"rubriq_requests", "rubriq_items", "rubriq_request_seconds", "rubriq_queue_items"} <= set(families)
    parse_errors = [s for s in families["rubriq_items"].samples if s.labels.get("error_type") == "parse"]
    assert parse_errors and parse_errors[0].value >= 1
    assert any(s.labels.get("status") == "422" for s in families["rubriq_requests"].samples)


def test_full_queue_answers_503_with_retry_after_then_recovers(tmp_path):
    """max_pending 4: a request of 4 slow items fills the queue; one more item is refused with
    503 + Retry-After while they run, and accepted once they are done; nothing accepted is lost."""
    with Server("--workers", "1", "--max-items", "4", "--max-pending", "4", log=tmp_path / "log") as s:
        slow = {"items": [{"completion": slow_item(5_000_000, str(i)), "target": QFT2} for i in range(4)]}
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            first = pool.submit(post, s, slow, None)
            deadline = time.monotonic() + 120
            while httpx.get(s.url + "/health", timeout=5).json()["pending"] < 4 and time.monotonic() < deadline:
                time.sleep(0.02)  # paces the /health poll (the deadline bounds the wait)
            refused = post(s, {"items": [{"completion": QFT2_QASM, "target": QFT2}]}, None)
            assert refused.status_code == 503, refused.text
            assert int(refused.headers["retry-after"]) >= 1 and "--max-pending" in refused.json()["error"]
            done = first.result(timeout=120)
        answered = done.json()["results"]  # scored, or (on a starved machine) a typed timeout: never dropped
        assert done.status_code == 200 and len(answered) == 4
        assert all(r["parsed"] or r["error_type"] in ("parse", "budget") for r in answered), answered
        again = post(s, {"items": [{"completion": QFT2_QASM, "target": QFT2}]}, None)
        assert again.status_code == 200 and again.json()["results"][0]["correct"]


def test_a_client_that_goes_away_cancels_its_request(tmp_path):
    """A request of 8 slow items whose client disconnects is cancelled: its items leave the queue,
    the items not yet started are never scored, and it is counted as 499.  What was scored is
    counted behind a barrier, not after a pause: one fast item sent afterwards is answered by the
    server's one scoring thread only after whatever it had started (or been left) before it."""
    with Server("--workers", "1", "--max-items", "8", log=tmp_path / "log") as s:
        deadline = time.monotonic() + 120
        while httpx.get(s.url + "/health", timeout=5).json()["scored"] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # paces the /health poll for the start-up warm-up item
        before = httpx.get(s.url + "/health", timeout=5).json()["scored"]
        raw = json.dumps(
            {"items": [{"completion": slow_item(20_000_000, str(i)), "target": QFT2} for i in range(8)]}
        ).encode()
        with socket.create_connection(("127.0.0.1", s.port)) as sock:
            sock.sendall(
                b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(raw)}\r\n\r\n".encode()
                + raw
            )
            deadline = time.monotonic() + 120
            while httpx.get(s.url + "/health", timeout=5).json()["pending"] < 8 and time.monotonic() < deadline:
                time.sleep(0.02)  # paces the /health poll (the deadline bounds the wait)
        deadline = time.monotonic() + 180
        while httpx.get(s.url + "/health", timeout=5).json()["pending"] and time.monotonic() < deadline:
            time.sleep(0.05)  # paces the /health poll (the deadline bounds the wait)
        health = httpx.get(s.url + "/health", timeout=5).json()
        assert health["pending"] == 0
        # the barrier: a new item (never scored before) waits for the item that was running when the
        # client left, and for any the cancellation missed; then every such item is in the count
        probe = post(s, {"items": [{"completion": QFT2_QASM + " // after the disconnect", "target": QFT2}]}, None)
        assert probe.status_code == 200 and probe.json()["results"][0]["correct"]
        scored = httpx.get(s.url + "/health", timeout=5).json()["scored"] - before - 1
        assert scored <= 2, f"{scored} of 8 items scored after the client went away"
        assert 'status="499"' in httpx.get(s.url + "/metrics", timeout=5).text


def test_a_sandbox_crash_is_that_items_error_not_a_failed_batch(tmp_path):
    """kill -9 of the sandbox worker while it runs one item's Python: that item answers
    error_type="sandbox"; the other items of the request are scored."""
    with Server("--workers", "1", log=tmp_path / "log") as s:
        items = [{"completion": slow_item(60_000_000, "crash"), "target": QFT2}] + [
            {"completion": c, "target": t} for _, c, t in MIXED[:4]
        ]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(post, s, {"items": items}, None)
            deadline = time.monotonic() + 240  # the first Python job starts the zygotes
            zygotes = []
            while time.monotonic() < deadline and not zygotes:
                zygotes = [p for p in s.children("rubriq.extract.sandbox.zygote") if running_a_job(p)]
                time.sleep(0.05)  # paces the poll for a zygote running the slow item (the deadline bounds it)
            assert zygotes, "the slow item never reached the sandbox"
            for pid in s.children("rubriq.extract.sandbox.zygote"):  # the zygotes and their job children
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            results = answer.result(timeout=120).json()["results"]
    assert results[0]["error_type"] == "sandbox" and results[0]["reward"] == 0.0, results[0]
    for (_, completion, spec), got in zip(MIXED[:4], results[1:], strict=True):
        assert not differences(got, reference(completion, spec))


def test_a_dead_scoring_process_costs_a_retry_not_an_item(tmp_path):
    """kill -9 of a scoring worker process mid-request (while it runs a slow item: a sandbox job
    among its descendants) breaks the pool; its items are scored again on a fresh pool and every
    answer is still the right one."""
    with Server("--workers", "2", log=tmp_path / "log") as s:
        items = [{"completion": slow_item(10_000_000, str(i)), "target": QFT2} for i in range(6)]
        items += [{"completion": c, "target": t} for _, c, t in MIXED[:3]]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            answer = pool.submit(post, s, {"items": items}, None)
            deadline = time.monotonic() + 240  # the first Python job starts the worker's zygotes
            busy: list[int] = []
            while time.monotonic() < deadline and not busy and not answer.done():
                busy = [pid for pid in s.children("spawn_main") if running_a_job(pid)]
                time.sleep(0.02)  # paces the poll for a worker running a slow item (the deadline bounds it)
            assert busy, "no scoring worker ever ran a slow item"
            os.kill(busy[0], signal.SIGKILL)
            response = answer.result(timeout=180)
    assert response.status_code == 200
    results = response.json()["results"]
    # every item answered, none lost to the dead process ("internal" after two tries); the slow ones
    # are scored (or, on a starved machine, a typed timeout of their own)
    assert all(r["error_type"] in (None, "parse", "budget") for r in results[:6]), [r["error"] for r in results[:6]]
    for (_, completion, spec), got in zip(MIXED[:3], results[6:], strict=True):
        assert not differences(got, reference(completion, spec))
    assert "scoring process failed" in s.log() or "scoring pool broken" in s.log()


def test_client_retries_through_a_server_restart(tmp_path):
    """kill -9 of the server while a client waits: the client retries with backoff and, once the
    server is back on its port, gets every result right; with the server gone for good it ends
    with a clear RubriQUnavailable."""
    from rubriq.serve.client import RubriQClient, RubriQUnavailable

    s = Server("--workers", "1", log=tmp_path / "log").start()
    try:
        client = RubriQClient(s.url, patience=300, backoff=0.2, max_backoff=1.0)
        texts = [slow_item(4_000_000, str(i)) for i in range(4)] + [c for _, c, _ in MIXED[:3]]
        specs = [QFT2] * 4 + [t for _, _, t in MIXED[:3]]
        out: dict = {}
        thread = threading.Thread(target=lambda: out.setdefault("results", client.score(texts, specs)))
        thread.start()
        deadline = time.monotonic() + 120
        while httpx.get(s.url + "/health", timeout=5).json()["pending"] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # paces the /health poll (the deadline bounds the wait)
        s.kill()
        # restart once the client has seen the server gone (its first retry), not after a pause
        deadline = time.monotonic() + 60
        while client.stats["retries"] < 1 and time.monotonic() < deadline:
            time.sleep(0.01)  # paces the poll of the client's retry count (the deadline bounds it)
        assert client.stats["retries"] >= 1, "the client never noticed the server was gone"
        s.start()
        thread.join(timeout=180)
        assert not thread.is_alive() and client.stats["retries"] >= 1
        for completion, spec, got in zip(texts, specs, out["results"], strict=True):
            assert not differences(got, reference(completion, spec))
    finally:
        s.stop()
    gone = RubriQClient(s.url, retries=2, backoff=0.05)
    with pytest.raises(RubriQUnavailable, match="no answer after 3 tries"):
        gone.score([QFT2_QASM], [QFT2])


def test_client_raises_the_servers_4xx_at_once(server):
    from rubriq.serve.client import RubriQClient, RubriQRequestError

    client = RubriQClient(server.url, KEY, retries=5)
    with pytest.raises(RubriQRequestError, match=r"items\[1\].target: unknown target 'nope'") as info:
        client.score([QFT2_QASM, "x"], [QFT2, '{"algorithm": "nope", "num_qubits": 2}'])
    assert info.value.status == 422 and client.stats["retries"] == 0
    # a batch larger than --max-items (16) is split into requests, answered in order
    texts = [QFT2_QASM + f" // {i}" for i in range(40)]
    results = client.score(texts, [QFT2] * 40)
    assert len(results) == 40 and all(r["correct"] for r in results) and client.stats["requests"] >= 4


def test_bounded_load_loses_nothing(server):
    """8 concurrent clients x 6 requests of a mixed batch: every answer is 200 and every result
    equals its reference (the measured version with 1/8/64 clients is bench_serve.py)."""
    refs = [reference(c, t) for _, c, t in MIXED]
    body = {"items": [{"completion": c, "target": t} for _, c, t in MIXED]}

    def one_client(_):
        bad: list[str] = []
        for _ in range(6):
            r = post(server, body)
            if r.status_code != 200:
                bad.append(r.text)
                continue
            bad += [d for g, w in zip(r.json()["results"], refs, strict=True) for d in differences(g, w)]
        return bad

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        problems = [p for found in pool.map(one_client, range(8)) for p in found]
    assert not problems, problems[:5]


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["--port", "0"], "--port"),
        (["--workers", "-1"], "--workers"),
        (["--max-items", "8", "--max-pending", "4"], "--max-pending"),
        (["--max-body-mb", "0"], "--max-body-mb"),
        (["--config", "no/such.yaml"], "--config"),
        (["--api-key", "short"], "--api-key"),
        (["--replicas", "3"], "--ray"),
    ],
)
def test_serve_flags_are_checked_before_anything_starts(argv, flag, capsys):
    from rubriq.cli import main

    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {flag}: ") and "short" not in err[0]


def _service_and_request():
    """A one-worker scoring service and ``request(*completions)``: a parsed request of those
    completions, each against QFT2."""
    from rubriq.serve.protocol import Limits, Targets, parse
    from rubriq.serve.service import ScoringService
    from rubriq.serve.settings import ServeSettings

    service = ScoringService(ServeSettings(workers=1))
    targets = Targets(service.config, Limits())

    def request(*completions):
        body = json.dumps({"items": [{"completion": c, "target": QFT2} for c in completions]}).encode()
        return parse(body, Limits(), targets, service.config)

    return service, request


def test_identical_items_of_concurrent_requests_are_scored_once():
    """The service shares an item between the requests that hold it (one evaluation), answers
    each request in its own order, and a cancelled request leaves the other's item running."""
    import asyncio

    service, request = _service_and_request()

    slow = slow_item(5_000_000, "shared")

    async def main():
        a = asyncio.ensure_future(service.score(request(slow, QFT2_QASM)))
        b = asyncio.ensure_future(service.score(request(QFT2_QASM, slow)))
        c = asyncio.ensure_future(service.score(request(slow)))
        await asyncio.sleep(0.2)
        c.cancel()  # b and a still hold the slow item: it must not be cancelled
        return await a, await b

    try:
        first, second = asyncio.run(main())
        assert [r["parsed"] for r in first] == [True, True] and first[1]["correct"]
        assert not differences(first[0], second[1]) and not differences(first[1], second[0])
        assert service.scorer.stats["evaluated"] == 2  # the slow item and the QFT, once each
    finally:
        service.close()


class _HeldScorer:
    """A scorer whose items finish only when the test says so: ``submit`` hands out a pending
    future per call (recorded in ``submitted``), so the order of events in a test does not hang
    on how fast the machine runs a slow item. ``on_cancel`` runs when the service cancels one
    of them (it gave the item up)."""

    workers = 1

    def __init__(self) -> None:
        self.submitted: list = []
        self.on_cancel = lambda: None

    def submit(self, completion, spec, config=None):
        import concurrent.futures

        scorer = self

        class Held(concurrent.futures.Future):
            def cancel(self) -> bool:
                cancelled = super().cancel()
                scorer.on_cancel()
                return cancelled

        future = Held()
        self.submitted.append(future)
        return future

    def close(self) -> None:
        self.on_cancel = lambda: None
        for future in self.submitted:
            future.cancel()


@pytest.mark.parametrize("when", ["while A is being cancelled", "once A has given the item up"])
def test_a_request_that_joins_an_item_given_up_by_another_still_gets_it_scored(when):
    """Request A is the only one waiting for an item and is cancelled; request B asks for the
    same item (a) in the turn A is cancelled, so B joins A's scoring before A lets go of it, or
    (b) at the moment the service cancels A's given-up scoring, which is then still listed as
    the item's scoring. B was not cancelled: in (a) it is answered by the scoring it shares, in
    (b) by a scoring of its own; a cancelled scoring never answers it. (Handing B the cancelled
    one let its CancelledError escape every handler as a BaseException: three bare 500s in a
    fresh-clone suite. The service has two guards, either enough: ``_hold`` never hands out a
    given-up or cancelled scoring, and ``score`` scores again an item whose shared scoring was
    cancelled under it; with both removed, (b) fails with CancelledError.) The scorer is held
    by the test, so nothing depends on how long a real item takes: with a real slow item, a fast
    machine once finished it inside the test's 0.2 s wait and A was answered, not cancelled."""
    import asyncio

    service, request = _service_and_request()
    service.scorer.close()
    scorer = service.scorer = _HeldScorer()
    answer = {"fidelity": 1.0, "note": "scored for B"}
    started: list = []

    async def main():
        a = asyncio.ensure_future(service.score(request(QFT2_QASM)))
        for _ in range(1000):  # A holds the item and its scoring has started
            if scorer.submitted:
                break
            await asyncio.sleep(0)
        assert scorer.submitted, "A's item was never submitted to the scorer"
        if when == "once A has given the item up":
            scorer.on_cancel = lambda: started.append(asyncio.ensure_future(service.score(request(QFT2_QASM))))
        a.cancel()
        if when == "while A is being cancelled":
            started.append(asyncio.ensure_future(service.score(request(QFT2_QASM))))
        with pytest.raises(asyncio.CancelledError):
            await a
        assert len(started) == 1, "B was not started"
        (b,) = started
        for _ in range(1000):  # finish every scoring still live; a cancelled one never answers
            if b.done():
                break
            for future in scorer.submitted:
                if not future.done():
                    future.set_result(answer)
            await asyncio.sleep(0.01)
        return b.result()

    try:
        assert asyncio.run(main()) == [answer]
        if when == "while A is being cancelled":
            assert len(scorer.submitted) == 1 and not scorer.submitted[0].cancelled()  # shared
        else:
            assert len(scorer.submitted) == 2 and scorer.submitted[0].cancelled()  # scored again
    finally:
        service.close()


def test_an_internal_bug_is_a_500_with_its_request_id_logged(monkeypatch, caplog):
    """Nothing but a bug is a 500: the answer names only the request id, the log has the id and
    the traceback."""
    import logging

    from fastapi.testclient import TestClient

    from rubriq.serve.app import create_app
    from rubriq.serve.service import ScoringService
    from rubriq.serve.settings import ServeSettings

    async def broken(self, request):
        raise ZeroDivisionError("a bug in the service")

    monkeypatch.setattr(ScoringService, "score", broken)
    with caplog.at_level(logging.ERROR, logger="rubriq.serve.app"):
        with TestClient(create_app(ServeSettings(workers=1), warm_up=False)) as client:
            response = client.post("/v1/score", json={"items": [{"completion": QFT2_QASM, "target": QFT2}]})
            assert client.get("/health").json()["pending"] == 0  # the failed request's items were released
    rid = response.headers["x-rubriq-request-id"]
    assert response.status_code == 500 and response.json()["request_id"] == rid
    assert "ZeroDivisionError" not in response.text and rid in response.json()["error"]
    logged = [r for r in caplog.records if rid in r.getMessage()]
    assert logged and logged[0].exc_info and logged[0].exc_info[0] is ZeroDivisionError
