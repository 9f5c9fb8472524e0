"""Arm-seeds side by side: the pending (arm, seed) pairs run ``workers`` at a time, each as its own
``rubriq study convergence --arm A --seed S --no-summary`` process (:func:`run_parallel`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from rubriq.extract.files import open_record

log = logging.getLogger(__name__)

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


def run_parallel(
    config: str | Path, out: Path, pending: list[tuple[str, int]], workers: int, progress=None, on_done=None
) -> None:
    """Run the (arm, seed) pairs of ``pending`` ``workers`` at a time, each as its own
    ``rubriq study convergence --arm A --seed S --no-summary`` process with ``cpus // workers``
    threads (the thread variables of :data:`THREAD_VARIABLES`), its output in
    ``OUT/logs/ARM_seedS.log``.  On a small CPU this is faster than one arm-seed after another:
    a 135M model's small matrix products do not keep two threads busy, so on 2 cores two
    one-thread arm-seeds each took 19 s per GRPO step against 17 s for one two-thread arm-seed
    (docs/studies.md).  A failed arm-seed does not stop the others; the call then raises, naming
    each failure and its log.  If this call is interrupted, the running processes are stopped
    (their arm-seeds restart on the next run).  ``on_done(arm, seed)`` is called for each
    arm-seed as soon as its process ends well (a study keeps and commits it there, so that a unit
    finished beside one still running is on the branch if the session stops)."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = max(1, cpus // workers)
    env = {**os.environ, **{v: str(threads) for v in THREAD_VARIABLES}}
    (out / "logs").mkdir(parents=True, exist_ok=True)
    queue, failed = list(pending), list[str]()
    running: list[tuple[Any, str, int, Path]] = []
    try:
        _run_queue(config, out, queue, running, failed, workers, threads, env, progress, on_done)
    finally:
        for proc, *_ in running:  # only on an interruption: a finished queue leaves none running
            proc.terminate()
        for proc, *_ in running:
            proc.wait(timeout=30)
    if failed:
        raise RuntimeError("arm-seeds failed: " + "; ".join(failed))


def _run_queue(
    config: str | Path,
    out: Path,
    queue: list[tuple[str, int]],
    running: list[tuple[Any, str, int, Path]],
    failed: list[str],
    workers: int,
    threads: int,
    env: dict[str, str],
    progress=None,
    on_done=None,
) -> None:
    """:func:`run_parallel`'s loop: start processes from ``queue`` while fewer than ``workers``
    run, collect the finished ones (``running`` and ``failed`` are the caller's, so that it can
    stop what still runs if this is interrupted)."""
    import subprocess
    import sys

    while queue or running:
        while queue and len(running) < workers:
            name, seed = queue.pop(0)
            log_path = out / "logs" / f"{name}_seed{seed}.log"
            cmd = [sys.executable, "-m", "rubriq.cli", "study", "convergence", str(config), "--out", str(out)]
            cmd += ["--arm", name, "--seed", str(seed), "--no-summary"]
            if progress:
                progress(f"arm {name}, seed {seed} ({threads} thread(s); log {log_path})")
            with open_record(log_path, "w") as fh:  # 0600, like the records it logs about
                proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)  # noqa: S603 (our own CLI)
            running.append((proc, name, seed, log_path))
        time.sleep(0.2)
        for item in [r for r in running if r[0].poll() is not None]:
            running.remove(item)
            proc, name, seed, log_path = item
            if proc.returncode:
                failed.append(f"{name} seed {seed} (exit {proc.returncode}; see {log_path})")
            else:
                log.info("arm %s seed %d: done (%s)", name, seed, log_path)
                if on_done is not None:
                    on_done(name, seed)


__all__ = ["THREAD_VARIABLES", "run_parallel"]
