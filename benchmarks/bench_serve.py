"""``rubriq serve`` under load and faults, beside in-process scoring (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_serve.py [--requests 64] [--workers 2] [--no-ray]

All on 127.0.0.1, every loop bounded in count and time.  One fixed mix (the 8 completions of
tests/serve_helpers.MIXED: correct, wrong, unparseable, hostile Python, sandboxed Python, rewrite
targets), each item made unique with a tag so that nothing is a cache hit, in requests of 8 items
(one GRPO group).  In one run:

1. in-process :class:`BatchScorer` (same ``--workers``) on the same items: items/s, the
   reference every served result is compared with (to 1e-12; zero lost or mismatched);
2. the uvicorn server with 1, 8 and 64 concurrent clients (an asyncio/httpx driver): items/s,
   request latency p50/p99;
3. overload: ``--max-pending 32`` and 64 clients at once without retries: the 503s and their
   Retry-After, then the same clients with RubriQClient's retries: every item answered;
4. kill -9 of the server mid-load (8 RubriQClient clients, retries on), restarted 1 s later;
5. Ray Serve (``--ray --replicas 2``, 1 worker each): deploy time, 8 clients, and kill -9 of one
   replica mid-load;
6. the bad-input table (tests/serve_cases.py) with the server's actual messages.

Writes benchmarks/results/serve.md.  The CPUs are shared with other work: compare the ratios of
one run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from tests.serve_cases import BAD_INPUTS  # noqa: E402
from tests.serve_helpers import MIXED, Server, differences  # noqa: E402

GROUP = len(MIXED)
CASE_FLAGS = ("--max-items", "16", "--max-body-mb", "1", "--max-completion-kb", "64")


def items(run: str, requests: int) -> list[list[tuple[str, str]]]:
    """``requests`` requests of the mix, every completion unique (tagged with ``run``)."""
    out = []
    for r in range(requests):
        out.append([(f"{c}\n// {run} {r} {i}", t) for i, (_, c, t) in enumerate(MIXED)])
    return out


def in_process(batches: list[list[tuple[str, str]]], workers: int) -> tuple[float, dict]:
    from rubriq.evaluator.batch import BatchScorer
    from rubriq.serve.protocol import result_dict

    flat = [x for b in batches for x in b]
    with BatchScorer(workers=workers) as scorer:
        warm = [x for b in items("warm-in-process", 4) for x in b]  # every target's evaluator in every worker
        scorer.results([c for c, _ in warm], [t for _, t in warm])
        start = time.perf_counter()
        results = scorer.results([c for c, _ in flat], [t for _, t in flat])
        seconds = time.perf_counter() - start
        threshold = scorer.config.fidelity.correct_threshold
        ref = {
            (c, t): result_dict(r, threshold, scorer.evaluator(t).target.t0)
            for (c, t), r in zip(flat, results, strict=True)
        }
    return len(flat) / seconds, ref


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


async def drive(url: str, batches: list, clients: int, ref: dict | None, retry: bool = False) -> dict:
    """``clients`` concurrent clients sharing ``batches``; each request's latency, the 503s, and
    every result checked against ``ref``."""
    queue: asyncio.Queue = asyncio.Queue()
    for b in batches:
        queue.put_nowait(b)
    latencies: list[float] = []
    stats = {"503": 0, "mismatched": 0, "lost": 0, "other": 0, "retry_after": set()}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as http:

        async def client() -> None:
            while not queue.empty():
                batch = queue.get_nowait()
                body = {"items": [{"completion": c, "target": t} for c, t in batch]}
                while True:
                    start = time.perf_counter()
                    response = await http.post("/v1/score", json=body)
                    if response.status_code == 503:
                        stats["503"] += 1
                        stats["retry_after"].add(response.headers.get("retry-after"))
                        if retry:
                            await asyncio.sleep(float(response.headers.get("retry-after", "1")))
                            continue
                        break
                    latencies.append(time.perf_counter() - start)
                    if response.status_code != 200:
                        stats["other"] += 1
                        break
                    results = response.json()["results"]
                    stats["lost"] += len(batch) - len(results)
                    if ref is not None:
                        stats["mismatched"] += sum(
                            bool(differences(got, ref[key])) for key, got in zip(batch, results, strict=False)
                        )
                    break

        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        seconds = time.perf_counter() - start
    done = len(latencies)
    return {
        "clients": clients,
        "requests": done,
        "items/s": done * GROUP / seconds if seconds else 0.0,
        "p50": pct(latencies, 0.5) if latencies else float("nan"),
        "p99": pct(latencies, 0.99) if latencies else float("nan"),
        **stats,
    }


def with_faults(url: str, batches: list, ref: dict, clients: int, fault) -> dict:
    """``clients`` RubriQClient threads (retries on) over ``batches`` while ``fault()`` runs."""
    from rubriq.serve.client import RubriQClient, RubriQError

    todo = list(batches)
    lock = threading.Lock()
    out = {"mismatched": 0, "lost": 0, "errors": [], "retries": 0, "items": 0}

    def client() -> None:
        c = RubriQClient(url, retries=40, backoff=0.25, max_backoff=2.0)
        while True:
            with lock:
                if not todo:
                    break
                batch = todo.pop()
            try:
                results = c.score([x for x, _ in batch], [t for _, t in batch])
            except RubriQError as exc:  # a clear error, counted (none expected)
                with lock:
                    out["errors"].append(str(exc))
                    out["lost"] += len(batch)
                continue
            with lock:
                out["items"] += len(results)
                out["mismatched"] += sum(bool(differences(g, ref[k])) for k, g in zip(batch, results, strict=True))
        with lock:
            out["retries"] += c.stats["retries"]

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    fault()
    for t in threads:
        t.join(timeout=600)
    out["seconds"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=64, help="requests of 8 items per load run")
    parser.add_argument("--workers", type=int, default=2, help="scoring processes (server and in-process)")
    parser.add_argument("--no-ray", action="store_true", help="skip the Ray Serve runs")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "serve.md")
    args = parser.parse_args()
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "rubriq-bench-serve"
    work.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    w = args.workers

    # 1-2: in-process vs served, 1 / 8 / 64 clients
    runs = {c: items(f"load{c}", args.requests) for c in (1, 8, 64)}
    base_rate, ref = in_process([b for bs in runs.values() for b in bs], w)
    print(f"in-process BatchScorer(workers={w}): {base_rate:.1f} items/s", flush=True)
    load = []
    start = time.perf_counter()
    with Server("--workers", str(w), log=work / "uvicorn.log") as s:
        uv_start = time.perf_counter() - start
        asyncio.run(drive(s.url, items("warm", 8), 4, None))
        for clients, batches in runs.items():
            row = asyncio.run(drive(s.url, batches, clients, ref))
            load.append(row)
            print(row, flush=True)
    lines += [
        "## Load: the mix, 8 items per request, every item unique (no cache hits)",
        "",
        f"{args.requests} requests x {GROUP} items per row; server and in-process both with {w} scoring processes "
        f"on {os.cpu_count()} shared CPUs.",
        "",
        "| scorer | clients | items/s | items/s per core | vs in-process | p50 latency (s) | p99 latency (s) | "
        "lost | mismatched |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| in-process BatchScorer | - | {base_rate:.1f} | {base_rate / w:.1f} | 1.00x | | | 0 | - |",
    ]
    for row in load:
        lines.append(
            f"| rubriq serve (uvicorn) | {row['clients']} | {row['items/s']:.1f} | {row['items/s'] / w:.1f} | "
            f"{row['items/s'] / base_rate:.2f}x | {row['p50']:.2f} | {row['p99']:.2f} | {row['lost']} | "
            f"{row['mismatched']} |"
        )

    # 3: overload
    batches = items("overload", 64)
    with Server("--workers", str(w), "--max-pending", "32", "--max-items", "32", log=work / "overload.log") as s:
        asyncio.run(drive(s.url, items("warm2", 2), 2, None))
        refused = asyncio.run(drive(s.url, batches, 64, ref=None))
        retried = asyncio.run(drive(s.url, items("overload-retry", 64), 64, ref=None, retry=True))
        after = httpx.post(
            s.url + "/v1/score", json={"items": [{"completion": MIXED[0][1], "target": MIXED[0][2]}]}, timeout=60
        )
    print("overload", refused, retried, after.status_code, flush=True)
    lines += [
        "",
        "## Overload: --max-pending 32, 64 clients at once (512 items)",
        "",
        "| run | requests answered 200 | 503 answers | Retry-After values (s) | items lost |",
        "|---|---|---|---|---|",
        f"| no retries | {refused['requests']} | {refused['503']} | {', '.join(sorted(v for v in refused['retry_after'] if v))} "
        f"| {refused['lost']} (the refused requests were never accepted) |",
        f"| retrying after Retry-After | {retried['requests']} | {retried['503']} | "
        f"{', '.join(sorted(v for v in retried['retry_after'] if v))} | {retried['lost']} |",
        "",
        f"A request right after the overload: HTTP {after.status_code}.",
    ]

    # 4: kill -9 of the server mid-load
    fault_batches = items("kill", 64)
    _, fault_ref = in_process(fault_batches, w)
    server = Server("--workers", str(w), log=work / "kill.log").start()

    def kill_and_restart() -> None:
        time.sleep(2.0)
        server.kill()
        time.sleep(1.0)
        server.start()

    try:
        killed = with_faults(server.url, fault_batches, fault_ref, 8, kill_and_restart)
    finally:
        server.stop()
    print("kill -9 server", killed, flush=True)
    lines += [
        "",
        "## Faults",
        "",
        "| fault | items | answered correctly | mismatched | lost | client retries | errors | seconds |",
        "|---|---|---|---|---|---|---|---|",
        f"| kill -9 of the server 2 s into the load, restarted 1 s later (8 clients) | {len(fault_batches) * GROUP} | "
        f"{killed['items'] - killed['mismatched']} | {killed['mismatched']} | {killed['lost']} | {killed['retries']} | "
        f"{len(killed['errors'])} | {killed['seconds']:.1f} |",
    ]

    # 5: Ray Serve
    if not args.no_ray:
        env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
        ray_batches = items("ray", args.requests)
        uv_batches = items("ray-uvicorn", args.requests)
        _, ray_ref = in_process(ray_batches + uv_batches, w)
        start = time.perf_counter()
        with Server("--workers", str(w), log=work / "uvicorn2.log") as s:  # side by side with Ray, just before it
            uv_start = time.perf_counter() - start
            asyncio.run(drive(s.url, items("uv-warm", 16), 8, None))
            uv = asyncio.run(drive(s.url, uv_batches, 8, ray_ref))
        start = time.perf_counter()
        rs = Server("--ray", "--replicas", "2", "--workers", "1", env=env, log=work / "ray.log").start(timeout=300)
        deploy = time.perf_counter() - start
        try:
            asyncio.run(drive(rs.url, items("ray-warm", 16), 8, None))
            ray_row = asyncio.run(drive(rs.url, ray_batches, 8, ray_ref))
            pids = {httpx.get(rs.url + "/health", timeout=10).json()["pid"] for _ in range(40)}
            victim = min(pids)
            ray_fault_batches = items("ray-kill", 64)
            _, rf_ref = in_process(ray_fault_batches, w)

            def kill_replica() -> None:
                time.sleep(1.0)
                os.kill(victim, signal.SIGKILL)

            ray_killed = with_faults(rs.url, ray_fault_batches, rf_ref, 8, kill_replica)
        finally:
            rs.stop()
        print("ray", deploy, ray_row, ray_killed, flush=True)
        at = lines.index("## Faults")
        lines[at:at] = [
            "## Ray Serve: --ray --replicas 2 (1 scoring process each) vs uvicorn (--workers 2), 8 clients",
            "",
            "Measured one after the other (uvicorn first), each after a warm-up, on the same CPUs.",
            "",
            "| path | start until ready (s) | items/s | vs uvicorn | p50 (s) | p99 (s) | lost | mismatched |",
            "|---|---|---|---|---|---|---|---|",
            f"| uvicorn | {uv_start:.1f} | {uv['items/s']:.1f} | 1.00x | {uv['p50']:.2f} | {uv['p99']:.2f} | "
            f"{uv['lost']} | {uv['mismatched']} |",
            f"| Ray Serve | {deploy:.1f} | {ray_row['items/s']:.1f} | {ray_row['items/s'] / uv['items/s']:.2f}x | "
            f"{ray_row['p50']:.2f} | {ray_row['p99']:.2f} | {ray_row['lost']} | {ray_row['mismatched']} |",
            "",
        ]
        lines.append(
            f"| kill -9 of one Ray replica 1 s into the load (8 clients) | {len(ray_fault_batches) * GROUP} | "
            f"{ray_killed['items'] - ray_killed['mismatched']} | {ray_killed['mismatched']} | {ray_killed['lost']} | "
            f"{ray_killed['retries']} | {len(ray_killed['errors'])} | {ray_killed['seconds']:.1f} |"
        )
    lines.append(
        '\nA sandbox worker killed mid-request (that item: `error_type="sandbox"`, the rest scored) and a '
        "scoring process killed mid-request (its items retried on a fresh pool, all correct) are checked by "
        "tests/test_serve.py on every run."
    )

    # 6: bad inputs
    with Server(
        *CASE_FLAGS, "--workers", "1", env={"RUBRIQ_API_KEY": "bench-key-0123456789"}, log=work / "cases.log"
    ) as s:
        table = []
        for case in BAD_INPUTS:
            response = case.send(s.url, "bench-key-0123456789")
            message = response.json().get("error", "").replace("|", "\\|")
            table.append(f"| {case.name} | {response.status_code} | `{message[:160]}` |")
    lines += [
        "",
        f"## Bad input (server started with {' '.join(CASE_FLAGS)} and an API key)",
        "",
        "| case | status | message |",
        "|---|---|---|",
        *table,
    ]
    load_avg = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    header = [
        "# rubriq serve: load, overload, faults, bad input",
        "",
        f"`benchmarks/bench_serve.py --requests {args.requests} --workers {w}`; loopback; load average at the end "
        f"(1, 5, 15 min): {load_avg} on {os.cpu_count()} CPUs shared with other work.",
        "",
    ]
    args.out.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
