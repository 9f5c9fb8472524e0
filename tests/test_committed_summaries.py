"""Every committed study summary regenerates byte for byte from its committed units with the
current code (``rubriq study convergence YAML --summary-only --out FOLDER``): a change of the
study code that changes a committed result shows here, and the summaries name no checkout path."""

import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "configs" / "studies"
# the studies run before `results_dir` existed: their committed folder and their YAML
EARLIER = {"results/studies/convergence": "convergence_cpu.yaml", "results/studies/learning": "learning_cpu.yaml"}
FILES = ("summary.md", "summary.json", "per_step.csv")


def committed_studies() -> list[tuple[str, str]]:
    """(committed folder, YAML) of every study whose kept units and summary are committed."""
    pairs = dict(EARLIER)
    for path in sorted(STUDIES.glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        if isinstance(data, dict) and data.get("results_dir") and "arms" in data:
            pairs[data["results_dir"]] = path.name
    return [(folder, config) for folder, config in sorted(pairs.items()) if (ROOT / folder / "summary.md").is_file()]


def test_the_committed_studies_are_found():
    found = dict(committed_studies())
    assert found["results/studies/learning"] == "learning_cpu.yaml"
    assert found["results/studies/rewriting/pilot/lr3e-4"] == "rewriting_pilot_lr3e-4.yaml"


@pytest.mark.parametrize(("folder", "config"), committed_studies(), ids=lambda v: str(v).replace("/", "-"))
def test_a_committed_summary_regenerates_byte_for_byte(tmp_path, monkeypatch, folder, config):
    from rubriq.studies.settings import StudySettings
    from rubriq.studies.summary import eval_prompt_count, write_summary

    monkeypatch.chdir(ROOT)  # the records name the YAML's paths relative to the checkout's root
    copy = tmp_path / "study"
    shutil.copytree(ROOT / folder, copy)
    for name in ("summary.md", "per_step.csv"):  # summary.json stays: an earlier study counts its prompts there
        (copy / name).unlink()
    study = StudySettings.from_yaml(STUDIES / config)
    write_summary(copy, study, eval_prompt_count(copy, study))
    for name in FILES:
        assert (copy / name).read_bytes() == (ROOT / folder / name).read_bytes(), f"{folder}/{name} differs"


def test_a_results_readme_shows_its_summary_headline():
    """A results README with the headline markers holds the headline table of its study's
    committed summary.md, as ``--summary-only`` writes it (never a hand-copied number)."""
    from rubriq.studies.summary import HEADLINE_BEGIN, HEADLINE_END, headline_section

    checked = 0
    for folder, _ in committed_studies():
        summary = (ROOT / folder / "summary.md").read_text()
        for readme in (ROOT / folder / "README.md", ROOT / folder / ".." / "README.md"):
            text = readme.read_text() if readme.is_file() else ""
            if HEADLINE_BEGIN in text:
                block = text.split(HEADLINE_BEGIN, 1)[1].split(HEADLINE_END, 1)[0].strip()
                assert block == headline_section(summary), f"{readme}: run rubriq study convergence --summary-only"
                checked += 1
    assert checked >= 1  # the rewriting study's README (results/studies/rewriting/README.md)
