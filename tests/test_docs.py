"""The documentation says what the code does: every file it cites exists, and the counts it
quotes are the counts of the code (issue #15: stale text)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    ROOT / "SECURITY.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "scripts").glob("*")),
    *sorted((ROOT / "rubriq").rglob("*.py")),
]


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_cited_file_exists(doc):
    text = doc.read_text(encoding="utf-8")
    cited = set(re.findall(r"\b((?:tests|rubriq|benchmarks|scripts|configs)/[\w/.-]+\.(?:py|yaml|slurm|md))\b", text))
    missing = [c for c in sorted(cited) if not (ROOT / c).exists() and "<" not in c]
    assert not missing, f"{doc.relative_to(ROOT)} cites files that do not exist: {missing}"


def test_security_md_counts_the_hostile_corpus():
    sys.path.insert(0, str(ROOT / "tests"))
    import test_hostile

    text = (ROOT / "SECURITY.md").read_text(encoding="utf-8")
    assert f"{len(test_hostile.PYTHON_CASES)} Python attacks" in text
    assert (
        f"{len(test_hostile.KERNEL_CASES)} kernel\n  attack families" in text
        or f"{len(test_hostile.KERNEL_CASES)} kernel attack families" in text
    )
    assert f"{len(test_hostile.QASM_CASES)} QASM attacks" in text


def test_readme_sandbox_table_quotes_the_measured_run():
    """The README's sandbox numbers (runs and medians) are those of benchmarks/results/sandbox.md."""
    measured = (ROOT / "benchmarks" / "results" / "sandbox.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([^|]+) \| (\d+) \| ([\d.]+) \|", measured, re.M)
    assert rows
    for what, n, p50 in rows:
        assert re.search(rf"\| {n} \| {p50} ms \|", readme) or re.search(
            rf"\| {n} \| {float(p50):.0f} ms \|", readme
        ), (what, n, p50)


def test_readme_tcount_tables_are_the_committed_run():
    """The README's T-count tables are recomputed from results/baselines/tcount: the per-circuit
    comparison with every published column, and the per-method summary rows; and the count of
    circuits whose PyZX T equals the published PyZX column is the one the README states."""
    import csv

    from rubriq.baselines.runner import comparison_markdown

    results = ROOT / "results" / "baselines" / "tcount"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = comparison_markdown(results / "baselines.csv")
    assert len(table) == 2 + 35
    assert "\n".join(table) in readme
    summary = [line for line in (results / "baselines.md").read_text().splitlines() if "| all |" in line]
    assert len(summary) == 4 and all(line in readme for line in summary)
    rows = list(csv.DictReader(open(results / "baselines.csv", encoding="utf-8")))
    same = sum(r["T_pyzx"] == r["published_PyZX"] and r["verified_pyzx"] in ("exact", "qcec") for r in rows)
    assert f"published PyZX count on {same} of {len(rows)}" in readme
