"""A module-level job for ``handlers.run_with_limit`` that outlasts any time limit a test sets."""

import time


def sleep_instead_of_compiling(entry, method, conn) -> None:
    """Sleep 10 minutes and send nothing: the parent must end this process at its limit."""
    time.sleep(600)  # paces nothing: outlasts every limit (the parent ends it; nothing waits for it)
