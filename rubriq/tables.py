"""Numbers and tables as text: one formatting of a value, an interval and a markdown table for
every report RubriQ writes (baselines, evaluation reports, the quickstart, the studies).

>>> fmt(0.12345), fmt(3), fmt(None), fmt(0.5, 1)
('0.123', '3', '-', '0.5')
>>> print("\\n".join(markdown_table(["a", "b"], [[1, None]])))
| a | b |
|---|---|
| 1 | - |
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def fmt(value: Any, digits: int = 3) -> str:
    """A float with ``digits`` decimals, ``-`` for None (undefined), anything else as str."""
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def format_ci(ci: Any, digits: int = 3) -> str:
    """``mean [low, high]`` of a (mean, low, high) interval; the mean alone when the interval is a
    point, ``-`` when undefined.

    >>> format_ci((0.5, 0.25, 0.75), 2), format_ci((0.5, 0.5, 0.5)), format_ci((None, None, None))
    ('0.50 [0.25, 0.75]', '0.500', '-')
    """
    m, lo, hi = ci if isinstance(ci, (tuple, list)) else (ci, None, None)
    if m is None:
        return "-"
    if lo is None or lo == hi:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> list[str]:
    """The lines of a GitHub markdown table; cells through :func:`fmt` unless already strings;
    ``align``: one character per column, ``r`` for right-aligned (numbers), else left."""
    marks = [("---:" if a == "r" else "---") for a in align.ljust(len(headers), "l")]
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(marks) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(c if isinstance(c, str) else fmt(c) for c in row) + " |")
    return lines
