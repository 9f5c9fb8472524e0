"""``rubriq leaderboard``: entries on the same prompts with the same k, through the same code path
(local, and through RubriQ's policy server on 127.0.0.1), the compilers beside them on the
rewrite prompts, folders that do not follow the protocol refused; and the committed table is
the one its folders rebuild."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def source(tmp_path, monkeypatch):
    from rubriq.data.prompts import PromptSpec, save_splits, synthesis_rows

    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    spec = PromptSpec(
        qft_sizes=(2,),
        qpe_sizes=(),
        hamiltonian_sizes=(),
        encoding_sizes=(2,),
        encoding_seeds=(0,),
        encodings=("basis_encoding",),
        formats=("qasm2",),
        prompt_style="compact",
    )
    save_splits({"test": synthesis_rows(spec)}, tmp_path / "data")
    return tmp_path / "data"


def test_leaderboard_end_to_end(source, tmp_path, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("openai")
    pytest.importorskip("fastapi")
    from rubriq.cli import main
    from rubriq.evaluation.sampling import load_records

    out = tmp_path / "board"
    config = {
        "out": str(out),
        "source": str(source),
        "small_rewrites": {"count": 1, "qubits": [2], "core_gates": [3, 4], "redundancies": [1, 1], "seed": 7},
        "samples": 2,
        "temperature": 0.8,
        "max_new_tokens": 6,
        "baselines": ["qiskit"],
        "entries": [
            {"name": "tiny-local", "model": "tiny", "note": "random"},
            {"name": "tiny-served", "model": "tiny", "serve": "rubriq"},
            {"name": "not-yet", "model": str(tmp_path / "missing")},
        ],
    }
    path = tmp_path / "board.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["leaderboard", str(path)]) == 0, capsys.readouterr().err
    protocol = json.loads((out / "protocol.json").read_text())
    assert len(protocol["prompts"]) == 3 and protocol["samples"] == 2
    local = load_records(out / "tiny-local" / "records.jsonl")
    served = load_records(out / "tiny-served" / "records.jsonl")
    assert sorted({r.prompt_id for r in local}) == sorted({r.prompt_id for r in served}) == sorted(protocol["prompts"])
    assert len(local) == len(served) == 6
    summary = json.loads((out / "tiny-served" / "summary.json").read_text())
    assert summary["usage"]["completions"] == 6 and "rubriq server" in summary["endpoint"]["endpoint"]
    assert not (out / "not-yet").exists()
    compilers = json.loads((out / "compilers.json").read_text())
    (rewrite,) = compilers  # one rewrite circuit, one compiler
    # a hand-made folder with another k is refused, not ranked
    shutil.copytree(out / "tiny-local", out / "other-k")
    s = json.loads((out / "other-k" / "summary.json").read_text())
    s["request"]["samples"] = 5
    (out / "other-k" / "summary.json").write_text(json.dumps(s))
    assert main(["leaderboard", str(path), "--table-only"]) == 0
    md = (out / "README.md").read_text()
    assert "| tiny-local | tiny | local |" in md and "| tiny-served | tiny | server: " in md
    assert "`other-k`: samples 5, the protocol's is 2" in md
    assert "### Rewrite prompts" in md
    (line,) = [x for x in md.splitlines() if x.startswith("| rewrite-small")]
    cells = [c.strip() for c in line.strip("|").split("|")]  # prompt, T0, planted, recorded, qiskit, entries
    assert rewrite["verified"] and cells[4] == str(rewrite["t"])
    board = json.loads((out / "leaderboard.json").read_text())
    assert {e["name"] for e in board["entries"]} == {"tiny-local", "tiny-served"}
    # rerunning keeps comparable evaluations (nothing sampled again)
    before = (out / "tiny-local" / "records.jsonl").stat().st_mtime_ns
    assert main(["leaderboard", str(path)]) == 0
    assert (out / "tiny-local" / "records.jsonl").stat().st_mtime_ns == before


def test_the_committed_leaderboard_is_what_its_folders_rebuild(tmp_path):
    from rubriq.evaluation.leaderboard import LeaderboardConfig, write_table

    committed = ROOT / "results" / "leaderboard"
    config = LeaderboardConfig.from_yaml(ROOT / "configs" / "leaderboard.yaml")
    copy = tmp_path / "board"
    shutil.copytree(committed, copy)
    write_table(copy, config.eps, {e.name: e.note for e in config.entries}, shown_as=str(config.out))
    rebuilt = (copy / "README.md").read_text(encoding="utf-8")
    assert rebuilt == (committed / "README.md").read_text(encoding="utf-8")
    table = [line for line in rebuilt.splitlines() if line.startswith("|")]
    readme = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert table and all(line in readme for line in table)


def test_config_errors_name_the_key(tmp_path):
    from rubriq.evaluation.leaderboard import LeaderboardConfig

    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"sampels": 4}))
    with pytest.raises(ValueError, match="unknown key\\(s\\) sampels"):
        LeaderboardConfig.from_yaml(path)
    path.write_text(yaml.safe_dump({"entries": [{"name": "a", "model": "x", "modle": 1}]}))
    with pytest.raises(ValueError, match="entry 'a': unknown key\\(s\\) modle"):
        LeaderboardConfig.from_yaml(path)
