"""The documentation says what the code does: every file it cites exists, the counts and tables
it quotes are those of the code and the committed runs, and the README stays a page."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    ROOT / "SECURITY.md",
    ROOT / "CHANGELOG.md",
    *sorted((ROOT / "docs").rglob("*.md")),
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


def test_readme_is_a_page_without_issue_numbers():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        found = re.findall(r"(?i)\bissues?\s*#?\d+|\(#\d+\)|\bPR\s*#\d+", doc.read_text(encoding="utf-8"))
        assert not found, f"{doc.relative_to(ROOT)} names issues: {found} (what changed when: CHANGELOG.md)"


def test_every_docs_page_is_in_the_site_and_every_readme_link_resolves():
    """mkdocs.yml's nav lists every page of docs/ (mkdocs build --strict, in make test, checks the
    links inside the site); the README's relative links point at files of the repository."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]

    def pages(entries):
        for entry in entries:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                yield from pages(value) if isinstance(value, list) else [value]

    listed = set(pages(nav))
    docs = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert docs == listed, (sorted(docs - listed), sorted(listed - docs))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [t for t in re.findall(r"\]\(([^)#\s]+)[^)]*\)", readme) if not re.match(r"[a-z]+:", t)]
    assert links and [t for t in links if not (ROOT / t).exists()] == []


def test_the_version_is_written_once_and_printed(capsys):
    from importlib.metadata import version

    from rubriq import __version__
    from rubriq.cli import main

    assert __version__ == "0.2.0" == version("rubriq")
    assert not re.search(r'^version\s*=\s*"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert main(["--version"]) == 0 and capsys.readouterr().out.strip() == "rubriq 0.2.0"
    assert f"## [{__version__}] - " in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def test_performance_sandbox_table_quotes_the_measured_run():
    """The sandbox numbers (runs and medians) of docs/performance.md are those of benchmarks/results/sandbox.md."""
    measured = (ROOT / "benchmarks" / "results" / "sandbox.md").read_text(encoding="utf-8")
    readme = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([^|]+) \| (\d+) \| ([\d.]+) \|", measured, re.M)
    assert rows
    for what, n, p50 in rows:
        assert re.search(rf"\| {n} \| {p50} ms \|", readme) or re.search(
            rf"\| {n} \| {float(p50):.0f} ms \|", readme
        ), (what, n, p50)


def test_data_tcount_tables_are_the_committed_run():
    """The T-count tables of docs/data.md are recomputed from results/baselines/tcount: the per-circuit
    comparison with every published column, and the per-method summary rows; and the count of
    circuits whose PyZX T equals the published PyZX column is the one docs/data.md and the README
    state."""
    import csv

    from rubriq.baselines.runner import comparison_markdown

    results = ROOT / "results" / "baselines" / "tcount"
    readme = (ROOT / "docs" / "data.md").read_text(encoding="utf-8")
    table = comparison_markdown(results / "baselines.csv")
    assert len(table) == 2 + 35
    assert "\n".join(table) in readme
    summary = [line for line in (results / "baselines.md").read_text().splitlines() if "| all |" in line]
    assert len(summary) == 4 and all(line in readme for line in summary)
    rows = list(csv.DictReader(open(results / "baselines.csv", encoding="utf-8")))
    same = sum(r["T_pyzx"] == r["published_PyZX"] and r["verified_pyzx"] in ("exact", "qcec") for r in rows)
    assert f"published PyZX count on {same} of {len(rows)}" in readme
    assert f"published PyZX count on {same} of {len(rows)}" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_api_reference_covers_the_public_modules():
    """The site's API reference (mkdocstrings, built by `mkdocs build --strict` in make test, which
    fails on an identifier it cannot resolve) documents the public API the issue names."""
    api = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs" / "api").glob("*.md")))
    documented = set(re.findall(r"^::: (rubriq[\w.]*)", api, re.M))
    dimensions = {f"rubriq.rubric.{d}" for d in ("clifford", "tcount", "hardware", "fidelity", "efficiency")}
    wanted = dimensions | {
        "rubriq.evaluator",
        "rubriq.targets",
        "rubriq.serve.client",
        "rubriq.integrations.verl",
        "rubriq.integrations.openrlhf",
        "rubriq.reward",
        "rubriq.training.config",
        "rubriq.suites",
    }
    assert wanted <= documented, sorted(wanted - documented)
    for module in documented:
        assert (ROOT / module.replace(".", "/")).with_suffix(".py").is_file() or (
            ROOT / module.replace(".", "/") / "__init__.py"
        ).is_file(), module
