"""The convergence study end to end on a tiny random model (2 steps per arm-seed), its
resumability, and the aggregation against hand-computed numbers."""

import csv
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from rubriq.rubric.engine import DIMENSIONS
from tests.tiny import TINY_GRPO, TINY_SFT, tiny_adapter, tiny_build, tiny_quickstart, tiny_training

pytest.importorskip("trl")

SMALL = tiny_build(encodings=["basis_encoding", "angle_encoding"], fractions=[0.0, 0.4])


def _configs(tmp_path, arms):
    train = tiny_training(SMALL, sft=TINY_SFT, grpo={**TINY_GRPO, "temperature": 1.0})
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(train))
    study = {
        "train_config": "train.yaml",
        "output_dir": str(tmp_path / "out"),
        "arms": arms,
        "seeds": [0, 1],
        "steps": 2,
        "eval_every": 1,
        "samples": 2,
        "batch_size": 8,
        "target_correct_rate": 0.5,
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    return tmp_path / "study.yaml"


@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    import os

    os.environ.setdefault("RUBRIQ_CACHE", str(tmp_path_factory.mktemp("cache")))
    from rubriq.cli import app

    tmp = tmp_path_factory.mktemp("study")
    config = _configs(tmp, {"rubric": {"reward": "rubric"}, "none": {"reward": "none"}})
    result = CliRunner().invoke(app, ["study", "convergence", str(config)])
    assert result.exit_code == 0, result.output
    return tmp, config


def test_study_runs_every_arm_seed_and_writes_summary_and_plots(study_run):
    tmp, _ = study_run
    out = tmp / "out"
    for name in ("summary.md", "summary.json", "per_step.csv", "curves.png", "training.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    rows = list(csv.DictReader(open(out / "per_step.csv")))
    # 2 arms x 2 seeds x evaluations at steps 0, 1, 2
    assert sorted((r["arm"], r["seed"], r["step"]) for r in rows) == sorted(
        (a, str(s), str(t)) for a in ("rubric", "none") for s in (0, 1) for t in (0, 1, 2)
    )
    summary = json.loads((out / "summary.json").read_text())
    held_out = [json.loads(x) for x in (out / "data" / "test.jsonl").read_text().splitlines()]
    train = [json.loads(x) for x in (out / "data" / "train.jsonl").read_text().splitlines()]
    assert summary["eval_prompts"] == len(held_out) and not {r["target"] for r in held_out} & {
        r["target"] for r in train
    }
    # step 0 is the shared SFT policy: equal for both arms of a seed
    for seed in ("0", "1"):
        at0 = [r for r in rows if r["seed"] == seed and r["step"] == "0"]
        assert at0[0]["mean_reward"] == at0[1]["mean_reward"]
    # the trained arm logged its training signal and counted its simulations; the control none
    rubric = [json.loads(x) for x in (out / "arms" / "rubric" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    assert any("frac_reward_zero_std" in r for r in rubric) and any("wrong_rewarded_rate" in r for r in rubric)
    done = json.loads((out / "arms" / "rubric" / "seed0" / "done.json").read_text())
    assert 0 < done["simulations"] <= 2 * 4  # 2 steps x 4 completions, distinct texts only
    assert json.loads((out / "arms" / "none" / "seed0" / "done.json").read_text())["simulations"] == 0
    # every held-out evaluation scored k = 2 samples per held-out prompt
    records = [
        json.loads(x) for x in (out / "arms" / "rubric" / "seed1" / "records_step2.jsonl").read_text().splitlines()
    ]
    assert len(records) == 2 * len(held_out) and {r["sample"] for r in records} == {0, 1}
    assert "| rubric - none |" in (out / "summary.md").read_text()
    # both arms of both seeds trained from the one warm-start: every pair is matched
    assert summary["differences"]["rubric - none"]["same_warm_start"] == [0, 1]
    assert [line for line in (out / "summary.md").read_text().splitlines() if line.startswith("| rubric - none |")][
        0
    ].endswith("| s0, s1 (2 of 2) |")
    # the warm-start's fingerprint is the SHA-256 of its weights, recorded by every arm-seed
    import hashlib

    sha = hashlib.sha256((out / "sft" / "model" / "model.safetensors").read_bytes()).hexdigest()
    assert json.loads((out / "sft" / "fingerprint.json").read_text())["sha256"] == sha
    assert done["warm_start_sha256"] == sha
    assert summary["warm_starts"] == {sha: ["rubric s0", "rubric s1"]}
    assert f"| {sha[:16]} | rubric s0, rubric s1 |" in (out / "summary.md").read_text()


def test_a_rebuilt_warm_start_gets_its_own_fingerprint(tmp_path, caplog):
    """A run folder restored from committed results keeps their fingerprint.json while it has no
    weights; once a warm-start is rebuilt there, the fingerprint names the new weights (the old
    file was kept, and arm-seeds of a new warm-start recorded the old one's hash)."""
    import hashlib
    import logging

    from rubriq.studies.convergence import warm_start_fingerprint

    sft = tmp_path / "sft"
    sft.mkdir()
    old = {"sha256": "789d" + "0" * 60, "trained_on": None, "written": "2026-12-02T05:07:20+0000"}
    (sft / "fingerprint.json").write_text(json.dumps(old))
    assert warm_start_fingerprint(tmp_path) == old  # committed results: no weights, nothing to check
    (sft / "model").mkdir()
    (sft / "model" / "model.safetensors").write_bytes(b"rebuilt weights")
    with caplog.at_level(logging.WARNING, logger="rubriq.studies.warm_start"):
        new = warm_start_fingerprint(tmp_path, trained_here=True)
    assert new["sha256"] == hashlib.sha256(b"rebuilt weights").hexdigest() != old["sha256"]
    assert new["trained_on"] and "rebuilt" in caplog.text
    assert json.loads((sft / "fingerprint.json").read_text()) == new
    assert warm_start_fingerprint(tmp_path) == new  # the same weights: the file is kept as it is


def test_study_resumes_without_redoing_finished_arm_seeds(study_run):
    from rubriq.cli import app

    tmp, config = study_run
    done = tmp / "out" / "arms" / "rubric" / "seed0" / "done.json"
    before = done.stat().st_mtime_ns
    (tmp / "out" / "arms" / "none" / "seed1" / "done.json").unlink()  # as if stopped during it
    result = CliRunner().invoke(app, ["study", "convergence", str(config)])
    assert result.exit_code == 0, result.output
    assert done.stat().st_mtime_ns == before
    assert (tmp / "out" / "arms" / "none" / "seed1" / "done.json").is_file()
    rows = list(csv.DictReader(open(tmp / "out" / "per_step.csv")))
    assert len(rows) == 12


def test_workers_run_arm_seeds_in_parallel_processes_with_the_same_results(study_run, tmp_path):
    """--workers 2: the pending arm-seeds run as two processes of one thread each, logged to
    OUT/logs/; each gives what the in-process run gave (same evaluations, same training log)."""
    import shutil

    from rubriq.cli import app

    tmp, config = study_run
    out = tmp_path / "out"
    shutil.copytree(tmp / "out", out)
    for name in ("rubric", "none"):
        shutil.rmtree(out / "arms" / name / "seed1")
    result = CliRunner().invoke(app, ["study", "convergence", str(config), "--out", str(out), "--workers", "2"])
    assert result.exit_code == 0, result.output
    for name in ("rubric", "none"):
        log = (out / "logs" / f"{name}_seed1.log").read_text()
        assert "summary not written" in log, log[-2000:]
        assert (out / "arms" / name / "seed1" / "done.json").is_file()

    def evals(root, name):
        rows = [json.loads(x) for x in (root / "arms" / name / "seed1" / "evals.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if k != "eval_seconds"} for r in rows]

    assert evals(out, "rubric") == evals(tmp / "out", "rubric")
    assert evals(out, "none") == evals(tmp / "out", "none")
    losses = [
        [
            json.loads(x).get("loss")
            for x in (root / "arms" / "rubric" / "seed1" / "metrics.jsonl").read_text().splitlines()
        ]
        for root in (out, tmp / "out")
    ]
    assert losses[0] == losses[1]
    # `rubriq study compare`: the same run, every logged value, score and sample (wall times aside)
    a, b = out / "arms" / "rubric" / "seed1", tmp / "out" / "arms" / "rubric" / "seed1"
    result = CliRunner().invoke(app, ["study", "compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    from rubriq.studies.convergence import compare_arm_seeds

    same = compare_arm_seeds(a, b)
    assert {"done.json", "evals.jsonl", "metrics.jsonl", "train_scores.jsonl"} <= set(same)
    assert all(c["first_difference"] is None and c["equal"] == c["rows"][0] > 0 for c in same.values()), same
    assert len(list(csv.DictReader(open(out / "per_step.csv")))) == 12  # the parent wrote the summary
    result = CliRunner().invoke(app, ["study", "convergence", str(config), "--workers", "0"])
    assert result.exit_code == 2


def test_compare_finds_the_first_difference_between_two_arm_seeds(study_run, tmp_path):
    """A changed score, a missing row and another warm-start are each found where they are."""
    import shutil

    from rubriq.cli import app
    from rubriq.studies.convergence import compare_arm_seeds

    tmp, config = study_run
    a = tmp / "out" / "arms" / "rubric" / "seed0"
    b = tmp_path / "seed0"
    shutil.copytree(a, b)
    lines = (b / "train_scores.jsonl").read_text().splitlines()
    row = json.loads(lines[2])
    key = next(k for k, v in row.items() if isinstance(v, float))
    row[key] += 1e-9
    lines[2] = json.dumps(row)
    (b / "train_scores.jsonl").write_text("\n".join(lines) + "\n")
    evals = (b / "evals.jsonl").read_text().splitlines()
    (b / "evals.jsonl").write_text("\n".join(evals[:-1]) + "\n")
    done = json.loads((b / "done.json").read_text())
    (b / "done.json").write_text(json.dumps({**done, "seconds": 1.0, "warm_start_sha256": "ab12"}))
    got = compare_arm_seeds(a, b)
    assert got["train_scores.jsonl"]["first_difference"] == (2, key)
    assert got["train_scores.jsonl"]["equal"] == len(lines) - 1
    assert got["evals.jsonl"] == {
        "rows": (len(evals), len(evals) - 1),
        "equal": len(evals) - 1,
        "first_difference": (len(evals) - 1, None),
    }
    # "seconds" was set to 1.0 above, unlike a's: compare leaves wall times out, so the warm-start is what differs
    assert got["done.json"]["first_difference"] == (0, "warm_start_sha256")
    assert got["metrics.jsonl"]["first_difference"] is None
    result = CliRunner().invoke(app, ["study", "compare", str(a), str(b)])
    assert result.exit_code == 1 and f"row 2: {key}" in result.output, result.output
    result = CliRunner().invoke(app, ["study", "compare", str(a), str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "no such folder" in result.output
    result = CliRunner().invoke(app, ["study", "compare", str(a), str(tmp_path)])
    assert result.exit_code == 2 and "not an arm-seed folder" in result.output


def test_summary_only_in_a_results_folder_without_its_data(study_run, tmp_path):
    """Committed results hold no data/: --summary-only counts the held-out prompts from the
    summary.json there, and says what is missing where there is neither."""
    import shutil

    from rubriq.cli import app

    tmp, config = study_run
    out = tmp_path / "results"
    shutil.copytree(tmp / "out", out, ignore=shutil.ignore_patterns("data", "data_filtered", "sft"))
    before = json.loads((out / "summary.json").read_text())
    result = CliRunner().invoke(app, ["study", "convergence", str(config), "--out", str(out), "--summary-only"])
    assert result.exit_code == 0, result.output
    after = json.loads((out / "summary.json").read_text())
    assert after["eval_prompts"] == before["eval_prompts"] > 0
    assert after["differences"] == before["differences"]
    (out / "summary.json").unlink()
    result = CliRunner().invoke(app, ["study", "convergence", str(config), "--out", str(out), "--summary-only"])
    assert result.exit_code == 2 and "held-out prompts" in result.output, result.output


def test_an_interrupted_parallel_study_stops_its_processes(tmp_path, monkeypatch):
    import subprocess
    import sys

    from rubriq.studies import convergence, parallel

    started = []

    def interrupted(config, out, queue, running, *args, **kwargs):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # paces nothing: a unit
        started.append(proc)
        running.append((proc, "rubric", 0, tmp_path / "log"))
        raise KeyboardInterrupt

    monkeypatch.setattr(parallel, "_run_queue", interrupted)
    with pytest.raises(KeyboardInterrupt):
        convergence.run_parallel(tmp_path / "study.yaml", tmp_path, [("rubric", 0), ("none", 0)], 2)
    assert started and started[0].poll() is not None  # terminated, not left running


def test_each_parallel_unit_is_kept_as_its_process_ends(tmp_path, monkeypatch):
    """on_done runs for a unit as soon as its process ends well (the study commits it there), not
    after the last one; a failed unit is named, not kept.  The processes stand in for arm-seeds:
    one ends at once, one waits until the first has been kept, one fails."""
    import subprocess
    import sys

    from rubriq.studies import parallel

    kept_flag = tmp_path / "first-kept"
    scripts = {
        "fast": "pass",
        # ends only once the fast unit was kept: on_done for it must run while this one still runs
        "slow": (
            f"import pathlib, sys, time\nend = time.monotonic() + 60\n"
            f"while not pathlib.Path({str(kept_flag)!r}).exists():\n"
            "    if time.monotonic() > end: sys.exit(4)  # never kept while running: fail, do not hang\n"
            "    time.sleep(0.05)  # paces the poll for the flag"
        ),
        "bad": "raise SystemExit(3)",
    }
    real = subprocess.Popen

    def fake(cmd, **kwargs):
        arm = cmd[cmd.index("--arm") + 1]
        return real([sys.executable, "-c", scripts[arm]], **kwargs)

    monkeypatch.setattr(subprocess, "Popen", fake)
    kept = []

    def on_done(name, seed):
        kept.append((name, seed))
        if name == "fast":
            kept_flag.write_text("kept")

    with pytest.raises(RuntimeError, match="bad seed 0"):
        parallel.run_parallel(
            tmp_path / "study.yaml", tmp_path, [("slow", 0), ("fast", 0), ("bad", 0)], 2, on_done=on_done
        )
    assert kept == [("fast", 0), ("slow", 0)]


def test_unknown_arm_and_bad_settings_are_clear_errors(tmp_path):
    from rubriq.cli import app

    config = _configs(tmp_path, {"rubric": {"reward": "rubric"}})
    result = CliRunner().invoke(app, ["study", "convergence", str(config), "--arm", "nope"])
    assert result.exit_code == 2 and "unknown arm" in result.output
    bad = yaml.safe_load(config.read_text()) | {"samples": 1}
    config.write_text(yaml.safe_dump(bad))
    result = CliRunner().invoke(app, ["study", "convergence", str(config)])
    assert result.exit_code == 2 and "samples must be >= 2" in result.output


def test_aggregate_means_intervals_time_to_target_and_paired_differences():
    from rubriq.studies.convergence import ArmSettings, StudySettings, aggregate

    study = StudySettings(
        train_config="x.yaml",
        arms={"rubric": ArmSettings(), "none": ArmSettings(reward="none")},
        seeds=(0, 1, 2),
        steps=10,
        eval_every=10,
        target_correct_rate=0.5,
    )
    base = {
        "mean_reward": 0.5,
        "pass@k": 0.5,
        "mean_t_correct": 3.0,
        "wrong_rewarded_rate": 0.0,
        "trivial_rate": 0.0,
        "parse_rate": 1.0,
        "mean_fidelity": 0.9,
        "arm_seconds": 60.0,
        "train/reward": 0.4,
    }
    correct = {
        ("rubric", 0): (0.2, 0.6),
        ("rubric", 1): (0.3, 0.4),
        ("rubric", 2): (0.1, 0.8),
        ("none", 0): (0.2, 0.2),
        ("none", 1): (0.3, 0.3),
        ("none", 2): (0.1, 0.1),
    }
    rows = [
        {**base, "arm": a, "seed": s, "step": step, "correct_rate": c[i], "simulations": 40 * step}
        for (a, s), c in correct.items()
        for i, step in enumerate((0, 10))
    ]
    agg = aggregate(rows, study)
    m, lo, hi = agg["arms"]["rubric"]["per_step"][10]["correct_rate"]
    assert m == pytest.approx(0.6)
    # t(0.975, 2) = 4.302653 x stdev(0.6, 0.4, 0.8) = 0.2 / sqrt(3)
    assert hi - m == pytest.approx(4.302653 * 0.2 / math.sqrt(3), rel=1e-5)
    assert agg["arms"]["rubric"]["time_to_target"] == [10, None, 10]
    assert agg["arms"]["rubric"]["simulations_to_target"] == [400, None, 400]
    d = agg["differences"]["rubric - none"]["correct_rate"]
    assert d[0] == pytest.approx((0.4 + 0.1 + 0.7) / 3)
    assert agg["differences"]["rubric - none"]["same_warm_start"] == [0, 1, 2]  # none recorded: one warm-start
    # seed 2's rubric trained from a rebuilt warm-start: its pair is not matched (the difference still counts)
    rebuilt = [{**r, "warm_start": "ab12"} if (r["arm"], r["seed"]) == ("rubric", 2) else r for r in rows]
    pair = aggregate(rebuilt, study)["differences"]["rubric - none"]
    assert pair["same_warm_start"] == [0, 1] and pair["seeds"] == [0, 1, 2]
    assert pair["correct_rate"][0] == pytest.approx(d[0])


def test_the_headline_counts_reductions_and_their_change_by_hand(tmp_path):
    """The study's one table (summary.md's headline, copied into a results README between its
    markers): pooled reductions, the change from step 0 over seeds (with the MDE) and over
    prompts, computed by hand for 2 seeds x 2 prompts x 2 samples."""
    from rubriq.studies import layout
    from rubriq.studies.aggregate import headline
    from rubriq.studies.convergence import ArmSettings, StudySettings
    from rubriq.studies.summary import HEADLINE_BEGIN, HEADLINE_END, headline_section, summary_markdown, sync_headline

    study = StudySettings(
        train_config="x.yaml",
        arms={"rubric": ArmSettings(), "none": ArmSettings(reward="none")},
        seeds=(0, 1),
        steps=10,
        eval_every=10,
    )
    spec = json.dumps({"algorithm": "circuit", "qasm": "qreg q[1];\nt q[0];\nt q[0];\n"})

    def records(per_prompt):  # 1: a correct reduction (F 1, T 0 < T0 2); 0: a wrong sample (F 0.5)
        return [
            {
                "prompt_id": p,
                "target": spec,
                "t0": 2,
                "text": "qreg q[1];\ns q[0];" if hit else "qreg q[1];",
                "result": {"parsed": True, "average_fidelity": 1.0 if hit else 0.5, "t_count": 0},
            }
            for p, hits in per_prompt.items()
            for hit in hits
        ]

    samples = {  # (seed, step): prompt -> outcomes
        (0, 0): {"a": [1, 0], "b": [0, 0]},
        (0, 10): {"a": [1, 1], "b": [1, 0]},
        (1, 0): {"a": [0, 0], "b": [0, 0]},
        (1, 10): {"a": [1, 0], "b": [0, 0]},
    }
    for (seed, step), per_prompt in samples.items():
        path = layout.step0_records(tmp_path, "test", seed) if step == 0 else None
        path = path or layout.eval_records(tmp_path, study, "rubric", seed, "test", step)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records(per_prompt)))
    gap = {(0, 0): 0.2, (0, 10): 0.6, (1, 0): 0.0, (1, 10): 0.1}
    rows = [
        {
            "arm": arm,
            "seed": seed,
            "split": "test",
            "step": step,
            "rewrite_reduction_rate": sum(map(sum, samples[(seed, at)].values())) / 4,
            "rewrite_copy_rate": 0.0,
            "rewrite_wrong_rate": 1 - sum(map(sum, samples[(seed, at)].values())) / 4,
            "gap_closed": gap[(seed, at)],
        }
        for arm in ("rubric", "none")
        for seed in (0, 1)
        for step in (0, 10)
        for at in [(step if arm == "rubric" else 0)]
    ]
    found = headline(tmp_path, study, rows)
    assert list(found) == ["warm-start", "rubric"]  # the control repeats the warm-start: no row of its own
    warm, rubric = found["warm-start"], found["rubric"]
    assert (warm["reductions"], warm["samples"], warm["reduction_rate"][0]) == (1, 8, pytest.approx(0.125))
    assert (rubric["reductions"], rubric["samples"], rubric["seeds"]) == (4, 8, [0, 1])
    # over seeds: changes 0.75 - 0.25 = 0.5 and 0.25 - 0 = 0.25; s = 0.1768, t(0.975, 1) = 12.706
    m, lo, hi = rubric["change"]
    assert m == pytest.approx(0.375) and hi - m == pytest.approx(12.7062 * 0.125, rel=1e-4)
    # MDE: (t(0.975, 1) + t(0.8, 1)) * s / sqrt(2) = (12.7062 + 1.3764) * 0.125
    assert rubric["mde/change"] == pytest.approx(14.0826 * 0.125, rel=1e-4)
    # over prompts: a changes by 0.5 at both seeds, b by 0.5 and 0: means 0.5 and 0.25
    assert rubric["change_by_prompt"][0] == pytest.approx(0.375) and rubric["prompts"] == 2
    assert rubric["gap_closed"][0] == pytest.approx(0.35) and rubric["gap_closed_change"][0] == pytest.approx(0.25)
    assert rubric["wrong"] == pytest.approx(0.5) and warm["change"] == (None, None, None)

    text = summary_markdown(study, {"arms": {}, "final_step": 10, "differences": {}, "headline": found}, {}, None, 8, 0)
    table = headline_section(text)
    assert table.splitlines()[2].startswith("| warm-start (step 0) | 0, 1 | 0.125 [")
    assert "| `rubric` | 0, 1 | 0.500 [" in table and "| 4 of 8 | 0.375 [" in table
    readme = tmp_path / "README.md"
    readme.write_text(f"# A study\n\n{HEADLINE_BEGIN}\nold numbers\n{HEADLINE_END}\n\nMore words.\n")
    assert sync_headline(readme, text)
    assert readme.read_text() == f"# A study\n\n{HEADLINE_BEGIN}\n{table}\n{HEADLINE_END}\n\nMore words.\n"
    plain = tmp_path / "plain.md"
    plain.write_text("# No markers\n")
    assert not sync_headline(plain, text) and plain.read_text() == "# No markers\n"


def test_a_regenerated_summary_is_committed_with_the_readme_whose_headline_it_rewrote(tmp_path):
    """``--commit``: the summary's commit takes the results folder and the README above it that
    carries the headline markers, and nothing else (not a README without markers, not another
    changed file), so a study run leaves no results file changed but uncommitted."""
    import subprocess

    from rubriq.studies.summary import HEADLINE_BEGIN, HEADLINE_END, headline_readmes
    from rubriq.studies.units import git_commit

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    results = tmp_path / "study" / "grpo"
    results.mkdir(parents=True)
    (results / "summary.md").write_text("old\n")
    headline = tmp_path / "study" / "README.md"
    headline.write_text(f"# Study\n{HEADLINE_BEGIN}\nold\n{HEADLINE_END}\n")
    (results / "README.md").write_text("# no markers\n")
    other = tmp_path / "notes.md"
    other.write_text("a\n")
    git("add", "-A")
    git("commit", "-qm", "start")
    assert headline_readmes(results) == (headline,)
    (results / "summary.md").write_text("new\n")
    headline.write_text(f"# Study\n{HEADLINE_BEGIN}\nnew\n{HEADLINE_END}\n")
    (results / "README.md").write_text("# no markers, edited by hand\n")  # in results: committed with it
    other.write_text("b\n")
    assert git_commit(results, "summary", also=headline_readmes(results))
    assert sorted(git("show", "--name-only", "--format=", "HEAD").split()) == [
        "study/README.md",
        "study/grpo/README.md",
        "study/grpo/summary.md",
    ]
    assert git("status", "--porcelain").split() == ["M", "notes.md"]
    assert not git_commit(results, "nothing changed", also=headline_readmes(results))
    outside = tmp_path.parent / f"{tmp_path.name}-outside.md"  # not in the repository: left out
    outside.write_text("x\n")
    (results / "summary.md").write_text("newer\n")
    assert git_commit(results, "summary again", also=(outside,))
    assert git("show", "--name-only", "--format=", "HEAD").split() == ["study/grpo/summary.md"]


def test_every_trained_arm_is_compared_with_binary_and_with_none():
    """The rewriting study's arms: each against ``none`` and each trained arm against ``binary``
    (the issue's acceptance), with the paired difference computed by hand for one new pair."""
    from rubriq.studies.aggregate import _pairs
    from rubriq.studies.convergence import ArmSettings, StudySettings, aggregate

    names = ["rubric", "rubric_relative", "rubric_relative_correct", "sparse", "binary", "none"]
    pairs = _pairs(names)
    assert {b for a, b in pairs if a == "rubric_relative_correct"} == {"binary", "none"}
    assert {a for a, b in pairs if b == "binary"} == {"rubric", "rubric_relative", "rubric_relative_correct", "sparse"}
    assert {a for a, b in pairs if b == "none"} == set(names) - {"none"}
    assert ("binary", "binary") not in pairs and ("none", "binary") not in pairs
    study = StudySettings(
        train_config="x.yaml",
        arms={"rubric_relative_correct": ArmSettings(), "binary": ArmSettings(reward="sparse_correct")},
        seeds=(0, 1),
        steps=10,
        eval_every=10,
    )
    rates = {
        ("rubric_relative_correct", 0): 0.25,
        ("rubric_relative_correct", 1): 0.5,
        ("binary", 0): 0.125,
        ("binary", 1): 0.5,
    }
    rows = [
        {
            "arm": a,
            "seed": s,
            "step": step,
            "correct_rate": r if step else 0.1,
            "arm_seconds": 1.0,
            "simulations": 8 * step,
        }
        for (a, s), r in rates.items()
        for step in (0, 10)
    ]
    diff = aggregate(rows, study)["differences"]["rubric_relative_correct - binary"]
    assert diff["seeds"] == [0, 1] and diff["correct_rate"][0] == pytest.approx((0.125 + 0.0) / 2)


def test_quickstart_reports_sampled_held_out_metrics_with_intervals(tmp_path, monkeypatch):
    """The quickstart pipeline on the tiny model: every phase sampled k = 2 times per held-out
    prompt, intervals and paired differences in the report."""
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    from rubriq.training.quickstart import run

    (tmp_path / "q.yaml").write_text(yaml.safe_dump(tiny_quickstart(SMALL)))
    report = run(tmp_path / "q.yaml", tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    held_out = len((tmp_path / "out" / "data" / "test.jsonl").read_text().splitlines())
    for phase, s in summary["summaries"].items():
        assert s["completions"] == 2 * held_out, phase
        assert len(s["correct_ci"]) == 3 and "pass@2" in s
    assert set(summary["differences"]) == {"before SFT -> after SFT", "after SFT -> after GRPO"}
    text = report.read_text()
    assert "2 completions sampled per prompt at temperature 1.0" in text and "Paired per-prompt differences" in text
    # a random tiny model never gets a circuit right: no change of the correct rate, and the report says so
    assert (
        "correct rate no measurable change" in text or "correct rate not measured" in text
    ) and "After 2 GRPO steps, held-out:" in text


# -- the learning study's design on the tiny model ------------------------------------------------
LEARNING = tiny_build(
    qft_sizes=[],
    encoding_sizes=[],
    breadth=["bell", "cs"],
    breadth_small=True,
    small_rewrites=[{"count": 6, "qubits": [2], "core_gates": [2, 4], "redundancies": [1, 2], "seed": 3}],
    fractions=[0.0, 0.34],
)


@pytest.fixture(scope="module")
def learning_run(tmp_path_factory):
    """Five arms x 2 seeds x 2 steps with the learning study's features: difficulty filter,
    training-prompt evaluation, eval_at, the binary arm, a primary metric on the rewrite gap."""
    import os

    os.environ.setdefault("RUBRIQ_CACHE", str(tmp_path_factory.mktemp("cache")))
    from rubriq.cli import app

    tmp = tmp_path_factory.mktemp("learning")
    train = tiny_training(LEARNING, sft=TINY_SFT, grpo={**TINY_GRPO, "temperature": 1.0})
    (tmp / "train.yaml").write_text(yaml.safe_dump(train))
    arms = {
        "rubric": {"reward": "rubric"},
        "rubric_gated": {"reward": "rubric", "rubric": {"fidelity_gating": "multiplicative"}},
        "sparse": {"reward": "sparse_inverse_t"},
        "binary": {"reward": "sparse_correct"},
        "none": {"reward": "none"},
    }
    study = {
        "train_config": "train.yaml",
        "output_dir": str(tmp / "out"),
        "arms": arms,
        "seeds": [0, 1],
        "steps": 2,
        "eval_at": [1],
        "samples": 2,
        "batch_size": 8,
        "train_eval_prompts": 2,
        "filter_prompts": True,
        "filter_samples": 2,
        "primary_metric": "gap_closed",
        "target_value": 0.5,
    }
    (tmp / "study.yaml").write_text(yaml.safe_dump(study))
    result = CliRunner().invoke(app, ["study", "convergence", str(tmp / "study.yaml")])
    return tmp, result


def test_the_difficulty_filter_stops_a_study_whose_pilot_gives_no_signal(learning_run):
    tmp, result = learning_run
    out = tmp / "out"
    filtered = json.loads((out / "filter.json").read_text())
    train = [json.loads(x) for x in (out / "data" / "train.jsonl").read_text().splitlines()]
    assert filtered["prompts"] == len(train) and filtered["samples_per_prompt"] == 2
    assert set(filtered["zero_variance_before_filter"]) == {"rubric", "rubric_gated", "sparse", "binary"}
    if filtered["kept_prompts"] == 0:
        # the tiny random model writes no circuit: every pilot group has equal rewards, and the study
        # stops with that reason instead of training on prompts that give no signal
        assert result.exit_code == 2 and "no training prompt gives a reward signal" in result.output
        assert all(v == 1.0 for v in filtered["zero_variance_before_filter"].values())
        return
    assert result.exit_code == 0, result.output


def test_the_learning_design_on_a_model_that_answers(tmp_path, monkeypatch):
    """The same design where the pilot sees signal: the filter keeps prompts, every arm-seed
    evaluates the held-out split and the training sample at steps 0, 1, 2, and the summary
    carries the correlations, the MDE and the primary metric."""
    import os

    from rubriq.models import load_tokenizer
    from rubriq.studies import convergence, pilot

    monkeypatch.setenv("RUBRIQ_CACHE", os.environ.get("RUBRIQ_CACHE", str(tmp_path / "cache")))
    real_pilot = pilot.pilot

    def pilot_with_a_signal(study, settings, warm, rows):
        info = real_pilot(study, settings, warm, rows)
        info["kept"] = [r["id"] for r in rows]  # keep every prompt: the tiny model's rewards are all 0
        info["kept_prompts"] = len(rows)
        return info

    monkeypatch.setattr(pilot, "pilot", pilot_with_a_signal)
    tmp = tmp_path
    (tmp / "train.yaml").write_text(yaml.safe_dump(tiny_training(LEARNING, sft=TINY_SFT, grpo=TINY_GRPO)))
    study = {
        "train_config": "train.yaml",
        "output_dir": str(tmp / "out"),
        "arms": {"binary": {"reward": "sparse_correct"}, "none": {"reward": "none"}},
        "seeds": [0, 1],
        "steps": 2,
        "eval_at": [1],
        "samples": 2,
        "batch_size": 8,
        "train_eval_prompts": 2,
        "filter_prompts": True,
        "filter_samples": 2,
        "primary_metric": "gap_closed",
        "target_value": 0.5,
    }
    (tmp / "study.yaml").write_text(yaml.safe_dump(study))
    load_tokenizer()  # the embedded tokenizer (cached)
    path = convergence.run(tmp / "study.yaml")
    out = tmp / "out"
    rows = list(csv.DictReader(open(out / "per_step.csv")))
    assert sorted((r["arm"], r["seed"], r["step"], r["split"]) for r in rows) == sorted(
        (a, str(s), str(t), split)
        for a in ("binary", "none")
        for s in (0, 1)
        for t in (0, 1, 2)
        for split in ("test", "train")
    )
    # the gap metric is computed on the held-out rewrite prompts (a random model closes 0 of it)
    held = [r for r in rows if r["split"] == "test"]
    assert all(r["gap_closed"] not in ("", None) and float(r["gap_closed"]) == 0.0 for r in held)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["study"]["primary_metric"] == "gap_closed" and "binary - none" in summary["differences"]
    assert "mde/gap_closed" in summary["differences"]["binary - none"]
    # each trained arm-seed against its own step 0 on the same prompts (a random model: no change at all)
    change = summary["paired_from_step0"]["binary"]["0"]["test"]
    assert set(summary["paired_from_step0"]) == {"binary"} and change["prompts"] >= 1
    assert change["correct"][0] == 0.0 and change["gap_closed"][0] == 0.0
    assert change["rewrite_copies"]["final"] == {"correct": 0, "copies": 0, "fewer_t": 0}
    assert (out / "arms" / "binary" / "seed0" / "final" / "adapter_config.json").is_file()  # the policy is saved
    scored = [
        json.loads(x) for x in (out / "arms" / "binary" / "seed0" / "train_scores.jsonl").read_text().splitlines()
    ]
    assert len(scored) == 2 * 4 and {"scores", "family", "reward"} <= set(scored[0])  # 2 steps x 4 completions
    # an arm-seed stopped mid-run (no done.json) is left out of every table, the correlations included
    # (this tiny model's completions do not parse, so parsed training scores are written for the check)
    settings = convergence.StudySettings.from_yaml(tmp / "study.yaml")
    rng = np.random.default_rng(0)
    for seed, n in ((0, 6), (1, 9)):
        rows_ = [
            {
                "family": "rewrite",
                "error_type": None,
                "scores": {d: float(x) for d, x in zip(DIMENSIONS, rng.random(5), strict=True)},
            }
            for _ in range(n)
        ]
        (out / "arms" / "binary" / f"seed{seed}" / "train_scores.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows_)
        )
    assert convergence.correlations(out, settings, 2)["train"]["binary"]["all"]["n"] == 15
    (out / "arms" / "binary" / "seed1" / "done.json").unlink()
    assert convergence.correlations(out, settings, 2)["train"]["binary"]["all"]["n"] == 6
    convergence.write_summary(out, settings, 1)
    assert {r["seed"] for r in csv.DictReader(open(out / "per_step.csv")) if r["arm"] == "binary"} == {"0"}
    assert set(json.loads((out / "summary.json").read_text())["paired_from_step0"]["binary"]) == {"0"}
    text = path.read_text()
    assert "Training prompts (2 fixed prompts" and "Difficulty filter" in text
    assert "effective number of dimensions" in text and "Change from step 0 to step 2 on the same prompts" in text
    train_rows = [json.loads(x) for x in (out / "data_filtered" / "train.jsonl").read_text().splitlines()]
    test_rows = [json.loads(x) for x in (out / "data" / "test.jsonl").read_text().splitlines()]
    assert not {r["target"] for r in train_rows} & {r["target"] for r in test_rows}


# -- a study from a pre-built warm-start, with a harder held-out tier --------------------------------
HARD_TIER = {
    "breadth": [],
    "small_rewrites": [{"count": 2, "qubits": [3], "core_gates": [2, 3], "redundancies": [3, 3], "seed": 5}],
}


def _prebuilt_warm_start(folder):
    """A tiny random model saved as a Hugging Face folder (config.json, weights, tokenizer)."""
    from rubriq.models import load_tokenizer, tiny_model

    tokenizer = load_tokenizer()
    tiny_model(tokenizer, seed=3).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def prebuilt_run(tmp_path_factory):
    """Two arms x 1 seed x 2 steps from a pre-built warm-start (given relative to the YAML), with
    a further held-out tier built for the study (3-qubit circuits, 3 planted redundancies: one
    more than any training circuit) as the primary tier."""
    import os

    os.environ.setdefault("RUBRIQ_CACHE", str(tmp_path_factory.mktemp("cache")))
    from rubriq.cli import app

    tmp = tmp_path_factory.mktemp("prebuilt")
    _prebuilt_warm_start(tmp / "models" / "warm")
    (tmp / "train.yaml").write_text(yaml.safe_dump(tiny_training(LEARNING, sft=TINY_SFT, grpo=TINY_GRPO)))
    study = {
        "train_config": "train.yaml",
        "output_dir": str(tmp / "out"),
        "warm_start_model": "models/warm",
        "arms": {
            "rubric": {"reward": "rubric", "rubric": {"fidelity": {"correct_threshold": 0.95}}},
            "none": {"reward": "none"},
        },
        "seeds": [0],
        "steps": 2,
        "eval_every": 1,
        "samples": 2,
        "batch_size": 8,
        "eval_tiers": {"hard": {"build": HARD_TIER}},
        "primary_tier": "hard",
        "primary_metric": "gap_closed",
        "target_value": 0.5,
    }
    (tmp / "study.yaml").write_text(yaml.safe_dump(study))
    result = CliRunner().invoke(app, ["study", "convergence", str(tmp / "study.yaml")])
    assert result.exit_code == 0, result.output
    return tmp


def test_a_prebuilt_warm_start_is_used_where_it_is_and_fingerprinted(prebuilt_run):
    import hashlib

    tmp = prebuilt_run
    out, warm = tmp / "out", (tmp / "models" / "warm").resolve()
    assert not (out / "sft" / "model").exists()  # no SFT ran
    sha = hashlib.sha256((warm / "model.safetensors").read_bytes()).hexdigest()
    fingerprint = json.loads((out / "sft" / "fingerprint.json").read_text())
    assert fingerprint["sha256"] == sha and fingerprint["model"] == str(warm) and fingerprint["trained_on"] is None
    for name in ("rubric", "none"):
        assert json.loads((out / "arms" / name / "seed0" / "done.json").read_text())["warm_start_sha256"] == sha
    # the trained policy is an adapter on the pre-built weights
    adapter = json.loads((out / "arms" / "rubric" / "seed0" / "final" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(warm)
    assert json.loads((out / "study.json").read_text())["warm_start_model"] == str(warm)


def test_a_further_held_out_tier_is_evaluated_at_every_step_and_reported_on_its_own(prebuilt_run):
    from rubriq.data.prompts import target_key

    out = prebuilt_run / "out"
    hard = [json.loads(x) for x in (out / "tiers" / "hard" / "test.jsonl").read_text().splitlines()]
    train = [json.loads(x) for x in (out / "data" / "train.jsonl").read_text().splitlines()]
    planted = [len(json.loads(r["planted"])) for r in hard]
    assert len(hard) == 2 and {r["num_qubits"] for r in hard} == {3} and set(planted) == {3}
    # one more planted redundancy than any training circuit, and more qubits
    assert max(len(json.loads(r["planted"])) for r in train if r.get("planted")) == 2
    assert max(r["num_qubits"] for r in train if r.get("planted")) == 2
    assert not {target_key(r) for r in hard} & {target_key(r) for r in train}
    rows = list(csv.DictReader(open(out / "per_step.csv")))
    assert sorted((r["arm"], r["split"], r["step"]) for r in rows) == sorted(
        (a, split, str(s)) for a in ("rubric", "none") for split in ("test", "hard") for s in (0, 1, 2)
    )
    # the same k = 2 samples per prompt on the tier, its records apart from the held-out split's
    for step in (1, 2):
        records = [
            json.loads(x)
            for x in (out / "arms" / "rubric" / "seed0" / f"hard_records_step{step}.jsonl").read_text().splitlines()
        ]
        assert len(records) == 2 * len(hard) and {r["prompt_id"] for r in records} == {r["id"] for r in hard}
    step0 = json.loads((out / "step0" / "hard_seed0.json").read_text())
    assert step0["split"] == "hard" and step0["completions"] == 2 * len(hard)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tier_prompts"] == {"hard": 2} and summary["study"]["primary_tier"] == "hard"
    assert set(summary["arms"]["rubric"]["tier_per_step"]["hard"]) == {"0", "1", "2"}
    assert set(summary["tier_differences"]) == {"test"} and "rubric - none" in summary["differences"]
    text = (out / "summary.md").read_text()
    assert "## Held-out tier `hard` (2 prompts x 2 samples)" in text and "on tier `hard`" in text
    assert "## Time to target (tier `hard` gap_closed >= 0.5)" in text
    assert (out / "curves_hard.png").stat().st_size > 0 and "![held-out tier hard curves](curves_hard.png)" in text
    # the rewrite outcomes: every sample of a rewrite prompt is a copy, a reduction or wrong (a random
    # model writes no circuit: all wrong), per evaluated step, in the table and a figure
    for r in rows:
        if r["split"] == "hard":
            assert float(r["rewrite_wrong_rate"]) == 1 - float(r["rewrite_correct_rate"]) == 1.0
            assert float(r["rewrite_copy_rate"]) == float(r["rewrite_reduction_rate"]) == 0.0
    assert "## Rewrite outcomes per evaluated step" in text and (out / "rewrites.png").stat().st_size > 0


def test_rewrite_outcomes_from_scored_samples():
    """Copy, reduction and wrong among rewrite samples only, against hand-made records."""
    from rubriq.studies.evaluate import held_out_metrics

    spec = json.dumps({"algorithm": "circuit", "qasm": "OPENQASM 2.0;\nqreg q[1];\nt q[0];\nh q[0];\nt q[0];\n"})
    ok = {"parsed": True, "average_fidelity": 1.0, "reward": 0.8, "error_type": None, "scores": {}}

    def rec(text, t, fidelity=1.0, target=spec, t0=2):
        return {
            "prompt_id": "p",
            "target": target,
            "t0": t0,
            "text": text,
            "result": dict(ok, t_count=t, average_fidelity=fidelity),
        }

    records = [
        rec("qreg q[1];\nt q[0];\nh q[0];\nt q[0];", 2),  # the input verbatim: a copy
        rec("qreg q[1];\nh q[0];\nt q[0];\nt q[0];", 2),  # correct, same T, not verbatim: none of the three
        rec("qreg q[1];\nt q[0];\nh q[0];\nt q[0];\ns q[0];", 1),  # fewer T (as scored): a reduction
        rec("qreg q[1];", 0, fidelity=0.5),  # wrong
        rec("garbage", 0, fidelity=0.5, target=json.dumps({"algorithm": "ghz", "num_qubits": 2})),  # not a rewrite
    ]
    m = held_out_metrics(records, k=2, eps=0.01)
    assert (m["rewrite_copy_rate"], m["rewrite_reduction_rate"], m["rewrite_wrong_rate"]) == (0.25, 0.25, 0.25)
    assert m["rewrite_correct_rate"] == 0.75 and m["synthesis_correct_rate"] == 0.0
    only_synthesis = held_out_metrics(records[-1:], k=2, eps=0.01)
    assert only_synthesis["rewrite_copy_rate"] is None and only_synthesis["rewrite_wrong_rate"] is None


def test_the_committed_learning_study_gets_its_rewrite_outcomes_from_its_records(tmp_path):
    """The learning study ran before the rewrite outcomes were measured: its summary gets them from
    the committed scored samples. At step 0 (288 held-out rewrite samples per seed) the warm-start
    reduced T correctly on 2, 3 and 4 samples of seeds 0, 1, 2, and the rest of the wrong rate is
    what the committed correct rate leaves."""
    import shutil

    from rubriq.studies.aggregate import collect
    from rubriq.studies.settings import StudySettings

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "learning"
    shutil.copytree(root / "results" / "studies" / "learning", out, ignore=shutil.ignore_patterns("*.png"))
    study = StudySettings.from_yaml(root / "configs" / "studies" / "learning_cpu.yaml")
    rows = [r for r in collect(out, study) if r["split"] == "test"]
    at0 = {r["seed"]: r for r in rows if r["arm"] == "rubric" and r["step"] == 0}
    assert [round(at0[s]["rewrite_reduction_rate"] * 288) for s in (0, 1, 2)] == [2, 3, 4]
    for r in rows:
        assert r["rewrite_wrong_rate"] == pytest.approx(1 - r["rewrite_correct_rate"])
        assert 0 <= r["rewrite_copy_rate"] <= r["rewrite_correct_rate"]
    # the control's later steps are its step 0, samples and all
    none = {(r["seed"], r["step"]): r["rewrite_copy_rate"] for r in rows if r["arm"] == "none"}
    assert all(none[(s, step)] == none[(s, 0)] for s, step in none)
    final = [r["rewrite_copy_rate"] for r in rows if r["arm"] != "none" and r["step"] == 100]
    assert len(final) == 12 and min(final) > 0.7  # every trained arm-seed ends copying (docs/studies.md)


def test_aggregate_judges_the_primary_tier_and_reports_every_tier():
    """Time-to-target and the paired differences on the primary tier; the held-out split's
    differences beside it; per-tier means with intervals, by hand."""
    from rubriq.studies.aggregate import aggregate
    from rubriq.studies.settings import ArmSettings, StudySettings, TierSettings

    study = StudySettings(
        train_config="x.yaml",
        arms={"rubric": ArmSettings(), "none": ArmSettings(reward="none")},
        seeds=(0, 1),
        steps=10,
        eval_every=10,
        eval_tiers={"hard": TierSettings(build={"breadth": []})},
        primary_tier="hard",
        target_value=0.5,
    )
    rows = []
    for arm, seed, step, split, correct in [
        ("rubric", 0, 0, "test", 0.1),
        ("rubric", 0, 10, "test", 0.9),
        ("rubric", 0, 0, "hard", 0.0),
        ("rubric", 0, 10, "hard", 0.2),
        ("rubric", 1, 0, "test", 0.1),
        ("rubric", 1, 10, "test", 0.7),
        ("rubric", 1, 0, "hard", 0.0),
        ("rubric", 1, 10, "hard", 0.6),
        ("none", 0, 0, "test", 0.1),
        ("none", 0, 10, "test", 0.1),
        ("none", 0, 0, "hard", 0.0),
        ("none", 0, 10, "hard", 0.0),
        ("none", 1, 0, "test", 0.1),
        ("none", 1, 10, "test", 0.1),
        ("none", 1, 0, "hard", 0.0),
        ("none", 1, 10, "hard", 0.0),
    ]:
        rows.append(
            {
                "arm": arm,
                "seed": seed,
                "step": step,
                "split": split,
                "correct_rate": correct,
                "simulations": 4 * step,
                "arm_seconds": 1.0,
                "train/reward": 0.1,
            }
        )
    agg = aggregate(rows, study)
    rubric = agg["arms"]["rubric"]
    assert rubric["per_step"][10]["correct_rate"][0] == pytest.approx(0.8)
    assert rubric["tier_per_step"]["hard"][10]["correct_rate"][0] == pytest.approx(0.4)
    # t(0.975, 1) = 12.7062 x stdev(0.2, 0.6) = 0.28284 / sqrt(2)
    m, lo, hi = rubric["tier_per_step"]["hard"][10]["correct_rate"]
    assert hi - m == pytest.approx(12.7062 * 0.28284 / math.sqrt(2), rel=1e-4)
    assert rubric["time_to_target"] == [None, 10]  # on hard: seed 0 reaches 0.2, seed 1 0.6 (held-out: both)
    assert agg["differences"]["rubric - none"]["correct_rate"][0] == pytest.approx(0.4)  # hard
    assert agg["tier_differences"]["test"]["rubric - none"]["correct_rate"][0] == pytest.approx(0.7)


def test_an_arm_rubric_override_merges_into_nested_sections():
    """``rubric: {fidelity: {correct_threshold: 0.95}}`` changes that field of the training
    config's rubric and keeps its other fidelity settings, weights and sections."""
    from rubriq.studies.arms import arm_training_settings
    from rubriq.studies.settings import ArmSettings
    from rubriq.training.config import TrainSettings

    settings = TrainSettings.from_dict(
        {"rubric": {"fidelity": {"samples": 8, "metric": "average"}, "weights": {"fidelity": 0.5, "clifford": 0.1}}}
    )
    arm = ArmSettings(rubric={"fidelity": {"correct_threshold": 0.95}, "tcount": {"alpha": 0.1}})
    cfg = arm_training_settings(settings, arm, seed=1, steps=3, arm_dir=Path("/nowhere")).rubric
    assert (cfg.fidelity.correct_threshold, cfg.fidelity.samples, cfg.fidelity.metric) == (0.95, 8, "average")
    assert cfg.tcount.alpha == 0.1 and cfg.tcount.epsilon == settings.rubric.tcount.epsilon
    assert cfg.weights == settings.rubric.weights and cfg.hardware == settings.rubric.hardware
    assert settings.rubric.fidelity.correct_threshold == 0.99  # the training config's own rubric is untouched
    assert ArmSettings().rubric_config(settings.rubric) is settings.rubric


def test_a_held_out_tier_from_a_dataset_folder_must_share_no_training_target(tmp_path):
    from rubriq.config import ConfigError
    from rubriq.data.prompts import save_splits
    from rubriq.studies.data import tier_rows
    from rubriq.studies.settings import ArmSettings, StudySettings, TierSettings

    train = [{"id": f"t{i}", "target": f'{{"algorithm": "ghz", "num_qubits": {i}}}'} for i in (2, 3)]
    other = [{"id": f"o{i}", "target": f'{{"algorithm": "ghz", "num_qubits": {i}}}'} for i in (4, 5, 6)]
    save_splits({"test": other}, tmp_path / "clean")
    save_splits({"test": other[:1], "validation": train[1:]}, tmp_path / "leaky")
    tiers = {
        "wide": TierSettings(dataset=str(tmp_path / "clean")),
        "leak": TierSettings(dataset=str(tmp_path / "leaky"), split="validation"),
        "none": TierSettings(dataset=str(tmp_path / "clean"), split="nope"),
    }
    study = StudySettings(train_config="x.yaml", arms={"rubric": ArmSettings()}, eval_tiers=tiers, max_prompts=2)
    out = tmp_path / "out"
    assert [r["id"] for r in tier_rows(study, "wide", None, out, train)] == ["o4", "o5"]  # max_prompts
    assert len((out / "tiers" / "wide" / "test.jsonl").read_text().splitlines()) == 3  # the whole tier kept
    with pytest.raises(ConfigError, match="1 of its targets are training targets"):
        tier_rows(study, "leak", None, out, train)
    assert not (out / "tiers" / "leak").exists()  # nothing half-written left for the next run
    with pytest.raises(ConfigError, match="eval tier 'none'.*no split 'nope'"):
        tier_rows(study, "none", None, out, train)


def test_bad_study_v2_settings_are_clear_errors_before_anything_trains(tmp_path):
    from rubriq.cli import app

    config = _configs(tmp_path, {"rubric": {"reward": "rubric"}, "none": {"reward": "none"}})
    base = yaml.safe_load(config.read_text())

    def run(**changes):
        config.write_text(yaml.safe_dump({**base, **changes}))
        return CliRunner().invoke(app, ["study", "convergence", str(config)])

    result = run(warm_start_model="no/such/model")
    assert result.exit_code == 2 and "warm_start_model" in result.output and "no such folder" in result.output
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    result = run(warm_start_model="half")
    assert result.exit_code == 2 and "safetensors" in result.output and "tokenizer" in result.output, result.output
    result = run(arms={"relative": {"reward": "rubric", "rubric": {"tcount": {"relatve": True}}}})
    assert result.exit_code == 2 and "arm 'relative'" in result.output and "unknown key" in result.output
    assert not (tmp_path / "out" / "sft").exists()  # stopped before the warm-start
    result = run(eval_tiers={"test": {"split": "validation"}})
    assert result.exit_code == 2 and "not 'test'" in result.output
    result = run(eval_tiers={"hard": {"build": {"breadth": []}, "dataset": "x"}})
    assert result.exit_code == 2 and "not both" in result.output
    result = run(primary_tier="hard")
    assert result.exit_code == 2 and "primary_tier" in result.output


def test_the_rewriting_study_config_is_its_preregistration(tmp_path):
    """configs/studies/rewriting_cpu.yaml is the design docs/studies.md pre-registered, with the
    deviations recorded there before any arm ran: six arms from the committed warm-start, 3 seeds,
    100 steps, the held-out split at 0, 50 and 100 with 8 samples and the same seed at every step,
    the harder tier at 0 and 100, gap_closed as primary; its `rubric_relative` arm is the paper's
    rubric with only the T dimension relative, which pays a copy of a rewrite input no T credit (the
    absolute arm does), and `rubric_relative_correct` differs from it only by the correctness gate."""
    from rubriq.evaluator import RubriQEvaluator
    from rubriq.studies.arms import arm_training_settings
    from rubriq.studies.settings import StudySettings
    from rubriq.training.config import TrainSettings

    root = Path(__file__).resolve().parents[1] / "configs" / "studies"
    study = StudySettings.from_yaml(root / "rewriting_cpu.yaml")
    rewards = {name: arm.reward for name, arm in study.arms.items()}
    assert rewards == {
        "rubric": "rubric",
        "rubric_relative": "rubric",
        "rubric_relative_correct": "rubric",
        "sparse": "sparse_inverse_t",
        "binary": "sparse_correct",
        "none": "none",
    }
    assert study.seeds == (0, 1, 2) and study.steps == 100 and study.eval_steps() == [0, 50, 100]
    assert study.sampling.samples == 8 and study.same_eval_seed and study.split == "test"
    assert study.primary_metric == "gap_closed" and study.primary_tier == "test"
    assert study.eval_tiers["hard"].split == "hard" and study.tier_steps("hard") == [0, 100]
    assert study.train_eval_prompts == 8 and study.results_dir == "results/studies/rewriting/grpo"
    assert Path(study.warm_start_model) == (root / "../../results/studies/rewriting/warm_start").resolve()
    settings = TrainSettings.from_yaml(root / study.train_config)
    assert {"hard", "sft", "validation"} <= set(settings.data.build["extra_splits"])
    # the pilots choose settings on the validation split; the study trains with the chosen pilot's
    # (pilot 5, by the rule in results/studies/rewriting/pilot/README.md): the pre-registered
    # training config with GRPO's learning rate 3e-4 and a KL term beta 0.04, nothing else changed
    pilot = StudySettings.from_yaml(root / "rewriting_pilot_lr3e-4_kl.yaml")
    assert pilot.split == "validation" and pilot.train_config == study.train_config and not pilot.eval_tiers
    assert pilot.warm_start_model == study.warm_start_model and pilot.same_eval_seed
    registered = TrainSettings.from_yaml(root / "rewriting_train.yaml")
    assert (settings.grpo.learning_rate, settings.grpo.beta) == (3.0e-4, 0.04)
    assert (registered.grpo.learning_rate, registered.grpo.beta) == (1.0e-4, 1.0e-6)
    assert dataclasses.replace(settings.grpo, learning_rate=1.0e-4, beta=1.0e-6) == registered.grpo
    assert dataclasses.replace(settings, grpo=registered.grpo, output_dir=registered.output_dir) == registered
    built = {n: arm_training_settings(settings, a, 0, study.steps, tmp_path / n) for n, a in study.arms.items()}
    paper, relative = built["rubric"].rubric, built["rubric_relative"].rubric
    assert paper.tcount.mode == "absolute" and relative.tcount.mode == "relative"
    assert dataclasses.replace(relative, tcount=paper.tcount) == paper  # nothing else differs
    qasm = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0];\nt q[0];\ncx q[0],q[1];\nt q[0];\ntdg q[0];\n'
    copy = [RubriQEvaluator(target_algorithm="circuit", qasm=qasm, config=c).evaluate(qasm) for c in (paper, relative)]
    assert copy[0].scores["tcount"] == pytest.approx(math.exp(-0.05 * 3)) and copy[1].scores["tcount"] == 0.0
    gated = built["rubric_relative_correct"].rubric
    assert gated.fidelity_gating == "correct" and dataclasses.replace(gated, fidelity_gating="none") == relative


# -- the rewriting study's machinery: an adapter warm-start, units kept and restored, group logs ----
@pytest.fixture(scope="module")
def units_run(tmp_path_factory):
    """Two arms x 1 seed x 2 steps from a LoRA adapter warm-start, the same evaluation seed at
    every step, a tier evaluated at the last step only, its units kept in a results folder."""
    import os

    os.environ.setdefault("RUBRIQ_CACHE", str(tmp_path_factory.mktemp("cache")))
    tmp = tmp_path_factory.mktemp("units")
    tiny_adapter(tmp / "models" / "adapter")
    train = tiny_training(LEARNING, sft={"enabled": False}, grpo=TINY_GRPO)
    (tmp / "train.yaml").write_text(yaml.safe_dump(train))
    study = {
        "train_config": "train.yaml",
        "output_dir": str(tmp / "out"),
        "results_dir": str(tmp / "kept"),
        "warm_start_model": "models/adapter",
        "arms": {
            "rubric_relative_correct": {
                "reward": "rubric",
                "rubric": {"tcount": {"mode": "relative"}, "fidelity_gating": "correct"},
            },
            "binary": {"reward": "sparse_correct"},
        },
        "seeds": [0],
        "steps": 2,
        "eval_at": [1],
        "samples": 2,
        "batch_size": 8,
        "same_eval_seed": True,
        "eval_tiers": {"hard": {"build": HARD_TIER, "steps": [2]}},
    }
    (tmp / "study.yaml").write_text(yaml.safe_dump(study))
    result = CliRunner().invoke(app_cli(), ["study", "convergence", str(tmp / "study.yaml")])
    assert result.exit_code == 0, result.output
    return tmp


def app_cli():
    from rubriq.cli import app

    return app


def test_an_adapter_warm_start_is_merged_once_and_fingerprinted(units_run):
    """The adapter's weights merged into its base (PEFT's merge_and_unload) are the warm-start:
    recomputed here by hand, W + (alpha / r) B A for each adapted matrix."""
    import torch
    from safetensors.torch import load_file

    out = units_run / "out"
    merged = load_file(str(out / "sft" / "model" / "model.safetensors"))
    base = load_file(str(units_run / "models" / "base" / "model.safetensors"))
    adapter = load_file(str(units_run / "models" / "adapter" / "adapter_model.safetensors"))
    changed = 0
    for key, w in base.items():
        stem = key.removesuffix(".weight")
        a = next((v for k, v in adapter.items() if k.endswith(f"{stem}.lora_A.weight")), None)
        expected = (
            w if a is None else w + 2.0 * adapter[next(k for k in adapter if k.endswith(f"{stem}.lora_B.weight"))] @ a
        )
        changed += a is not None
        assert torch.allclose(merged[key], expected, atol=1e-6), key
    assert changed == 4  # q_proj and v_proj of 2 layers
    fingerprint = json.loads((out / "sft" / "fingerprint.json").read_text())
    marker = json.loads((out / "sft" / "model" / "merged_from.json").read_text())
    assert fingerprint["merged_from"] == marker and marker["adapter"] == str(
        (units_run / "models" / "adapter").resolve()
    )
    done = json.loads((out / "arms" / "binary" / "seed0" / "done.json").read_text())
    assert done["warm_start_sha256"] == fingerprint["sha256"]


def test_units_are_kept_restored_and_skipped(units_run, tmp_path):
    """Every finished arm-seed is copied to results_dir with the seed's step-0 evaluation; a run in
    a new output folder with only that folder restores both units and trains nothing."""
    from rubriq.studies import convergence

    kept = units_run / "kept"
    for arm in ("rubric_relative_correct", "binary"):
        unit = kept / "arms" / arm / "seed0"
        assert {"done.json", "evals.jsonl", "metrics.jsonl", "groups.jsonl", "adapter.json"} <= {
            p.name for p in unit.iterdir()
        }
        fingerprint = json.loads((unit / "adapter.json").read_text())
        final = units_run / "out" / "arms" / arm / "seed0" / "final"
        import hashlib

        assert (
            fingerprint["adapter_model.safetensors"]
            == hashlib.sha256((final / "adapter_model.safetensors").read_bytes()).hexdigest()
        )
        assert not list(unit.glob("*.safetensors"))  # no weights kept
    assert (kept / "step0" / "seed0.json").is_file() and (kept / "summary.md").is_file()
    # a new machine: another output folder, the kept units only
    yaml_path = units_run / "study.yaml"
    study = yaml.safe_load(yaml_path.read_text())
    study["output_dir"] = str(tmp_path / "fresh")
    fresh_yaml = units_run / "fresh.yaml"
    fresh_yaml.write_text(yaml.safe_dump(study))
    before = {p: p.stat().st_mtime_ns for p in kept.rglob("*.jsonl")}
    convergence.run(fresh_yaml)
    for arm in ("rubric_relative_correct", "binary"):
        assert (tmp_path / "fresh" / "arms" / arm / "seed0" / "done.json").read_text() == (
            kept / "arms" / arm / "seed0" / "done.json"
        ).read_text()
        assert not (tmp_path / "fresh" / "arms" / arm / "seed0" / "final").exists()  # not retrained
    assert {p: p.stat().st_mtime_ns for p in kept.rglob("*.jsonl")} == before
    assert (tmp_path / "fresh" / "summary.md").read_text() == (kept / "summary.md").read_text()


def test_a_units_weights_are_kept_on_the_warm_start_adapter_and_load_as_trained(units_run, tmp_path):
    """`rubriq study weights`: the kept adapter names the warm-start *adapter* as its base, so
    loading it (the chain merged) gives the model the arm trained (its final adapter on the merged
    warm-start, out/sft/model), parameter for parameter; SHA256SUMS holds every file's hash, and
    the weights are the ones the unit's adapter.json fingerprints."""
    import hashlib
    import os
    import shutil

    import torch

    from rubriq.models import load_model

    result = CliRunner().invoke(
        app_cli(), ["study", "weights", str(units_run / "study.yaml"), "--arm", "binary", "--seed", "0"]
    )
    assert result.exit_code == 0, result.output
    kept = units_run / "kept" / "weights" / "binary_seed0"
    config = json.loads((kept / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == os.path.relpath(units_run / "models" / "adapter", kept)
    from rubriq.data.prompts import prompt_style_of_rows
    from rubriq.evaluation.evaluate import prompt_style_of

    train_rows = [json.loads(x) for x in (units_run / "kept" / "data" / "train.jsonl").read_text().splitlines()]
    info = json.loads((kept / "rubriq_policy.json").read_text())
    assert (
        prompt_style_of(str(kept)) == prompt_style_of_rows(train_rows)
        and info["adapter_base"] == config["base_model_name_or_path"]
    )
    assert info["algorithm"] == "grpo" and info["reward"] == "sparse_correct"
    sums = dict(line.split("  ")[::-1] for line in (kept / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file() and p.name != "SHA256SUMS"}
    for name, digest in sums.items():
        assert hashlib.sha256((kept / name).read_bytes()).hexdigest() == digest
    unit = json.loads((units_run / "kept" / "arms" / "binary" / "seed0" / "adapter.json").read_text())
    assert sums["adapter_model.safetensors"] == unit["adapter_model.safetensors"]
    # the model card: front matter and sections of every committed adapter, its held-out
    # correct-reduction rate at the last step recomputed here from the kept records by hand
    card = (kept / "README.md").read_text()
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["library_name"] == "peft" and meta["base_model"]
    for heading in ("## Training data and recipe", "## Evaluation", "## Intended use and limits", "## How to load"):
        assert heading in card
    records = [
        json.loads(x)
        for x in (units_run / "kept" / "arms" / "binary" / "seed0" / "records_step2.jsonl").read_text().splitlines()
    ]
    by_prompt: dict = {}
    for r in records:
        res = r["result"]
        ok = bool(res.get("parsed")) and (res.get("average_fidelity") or 0) >= 0.99 and res.get("t_count") is not None
        by_prompt.setdefault(r["prompt_id"], []).append(ok and res["t_count"] < r["t0"])
    by_hand = sum(sum(v) / len(v) for v in by_prompt.values()) / len(by_prompt)
    value = next(
        m["value"] for m in meta["model-index"][0]["results"][0]["metrics"] if m["type"] == "correct_reduction_rate"
    )
    assert value == round(by_hand, 3)
    moved = tmp_path / "elsewhere"  # the kept folder and the warm-start moved together still load
    shutil.copytree(units_run / "models", moved / "models")
    shutil.copytree(kept, moved / "kept" / "weights" / "binary_seed0")
    trained = load_model(str(units_run / "out" / "arms" / "binary" / "seed0" / "final")).state_dict()
    for folder in (kept, moved / "kept" / "weights" / "binary_seed0"):
        loaded = load_model(str(folder)).state_dict()
        assert trained.keys() == loaded.keys()
        assert all(torch.allclose(trained[k], loaded[k], atol=1e-6) for k in trained)
    # other weights under the unit's name are refused, not kept
    final = units_run / "out" / "arms" / "rubric_relative_correct" / "seed0" / "final"
    backup = (final / "adapter_model.safetensors").read_bytes()
    try:
        (final / "adapter_model.safetensors").write_bytes(backup[:-8] + bytes(b ^ 0xFF for b in backup[-8:]))
        bad = CliRunner().invoke(
            app_cli(),
            ["study", "weights", str(units_run / "study.yaml"), "--arm", "rubric_relative_correct"],
        )
        assert bad.exit_code != 0 and "not the ones" in " ".join(bad.output.split())
        assert not (units_run / "kept" / "weights" / "rubric_relative_correct_seed0").exists()
    finally:
        (final / "adapter_model.safetensors").write_bytes(backup)
    missing = CliRunner().invoke(app_cli(), ["study", "weights", str(units_run / "study.yaml"), "--arm", "sparse"])
    assert missing.exit_code != 0 and "no finished arm-seed" in " ".join(missing.output.split())


def test_same_eval_seed_and_tier_steps(units_run):
    """With same_eval_seed every step samples with step 0's seed; the tier is evaluated at 0 and
    its one step (2) only, the held-out split at every evaluated step."""
    out = units_run / "out"
    evals = [json.loads(x) for x in (out / "arms" / "binary" / "seed0" / "evals.jsonl").read_text().splitlines()]
    assert sorted((e["split"], e["step"]) for e in evals) == [
        ("hard", 0),
        ("hard", 2),
        ("test", 0),
        ("test", 1),
        ("test", 2),
    ]
    # the tiny policy barely moves in 2 steps at lr 1e-4... the samples at step 1 are drawn with the
    # same random numbers as step 0's: where the policy's tokens are the same, so are the texts
    step0 = [json.loads(x) for x in (out / "step0" / "records_seed0.jsonl").read_text().splitlines()]
    step1 = [
        json.loads(x) for x in (out / "arms" / "binary" / "seed0" / "records_step1.jsonl").read_text().splitlines()
    ]
    assert [r["prompt_id"] for r in step0] == [r["prompt_id"] for r in step1]


def test_group_logs_of_every_training_step(units_run):
    """groups.jsonl has a row per step; train_scores.jsonl every completion's outcome, the arm's own
    reward and the advantage, which sum to 0 within each group (the advantages' definition)."""
    unit = units_run / "out" / "arms" / "rubric_relative_correct" / "seed0"
    groups = [json.loads(x) for x in (unit / "groups.jsonl").read_text().splitlines()]
    assert [g["step"] for g in groups] == [1, 2] and all(g["groups"] == 2 for g in groups)
    scores = [json.loads(x) for x in (unit / "train_scores.jsonl").read_text().splitlines()]
    assert len(scores) == 8 and all("advantage" not in s or True for s in scores)
    for s in scores:
        assert s["train_reward"] == pytest.approx(s["reward"])  # a rubric arm trains on R itself
        if s["family"] == "rewrite":
            assert s["outcome"] in ("reduction", "copy", "wrong", "other_correct")
    text = (units_run / "out" / "summary.md").read_text()
    assert "## What GRPO's groups held during training" in text and "| rubric_relative_correct seed 0 | 1-2 |" in text
    assert "## Correct reductions (correct with T < T0) per evaluated step" in text
    binary = [
        json.loads(x)
        for x in (units_run / "out" / "arms" / "binary" / "seed0" / "train_scores.jsonl").read_text().splitlines()
    ]
    assert all(s["train_reward"] == (1.0 if s["correct"] else 0.0) for s in binary)


def test_a_kept_warm_start_fingerprint_is_rewritten_only_for_other_weights(tmp_path):
    """Publishing a unit keeps the committed ``sft/fingerprint.json`` while it names the same
    weights (another checkout's path and time stamp do not rewrite it, so units landed from two
    checkouts do not conflict), and replaces it when the weights differ."""
    from types import SimpleNamespace

    from rubriq.studies.units import publish

    out, kept = tmp_path / "out", tmp_path / "kept"
    record = {
        "sha256": "a" * 64,
        "trained_on": None,
        "written": "2026-12-06T10:00:00+0000",
        "merged_from": {"adapter": "/checkout/one/warm_start", "sha256": "b" * 64},
    }
    for seed in (0, 1):
        unit = out / "arms" / "binary" / f"seed{seed}"
        unit.mkdir(parents=True)
        (unit / "done.json").write_text("{}")
    (out / "sft").mkdir(parents=True)
    (out / "sft" / "fingerprint.json").write_text(json.dumps(record))
    publish(out, kept, SimpleNamespace(split="test"), "binary", 0)
    first = (kept / "sft" / "fingerprint.json").read_text()
    assert json.loads(first) == record
    other_checkout = {
        **record,
        "written": "2026-12-07T10:00:00+0000",
        "merged_from": {**record["merged_from"], "adapter": "/two"},
    }
    (out / "sft" / "fingerprint.json").write_text(json.dumps(other_checkout))
    publish(out, kept, SimpleNamespace(split="test"), "binary", 1)
    assert (kept / "sft" / "fingerprint.json").read_text() == first
    rebuilt = {**other_checkout, "sha256": "c" * 64}
    (out / "sft" / "fingerprint.json").write_text(json.dumps(rebuilt))
    publish(out, kept, SimpleNamespace(split="test"), "binary", 1)
    assert json.loads((kept / "sft" / "fingerprint.json").read_text()) == rebuilt
