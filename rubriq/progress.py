"""Progress of long loops: a moving bar on a terminal, a log line per step otherwise.

Every phase that can take more than a few seconds (sampling completions, scoring them, compiler
baselines) reports through :func:`progress`.  On a terminal it is a rich bar that advances in
fractions (a batch of completions advances token by token, so the bar moves while a batch is
generated); when the output is not a terminal (a log file, CI, Slurm) it writes one
``logging`` line per step instead, since a redrawn bar would be lost there.

>>> with progress("demo", total=2, enabled=False) as bar:
...     bar.advance(1); bar.advance(1)
>>> bar.done
2.0
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("rubriq.progress")


class Bar:
    """What a loop reports to: ``advance(n)`` (fractions allowed) and ``step(message)``."""

    def __init__(self, description: str, total: float, rich_progress=None, task=None) -> None:
        self.description, self.total, self.done = description, float(total), 0.0
        self._rich, self._task = rich_progress, task
        self._last_log = 0.0

    def advance(self, n: float = 1.0, log_line: bool = True) -> None:
        """Move by ``n`` steps (fractions allowed); without a terminal, a log line per whole step."""
        self.done = min(self.total, self.done + n) if self.total else self.done + n
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done)
        elif log_line and int(self.done) != int(self._last_log):
            self._last_log = self.done
            log.info("%s: %d/%d", self.description, int(self.done), int(self.total))

    def set(self, done: float) -> None:
        """Set the absolute position (after fractional advances, the exact count)."""
        self.advance(done - self.done)


def is_terminal() -> bool:
    """Whether progress goes to a terminal (a redrawn bar) or to a log (lines)."""
    return sys.stderr.isatty()


@contextmanager
def progress(description: str, total: float, enabled: bool = True) -> Iterator[Bar]:
    """A :class:`Bar` for ``total`` steps: rich on a terminal, log lines otherwise, nothing when
    ``enabled`` is false."""
    if not enabled:
        yield Bar(description, total)
        return
    if not is_terminal():
        start = time.perf_counter()
        bar = Bar(description, total)
        log.info("%s: 0/%d", description, int(total))
        yield bar
        log.info("%s: done (%d in %.1f s)", description, int(bar.done), time.perf_counter() - start)
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as rich_progress:
        task = rich_progress.add_task(description, total=total)
        yield Bar(description, total, rich_progress, task)
