"""rubriq evaluate / report / synthesize on real (tiny) runs and hand-made outputs."""

import json

import pytest
import yaml

from tests.tiny import TINY_GRPO, tiny_build, tiny_training

pytest.importorskip("trl")

SMALL = tiny_build(fractions=[0.0, 0.5])


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A 2-step tiny GRPO run and its dataset (shared by the tests of this module)."""
    import os

    root = tmp_path_factory.mktemp("evalrep")
    os.environ.setdefault("RUBRIQ_CACHE", str(root / "cache"))
    from rubriq.training.train_rubriq import main

    config = tiny_training(
        output_dir=str(root / "run_sens_tcount_plus005"),
        data={"dataset": str(root / "data"), "build": SMALL},
        grpo={**TINY_GRPO, "num_generations": 4, "max_steps": 2, "logging_steps": 1, "save_strategy": "no"},
    )
    (root / "train.yaml").write_text(yaml.safe_dump(config))
    assert main(["--rubriq_config", str(root / "train.yaml")]) == 0
    return root


def reference_records(folder):
    """Hand-made evaluation: each test prompt answered by its reference, and once by garbage."""
    from rubriq.data.prompts import load_split
    from rubriq.evaluation.records import Record
    from rubriq.evaluation.sampling import save_records, score
    from rubriq.training.sft import reference_completion

    rows = load_split(folder / "data", "train") + load_split(folder / "data", "test")
    assert any(r["t0"] > 0 for r in rows)  # the QFT-2 (T0 = 3): the scatter needs T0 > 0
    records = []
    for r in rows:
        for k, text in enumerate((reference_completion(r), "no circuit")):
            records.append(
                Record(
                    prompt_id=r["id"],
                    text=text,
                    target=r["target"],
                    family=r["family"],
                    format=r["format"],
                    bucket=r["bucket"],
                    t0=r["t0"],
                    sample=k,
                )
            )
    records = score(records)
    save_records(records, folder / "handmade" / "records.jsonl")
    return records


def test_evaluate_with_the_tiny_model_writes_records_and_summaries(workspace, tmp_path):
    from rubriq.evaluation.evaluate import EvalRequest, run_evaluation
    from rubriq.evaluation.sampling import load_records
    from rubriq.models.sampling import SamplingSpec

    spec = SamplingSpec(samples=2, temperature=1.0, top_p=0.95, max_new_tokens=8)
    req = EvalRequest(model="tiny", dataset=str(workspace / "data"), split="test", sampling=spec)
    summary = run_evaluation(req, tmp_path / "eval")
    records = load_records(tmp_path / "eval" / "records.jsonl")
    n_rows = len([x for x in (workspace / "data" / "test.jsonl").read_text().splitlines() if x.strip()])
    assert len(records) == 2 * n_rows and summary["overall"]["completions"] == 2 * n_rows
    assert summary["overall"]["parse_rate"] == 0.0 and summary["overall"]["pass@1"] == 0.0  # random weights
    assert set(summary["by_family"]) <= {"qft", "encoding"} and "by_bucket" in summary


def test_report_from_a_training_run_and_an_evaluation(workspace, tmp_path):
    import shutil

    from rubriq.evaluation.report import write_report

    records = reference_records(workspace)
    assert sum(r["result"]["parsed"] for r in records) == len(records) // 2
    # a second variant: the same real run under another name, so the variant bars have two bars
    shutil.copytree(workspace / "run_sens_tcount_plus005", tmp_path / "run_no_w_T")
    md, page = write_report(
        [workspace / "run_sens_tcount_plus005", tmp_path / "run_no_w_T", workspace / "handmade"],
        tmp_path / "rep",
        key="reward",
        threshold=-1.0,
    )
    text = md.read_text()
    assert "Training runs" in text and "Weight sensitivity" in text and "Evaluations" in text
    assert "| handmade | " in text and "| 0.50 |" in text  # half of the hand-made completions are correct
    assert "residual error by T0 bucket" in text
    pngs = sorted(p.name for p in (tmp_path / "rep").glob("*.png"))
    assert any(p.startswith("curves_") for p in pngs) and any(p.startswith("scatter_") for p in pngs)
    import re

    assert "variants.png" in pngs
    assert re.search(r"\| 1( \(epoch [0-9.]+\))? \|", text)  # threshold -1: the target is reached at step 1
    html = page.read_text()
    assert html.count("data:image/png;base64,") == len(pngs) and "<table>" in html
    run_info = json.loads((workspace / "run_sens_tcount_plus005" / "run_info.json").read_text())
    assert run_info["devices"] == 1 and "device-hours" in text
    with pytest.raises(ValueError, match="no training run"):
        write_report([tmp_path / "empty"], tmp_path / "rep2")


def test_phase_bars_plot(tmp_path):
    from rubriq.evaluation.plots import phase_bars

    png = phase_bars(
        {
            "before SFT": {"parse_rate": 0.0, "correct_rate": 0.0, "mean_reward": 0.0},
            "after SFT": {"parse_rate": 0.9, "correct_rate": 0.4, "mean_reward": 0.54},
        },
        tmp_path / "p.png",
    )
    assert png.stat().st_size > 5_000


def test_synthesize_understands_specs_and_says_what_it_understands():
    from rubriq.evaluation.synthesize import SpecNotUnderstood, target_from_text

    t = target_from_text("Synthesize a 4-qubit QFT circuit with few T gates, in OpenQASM 2.0")
    assert (t.name, t.num_qubits) == ("qft", 4)
    assert target_from_text("an inverse quantum Fourier transform on 3 qubits").spec()["inverse"] is True
    assert target_from_text("2-qubit Heisenberg evolution for time t=0.5").spec()["t"] == 0.5
    with pytest.raises(SpecNotUnderstood, match="QFT"):
        target_from_text("make me a sandwich")


def test_synthesize_cli_with_the_tiny_model(workspace):
    from typer.testing import CliRunner

    from rubriq.cli import app

    res = CliRunner().invoke(
        app, ["synthesize", "Synthesize a 2-qubit QFT circuit", "--model", "tiny", "-n", "2", "--max-new-tokens", "8"]
    )
    assert res.exit_code == 1 and "no functionally correct circuit among 2 candidates" in res.output
    res = CliRunner().invoke(app, ["synthesize", "a poem about qubits"])
    assert res.exit_code == 2 and "understand" in res.output


def test_verified_post_pass_keeps_only_better_equivalent_circuits():
    from qiskit import QuantumCircuit

    from rubriq.evaluation.synthesize import post_pass
    from rubriq.evaluator import RubriQEvaluator

    ev = RubriQEvaluator(target_algorithm="qft", num_qubits=2)
    wasteful = QuantumCircuit(2)
    wasteful.h(1)
    wasteful.cp(3.141592653589793 / 2, 1, 0)
    wasteful.t(0)
    wasteful.tdg(0)  # two T gates that cancel
    wasteful.h(0)
    wasteful.swap(0, 1)
    base = ev.evaluate_circuit(wasteful)
    better = post_pass(wasteful, ev)
    assert better is not None and better.result["average_fidelity"] > 0.99
    assert better.result["t_count"] < base.t_count


def test_records_carry_their_dataset_so_by_dataset_separates_rewrite_from_synthesis():
    """Before, every record fell under by_dataset["synthesis"]: records never carried a dataset."""
    from qiskit import QuantumCircuit

    from rubriq.data.prompts import PromptSpec, rewrite_rows, synthesis_rows
    from rubriq.evaluation.evaluate import load_policy, summaries
    from rubriq.evaluation.sampling import generate
    from rubriq.suites import SuiteCircuit

    qc = QuantumCircuit(2)
    qc.h(0)
    qc.t(0)
    qc.cx(0, 1)
    rows = synthesis_rows(
        PromptSpec(qft_sizes=(2,), qpe_sizes=(), hamiltonian_sizes=(), encoding_sizes=(), formats=("qasm2",))
    )
    rows += rewrite_rows([SuiteCircuit("tcount", "tiny", qc, 1, "hand-made")])
    tokenizer, model = load_policy("tiny")
    records = generate(model, tokenizer, rows, max_new_tokens=2, progress=False)
    assert [r.dataset for r in records] == ["synthesis", "rewrite-tcount"]
    scored = [r.scored({"parsed": False, "error_type": "parse", "reward": 0.0, "scores": {}}) for r in records]
    assert set(summaries(scored)["by_dataset"]) == {"synthesis", "rewrite-tcount"}


def test_the_post_pass_keeps_only_rewrites_verified_equivalent_to_the_sampled_circuit(monkeypatch):
    """A compiler rewrite within the correctness threshold of the target but not equal to the
    sampled circuit (here it drops a 0.002 rotation) must not be kept as a "verified" rewrite;
    an exact one is kept with its verdict."""

    import rubriq.baselines.compilers as compilers
    from rubriq.evaluation.synthesize import post_pass
    from rubriq.evaluator import RubriQEvaluator

    evaluator = RubriQEvaluator(target_algorithm="qft", num_qubits=2)
    reference = evaluator.target.reference_circuit()
    sampled = reference.copy()
    sampled.rz(0.001, 0)
    sampled.rz(0.001, 0)
    near = reference.copy()
    near.rz(0.001, 0)  # one rotation fewer: lower depth and T-count, F_avg ~ 1 - 1e-7, not equivalent
    exact = reference.copy()
    exact.rz(0.002, 0)  # the two rotations merged: equivalent, lower depth
    assert evaluator.evaluate_circuit(near).average_fidelity > 0.999

    for route in ("pyzx_full_reduce", "qiskit_o3"):
        monkeypatch.setattr(compilers, route, lambda c: c)
    monkeypatch.setattr(compilers, "pyzx_teleport", lambda c: near)
    assert post_pass(sampled, evaluator) is None
    monkeypatch.setattr(compilers, "pyzx_teleport", lambda c: exact)
    kept = post_pass(sampled, evaluator)
    assert kept is not None and kept.method == "pyzx_teleport" and kept.verdict == "exact"


def test_records_are_typed_and_a_jsonl_round_trip_loses_nothing(tmp_path):
    from rubriq.evaluation.records import Record, ScoredRecord
    from rubriq.evaluation.sampling import load_records, save_records

    line = {"prompt_id": "qft-2-0-qasm2", "text": "x", "t0": 3, "result": {"reward": 0.5}, "temperature": 0.8}
    (tmp_path / "r.jsonl").write_text(json.dumps(line) + "\n" + json.dumps({"prompt_id": "p", "text": "y"}) + "\n")
    scored, plain = load_records(tmp_path / "r.jsonl")
    assert isinstance(scored, ScoredRecord) and scored.result == {"reward": 0.5} and scored.t0 == 3
    assert type(plain) is Record and plain.dataset == "synthesis"  # files from before records carried it
    save_records([scored, plain], tmp_path / "again.jsonl")
    assert json.loads((tmp_path / "again.jsonl").read_text().splitlines()[0])["temperature"] == 0.8
    (tmp_path / "bad.jsonl").write_text(json.dumps({"text": "no id"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl, line 1: a record needs prompt_id"):
        load_records(tmp_path / "bad.jsonl")
