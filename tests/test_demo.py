"""``rubriq study demo`` (``make demo``): the rewriting policies side by side, a verified sample
with fewer T gates, a few GRPO steps; on committed rewrite prompts and a tiny random policy."""

import json
from pathlib import Path

import pytest
import yaml

from tests.tiny import TINY_GRPO, tiny_training

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ROOT / "results/studies/rewriting/pilot/base/data/validation.jsonl"
TRAIN = ROOT / "results/studies/rewriting/pilot/base/data/train.jsonl"


def _rows(count):
    return [json.loads(line) for line in PROMPTS.read_text().splitlines()[:count]]


def _t_count(qasm: str) -> int:
    return sum(1 for line in qasm.splitlines() if line.split(" ")[0] in ("t", "tdg"))


def test_a_planted_rewrite_is_a_verified_reduction_and_the_report_shows_it():
    from qiskit import qasm2
    from qiskit.quantum_info import Operator

    from rubriq.evaluation.records import Record
    from rubriq.evaluation.sampling import score
    from rubriq.studies.demo import DemoSettings, best_reduction, outcome_counts, report_lines

    row = next(r for r in _rows(48) if _t_count(r["sft_answers"][0]) < r["t0"])
    answer, source = row["sft_answers"][0], json.loads(row["target"])["qasm"]
    # the independent reference: the answer is the input's unitary (up to phase) with fewer T gates
    assert Operator(qasm2.loads(answer)).equiv(Operator(qasm2.loads(source)))
    fenced = f"```qasm\n{answer}\n```"
    records = score([Record.of_row(row, fenced, 0), Record.of_row(row, f"```qasm\n{source}\n```", 1)], progress=False)
    assert outcome_counts(records) == {"reduction": 1, "copy": 1, "other_correct": 0, "wrong": 0}
    label, shown = best_reduction({"base": [], "trained": records})
    assert label == "trained" and shown.text == fenced
    assert shown.result["t_count"] == _t_count(answer) and shown.result["average_fidelity"] == pytest.approx(1.0)
    summary = {
        "policies": {
            "trained": {
                "model": "m",
                "committed": True,
                "samples": 2,
                "outcomes": outcome_counts(records),
                "seconds": 1.0,
            },
            "GRPO": {"model": "absent", "committed": False},
        },
        "grpo": None,
    }
    text = "\n".join(report_lines(DemoSettings(), [row], summary, (label, shown)))
    assert f"T {row['t0']} -> {_t_count(answer)}" in text
    assert "| GRPO | `absent` | not committed yet |" in text
    assert "| trained | `m` | 2 | 1 (0.500 [" in text
    assert "None was found" not in text


def test_no_reduction_is_said_plainly():
    from rubriq.studies.demo import DemoSettings, best_reduction, report_lines

    assert best_reduction({"base": []}) is None
    text = "\n".join(report_lines(DemoSettings(), [], {"policies": {}, "grpo": None}, None))
    assert "None was found" in text


def test_bad_settings_are_named(tmp_path):
    from rubriq.config import ConfigError
    from rubriq.studies.demo import DemoSettings, read_rows

    bad = tmp_path / "bad.yaml"
    for body, words in [
        ({"count": 0}, "count must be >= 1"),
        ({"grpo_from": "nobody"}, "grpo_from 'nobody' is not a policy"),
        ({"sampling": {"temperature": 1.0}}, "give samples, temperature"),
        ({"temprature": 1.0}, "unknown key(s) ['temprature']"),
        ({"samples": 0}, "samples must be >= 1"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
    ]:
        bad.write_text(yaml.safe_dump(body))
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            DemoSettings.from_yaml(bad)
    with pytest.raises(ConfigError, match="no such prompt file"):
        read_rows(tmp_path / "missing.jsonl")


def test_the_demo_runs_end_to_end_on_a_tiny_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    from rubriq.models import load_tokenizer, tiny_model
    from rubriq.studies.demo import DemoSettings, run

    tokenizer = load_tokenizer("embedded")
    policy = tmp_path / "tiny"
    tiny_model(tokenizer).save_pretrained(policy)
    tokenizer.save_pretrained(policy)
    train = tmp_path / "train.yaml"
    train.write_text(yaml.safe_dump(tiny_training(grpo={**TINY_GRPO, "logging_steps": 1})))
    config = tmp_path / "demo.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "prompts": str(PROMPTS),
                "train_prompts": str(TRAIN),
                "count": 2,
                "temperature": 1.0,
                "samples": 2,
                "max_new_tokens": 6,
                "policies": {"tiny": str(policy), "GRPO": str(tmp_path / "not-there")},
                "train_config": str(train),
                "grpo_from": "tiny",
                "grpo_steps": 1,
            }
        )
    )
    report = run(DemoSettings.from_yaml(config), tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    tiny = summary["policies"]["tiny"]
    assert tiny["samples"] == 4 and sum(tiny["outcomes"].values()) == 4
    assert summary["policies"]["GRPO"]["committed"] is False
    assert [s["step"] for s in summary["grpo"]["steps"]] == [1] and summary["grpo"]["scored"] >= 1
    assert len((tmp_path / "out" / "records_tiny.jsonl").read_text().splitlines()) == 4
    text = report.read_text()
    assert "| GRPO |" in text and "not committed yet" in text and "## GRPO steps" in text
