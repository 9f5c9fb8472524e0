"""``rubriq serve --ray --replicas 2`` on a local Ray cluster (127.0.0.1): both replicas answer,
results equal in-process scoring, and kill -9 of one replica mid-load costs the client retries,
not results (Ray restarts the replica; its dropped requests come back as proxy 5xx or dropped
connections, which RubriQClient retries)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

pytest.importorskip("ray.serve")
httpx = pytest.importorskip("httpx")

from tests.serve_helpers import MIXED, QFT2, Server, differences, reference, running_a_job, slow_item  # noqa: E402


@pytest.fixture(scope="module")
def ray_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ray")
    log = folder / "server.log"
    # The default limits (10 s of sandbox Python, 30 s per completion) bound what a completion may
    # cost; on a loaded machine the slow items of the kill test waited past them (error_type
    # "budget"), which is not what these tests are about: they get time to spare, so a result
    # differs from the in-process one only if the server lost or garbled it.
    config = folder / "rubric.yaml"
    config.write_text("extraction:\n  python_timeout_s: 300.0\nbudget:\n  time_s: 600.0\n")
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    server = Server(
        "--ray", "--replicas", "2", "--workers", "1", "--max-items", "64", "--config", str(config), env=env, log=log
    )
    server.start(timeout=240)
    try:
        yield server
    finally:
        server.stop()


def replica_pids(server: Server, tries: int = 40) -> set[int]:
    pids = set()
    for _ in range(tries):
        try:
            pids.add(httpx.get(server.url + "/health", timeout=10).json()["pid"])
        except httpx.HTTPError:
            pass
        if len(pids) == 2:
            break
    return pids


def test_two_replicas_answer_and_equal_in_process_scoring(ray_server):
    assert len(replica_pids(ray_server)) == 2
    response = httpx.post(
        ray_server.url + "/v1/score", json={"items": [{"completion": c, "target": t} for _, c, t in MIXED]}, timeout=120
    )
    assert response.status_code == 200, response.text
    for (label, completion, spec), got in zip(MIXED, response.json()["results"], strict=True):
        assert not differences(got, reference(completion, spec)), label


def test_killing_a_replica_mid_load_loses_no_item(ray_server):
    from rubriq.serve.client import RubriQClient

    victim = min(replica_pids(ray_server))
    client = RubriQClient(ray_server.url, retries=30, backoff=0.25, max_backoff=2.0, max_items=2, parallel=4)
    # 8 items of ~0.9 s each on 2 replicas: the victim is still working when it is killed
    texts = [slow_item(12_000_000, f"ray {i}") for i in range(8)] + [c for _, c, _ in MIXED]
    specs = [QFT2] * 8 + [t for _, _, t in MIXED]
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("results", client.score(texts, specs)))
    thread.start()
    # Kill the victim while it runs a completion (a request in flight, so the client must retry),
    # not after a fixed sleep: on a busy machine the replicas had not started (or on a free one,
    # had finished) their items at 1 s, and no retry was seen.
    deadline = time.monotonic() + 120
    while not running_a_job(victim) and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)  # paces the poll for the victim running a job (the deadline bounds it)
    assert running_a_job(victim), "the victim replica never ran an item"
    os.kill(victim, signal.SIGKILL)
    thread.join(timeout=300)
    assert not thread.is_alive()
    results = out["results"]
    assert len(results) == len(texts)
    for completion, spec, got in zip(texts, specs, results, strict=True):
        assert not differences(got, reference(completion, spec)), (got.get("error_type"), got.get("error"))
    assert client.stats["retries"] >= 1
