"""Rejection-sampling fine-tuning (``rubriq study rft``, remedy 1 of issue 52): the selection
rule against hand-written rewrites scored by the rubric (and checked by Qiskit's Operator), the
whole command end to end on a tiny random warm-start adapter with a planted correct reduction,
resuming a stopped pool, common random numbers between the two evaluations, the shipped
configs, and bad settings named in the error."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.tiny import CPU, TINY_MODEL, tiny_adapter, tiny_build

pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parents[1]
REWRITES = {"qubits": [2], "core_gates": [2, 3], "redundancies": [1, 1], "kinds": ["adjacent"]}
EPS = 0.01  # the rubric's default correct_threshold, 0.99


# -- the selection rule, on circuits written by hand ------------------------------------------------
INPUT = "OPENQASM 2.0;\ninclude \"qelib1.inc\";\nqreg q[2];\nh q[0];\nt q[0];\nt q[0];\ncx q[0],q[1];\nt q[1];\ntdg q[1];\nh q[1];\nt q[1];\n"  # fmt: skip
HEADER = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\n'
SAMPLES = {  # sample -> (what it is, its body): T0 = 5
    0: ("reduction, T 3", "h q[0];\ns q[0];\ncx q[0],q[1];\nt q[1];\ntdg q[1];\nh q[1];\nt q[1];\n"),
    1: ("copy", INPUT.removeprefix(HEADER)),
    2: ("broken deletion, T 0", "h q[0];\ncx q[0],q[1];\nh q[1];\n"),
    3: ("reduction, T 1", "h q[0];\ns q[0];\ncx q[0],q[1];\nh q[1];\nt q[1];\n"),
    4: ("the same text again", "h q[0];\ns q[0];\ncx q[0],q[1];\nh q[1];\nt q[1];\n"),
    5: ("reduction, T 1, drawn later", "h q[0];\ncx q[0],q[1];\ns q[0];\nh q[1];\nt q[1];\n"),
    6: ("correct, T 5, reordered", "h q[0];\nt q[0];\nt q[0];\ncx q[0],q[1];\ntdg q[1];\nt q[1];\nh q[1];\nt q[1];\n"),
}


def _fenced(body: str) -> str:
    return f"```qasm\n{HEADER}{body.strip()}\n```"


@pytest.fixture(scope="module")
def scored():
    """The samples above as completions of one rewrite prompt, scored by the rubric."""
    from rubriq.evaluation.records import Record
    from rubriq.evaluation.sampling import score

    row = {
        "id": "p",
        "target": json.dumps({"algorithm": "circuit", "num_qubits": 2, "qasm": INPUT}),
        "t0": 5,
        "format": "qasm2",
        "prompt": [{"role": "user", "content": "Fewer T gates:"}],
    }
    records = [Record.of_row(row, _fenced(body), k) for k, (_, body) in SAMPLES.items()]
    return row, [r.to_json() for r in score(records, progress=False)]


def _t(qasm: str) -> int:
    from qiskit import qasm2

    return sum(n for name, n in qasm2.loads(qasm).count_ops().items() if name in ("t", "tdg"))


def _equivalent(a: str, b: str) -> bool:
    """The same unitary up to global phase, by Qiskit's Operator (not RubriQ's fidelity engine)."""
    from qiskit import qasm2
    from qiskit.quantum_info import Operator

    return Operator(qasm2.loads(a)).equiv(Operator(qasm2.loads(b)))


def test_only_verified_correct_reductions_are_kept_the_fewest_t_first(scored):
    from rubriq.studies.analysis import rewrite_outcome
    from rubriq.studies.rft import select_reductions

    _, records = scored
    outcomes = [rewrite_outcome(r, EPS) for r in records]
    assert outcomes == ["reduction", "copy", "wrong", "reduction", "reduction", "reduction", "other_correct"]
    # the rubric's verdicts agree with Qiskit's Operator, and its T counts with the circuits'
    for (_, body), r in zip(SAMPLES.values(), records, strict=True):
        assert _equivalent(HEADER + body, INPUT) == (outcomes[r["sample"]] != "wrong")
        assert r["result"]["t_count"] == _t(HEADER + body)
    assert _t(HEADER + SAMPLES[2][1]) < 5  # the broken deletion has fewer T, and is dropped
    kept = select_reductions(records, EPS)
    assert [r["sample"] for r in kept] == [3]  # T 1 over T 3; of the two T 1 ones the first drawn
    assert [r["sample"] for r in select_reductions(records, EPS, per_prompt=2)] == [3, 5]  # distinct texts
    assert [r["sample"] for r in select_reductions(records, EPS, per_prompt=9)] == [3, 5, 0]
    assert select_reductions([records[k] for k in (1, 2, 6)], EPS) == []


def test_a_kept_completion_is_trained_on_verbatim(scored):
    from rubriq.studies.rft import RftSettings, build_dataset, trained_answer
    from rubriq.training.sft import sft_dataset

    row, records = scored
    answer = trained_answer(row, records[3]["text"])
    assert answer == (HEADER + SAMPLES[3][1]).strip()
    assert trained_answer(row, "Here it is:\n" + records[3]["text"]) is None  # not one fenced block
    assert trained_answer(row, records[3]["text"] + "\n```qasm\nqreg q[1];\n```") is None
    rft = RftSettings(train_config="t.yaml", warm_start_model="w")
    rows, stats = build_dataset(records, [row], [], rft, EPS)
    assert [r["sft_answers"] for r in rows] == [[answer]] and rows[0]["rft_sample"]["t"] == 1
    assert sft_dataset(rows)[0]["completion"][0]["content"] == records[3]["text"].strip()
    assert (stats["reductions"], stats["prompts_with_reduction"], stats["kept"], stats["t_saved"]) == (4, 1, 1, 4)
    assert stats["outcomes"] == {"reduction": 4, "copy": 1, "other_correct": 1, "wrong": 1}


# -- the command end to end ---------------------------------------------------------------------
def _write_configs(tmp: Path, name: str, **changes) -> Path:
    build = tiny_build(
        qft_sizes=[],
        encoding_sizes=[],
        small_rewrites=[{"count": 8, "seed": 0, **REWRITES}],
        fractions=[0.0, 0.4],
        extra_splits={
            "sft": {
                "count": 7,
                "seed": 2,
                **REWRITES,
                "answers": 1,
                "keep_probability": 0.0,
                "copies": False,
                "optimum": False,
                "target_t_best": False,
            },
            "validation": {"count": 3, "seed": 3, **REWRITES},
        },
    )
    train = {
        "model": TINY_MODEL,
        "data": {"build": build},
        "sft": {
            "enabled": True,
            "split": "sft",
            "lora": True,
            "args": {"per_device_train_batch_size": 2, "learning_rate": 1e-3, "logging_steps": 1, **CPU},
        },
        "grpo": {"max_completion_length": 8, "temperature": 1.0, **CPU},
    }
    (tmp / "train.yaml").write_text(yaml.safe_dump(train))
    rft = {
        "train_config": "train.yaml",
        "warm_start_model": "models/adapter",
        "output_dir": str(tmp / name),
        "results_dir": str(tmp / f"{name}_kept"),
        "samples": 2,
        "chunk_prompts": 3,
        "batch_size": 4,
        "mix_gold": 1,
        "sft_args": {"max_steps": 2},
        "eval_samples": 2,
        **changes,
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(rft))
    return path


def _pool(config: Path) -> list[dict]:
    """The pool's prompts (the dataset built into OUT/data first, as the command builds it)."""
    from rubriq.studies.rft import RftSettings
    from rubriq.studies.sft_curve import training_settings
    from rubriq.training.train_rubriq import load_rows

    rft = RftSettings.from_yaml(config)
    return load_rows(training_settings(rft, Path(rft.output_dir)), rft.pool_split)


def _planting(monkeypatch, pool: list[dict], calls: list[list[str]]) -> dict:
    """A random tiny model writes no circuit: sample 0 of the first pool prompt is replaced by its
    gold answer (the input with every planted redundancy removed: a correct reduction), sample 1
    by the input verbatim (a copy). Every call's prompt ids are appended to ``calls``."""
    from rubriq.evaluation import sampling

    real = sampling.generate
    first = pool[0]
    plant = {
        (first["id"], 0): f"```qasm\n{first['sft_answers'][0].strip()}\n```",
        (first["id"], 1): f"```qasm\n{json.loads(first['target'])['qasm'].strip()}\n```",
    }

    def generate(model, tokenizer, rows, spec=None, **kw):
        calls.append([r["id"] for r in rows])
        records = real(model, tokenizer, rows, spec, **kw)
        return [dataclasses.replace(r, text=plant.get((r.prompt_id, r.sample), r.text)) for r in records]

    monkeypatch.setattr(sampling, "generate", generate)
    return plant


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _pool_records(out: Path) -> list[dict]:
    return [r for p in sorted((out / "rft" / "pool").glob("chunk*.jsonl")) for r in _jsonl(p)]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """``rubriq study rft YAML --commit`` on a tiny adapter warm-start: 7 pool prompts x 2, one
    planted correct reduction and one planted copy, 2 training steps, 3 validation prompts x 2."""
    tmp = tmp_path_factory.mktemp("rft")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUBRIQ_CACHE", str(tmp / "cache"))
        from rubriq.cli import app

        tiny_adapter(tmp / "models" / "adapter")
        config = _write_configs(tmp, "out")
        pool = _pool(config)
        calls: list[list[str]] = []
        plant = _planting(mp, pool, calls)
        result = CliRunner().invoke(app, ["study", "rft", str(config), "--commit"])
    assert result.exit_code == 0, result.output
    return {"tmp": tmp, "out": tmp / "out", "pool": pool, "plant": plant, "calls": calls, "output": result.output}


def test_rft_keeps_the_planted_reduction_trains_the_same_adapter_and_evaluates_both(first_run):
    from safetensors.torch import load_file

    from rubriq.studies.evaluate import eval_seed

    tmp, out, pool, plant = first_run["tmp"], first_run["out"] / "rft", first_run["pool"], first_run["plant"]
    first = pool[0]
    records = _pool_records(first_run["out"])
    assert len(records) == 2 * len(pool) == 14 and len(list((out / "pool").glob("chunk*.jsonl"))) == 3
    stats = json.loads((out / "stats.json").read_text())
    assert (stats["pool_prompts"], stats["samples"], stats["reductions"], stats["kept"]) == (7, 14, 1, 1)
    assert stats["outcomes"]["copy"] == 1 and stats["mix_gold"] == 1 and stats["rows"] == 2
    rows = _jsonl(out / "dataset.jsonl")
    own = [r for r in rows if r["rft_source"] == "own"]
    assert [r["id"] for r in own] == [first["id"]] and own[0]["rft_sample"]["sample"] == 0
    answer, source = own[0]["sft_answers"][0], json.loads(first["target"])["qasm"]
    # the kept completion is the planted text, and it is verified independently of RubriQ
    assert f"```qasm\n{answer}\n```" == plant[(first["id"], 0)]
    assert _equivalent(answer, source) and _t(answer) < _t(source) == first["t0"]
    assert stats["t_saved"] == _t(source) - _t(answer)
    assert len([r for r in rows if r["rft_source"] == "gold"]) == 1

    # the same adapter trained further: same base, rank, modules and tensors; other values
    warm = load_file(str(tmp / "models" / "adapter" / "adapter_model.safetensors"))
    tuned = load_file(str(out / "adapter" / "adapter_model.safetensors"))
    assert {k: v.shape for k, v in warm.items()} == {k: v.shape for k, v in tuned.items()}
    assert any(not (warm[k] == tuned[k]).all() for k in warm)
    config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert config["r"] == 2 and set(config["target_modules"]) == {"q_proj", "v_proj"}
    assert config["base_model_name_or_path"] == str((tmp / "models" / "base").resolve())
    info = json.loads((out / "adapter" / "rft.json").read_text())
    import hashlib

    assert info["sha256"] == hashlib.sha256((out / "adapter" / "adapter_model.safetensors").read_bytes()).hexdigest()
    assert info["dataset_sha256"] == hashlib.sha256((out / "dataset.jsonl").read_bytes()).hexdigest()
    assert (info["own_rows"], info["gold_rows"], info["sft_args"]["max_steps"]) == (1, 1, 2)
    assert len([r for r in _jsonl(out / "metrics.jsonl") if "loss" in r]) == 2

    # both evaluated on the validation split with the same seed: the study's step 0 of seed 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["eval_seed"] == eval_seed(0, 0, "test") == 1_000_003
    validation = _jsonl(first_run["out"] / "data" / "validation.jsonl")
    for name in ("warm_start", "rft"):
        evaluated = _jsonl(out / "eval" / name / "step0" / "records_seed0.jsonl")
        assert sorted(r["prompt_id"] for r in evaluated) == sorted(2 * [r["id"] for r in validation])
        info = summary["policies"][name]
        assert info["samples"] == 6 and info["reduction"] + info["copy"] + info["other_correct"] + info["wrong"] == 6
    assert set(summary["paired"]) == {"reduction", "correct", "gap_closed"}
    md = (out / "summary.md").read_text()
    assert "| warm_start |" in md and "| rft |" in md and "1000003" in md
    assert "summary:" in first_run["output"]


def test_the_kept_adapter_is_a_warm_start_a_study_can_use(first_run):
    import hashlib

    from rubriq.models import load_tokenizer
    from rubriq.studies.warm_start import merge_adapter

    kept = first_run["tmp"] / "out_kept"
    adapter = kept / "adapter"
    files = {p.name for p in adapter.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "rubriq_policy.json", "rft.json", "README.md"} <= files
    assert not files & {"tokenizer.json", "tokenizer_config.json"}  # the base's, not committed
    sums = dict(reversed(line.split("  ")) for line in (adapter / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == files - {"SHA256SUMS"}
    assert all(hashlib.sha256((adapter / n).read_bytes()).hexdigest() == h for n, h in sums.items())
    for name in ("summary.md", "summary.json", "stats.json", "dataset.jsonl", "metrics.jsonl"):
        assert (kept / name).is_file(), name
    assert (kept / "eval" / "rft" / "step0" / "records_seed0.jsonl").is_file()
    assert (kept / "eval" / "warm_start" / "step0" / "records_seed0.jsonl").is_file()  # drawn here
    # the model card: Hugging Face front matter whose metrics are the summary's counts over samples
    import yaml

    card = (adapter / "README.md").read_text()
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["library_name"] == "peft" and meta["base_model"] == str(
        (first_run["tmp"] / "models" / "base").resolve()
    )
    rft = json.loads((kept / "summary.json").read_text())["policies"]["rft"]
    metrics = {m["type"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]}
    assert rft["samples"] == 6
    assert metrics["correct_reduction_rate"] == round(rft["reduction"] / 6, 3)
    assert metrics["wrong_rate"] == round(rft["wrong"] / 6, 3)
    for heading in ("## Training data and recipe", "## Evaluation", "## Intended use and limits", "## How to load"):
        assert heading in card, heading
    # a study's warm_start_model: merged into its base, with the base's tokenizer
    merged = merge_adapter(adapter, first_run["tmp"] / "study" / "sft" / "model")
    assert (merged / "config.json").is_file() and load_tokenizer(str(adapter)) is not None


def test_a_stopped_pool_resumes_to_the_same_draws_and_both_policies_share_the_seed(first_run, monkeypatch):
    """A second run, stopped after its first pool chunk and run again: the pool is the first
    run's, sample for sample; with learning rate 0 the new adapter is the warm-start, and its
    evaluation (same seed) draws exactly the warm-start's samples, which are reused, not drawn."""
    from rubriq.evaluation import sampling
    from rubriq.studies import rft

    tmp = first_run["tmp"]
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp / "cache"))
    reuse = first_run["out"] / "rft" / "eval" / "warm_start"
    config = _write_configs(
        tmp, "again", reuse_step0=str(reuse), sft_args={"max_steps": 2, "learning_rate": 0.0}, results_dir=""
    )
    pool = _pool(config)
    calls: list[list[str]] = []
    _planting(monkeypatch, pool, calls)
    real_score, scored_chunks = sampling.score, []

    def stop_after_one(records, *a, **kw):
        if scored_chunks:
            raise KeyboardInterrupt  # killed while scoring the second chunk
        scored_chunks.append(len(records))
        return real_score(records, *a, **kw)

    monkeypatch.setattr(sampling, "score", stop_after_one)
    with pytest.raises(KeyboardInterrupt):
        rft.run(config)
    out = tmp / "again"
    assert [p.name for p in sorted((out / "rft" / "pool").glob("chunk*.jsonl"))] == ["chunk0000.jsonl"]
    monkeypatch.setattr(sampling, "score", real_score)
    calls.clear()
    rft.run(config)
    pool_ids = {r["id"] for r in pool}
    assert [ids[0] for ids in calls if ids[0] in pool_ids] == [pool[3]["id"], pool[6]["id"]]  # chunks 1 and 2
    assert len([ids for ids in calls if ids[0] not in pool_ids]) == 1  # only the new adapter evaluated
    assert _pool_records(out) == _pool_records(first_run["out"])
    warm = _jsonl(out / "rft" / "eval" / "warm_start" / "step0" / "records_seed0.jsonl")
    assert warm == _jsonl(reuse / "step0" / "records_seed0.jsonl")
    tuned = _jsonl(out / "rft" / "eval" / "rft" / "step0" / "records_seed0.jsonl")
    assert [r["text"] for r in tuned] == [r["text"] for r in warm]  # common random numbers
    summary = json.loads((out / "rft" / "summary.json").read_text())
    assert summary["paired"]["reduction"] == [0.0, 0.0, 0.0]
    assert "reused from" in summary["sources"]["warm_start_records"]


def test_committed_pool_chunks_resume_where_the_run_folder_is_gone(first_run, monkeypatch):
    """With ``--commit`` each pool chunk is committed as soon as it is scored; a run on a machine
    without the run folder reads the committed chunks and draws only the others (the same draws
    as an unstopped run), committing each; a committed pool of other settings is refused."""
    import shutil
    import subprocess

    from rubriq.config import ConfigError
    from rubriq.studies import rft

    tmp = first_run["tmp"]
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp / "cache"))
    kept = tmp / "out_kept" / "pool"  # the first run's, copied there chunk by chunk
    assert sorted(p.name for p in kept.iterdir()) == [f"chunk000{k}.jsonl" for k in range(3)] + ["plan.json"]
    assert [r for k in range(3) for r in _jsonl(kept / f"chunk000{k}.jsonl")] == _pool_records(first_run["out"])
    repo = tmp / "repo"
    (repo / "kept" / "pool").mkdir(parents=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    for name in ("plan.json", "chunk0000.jsonl"):  # what a run stopped after its first chunk committed
        shutil.copy2(kept / name, repo / "kept" / "pool" / name)
    git("add", ".")
    git("commit", "-q", "-m", "a stopped run's first chunk")
    config = _write_configs(tmp, "elsewhere", results_dir=str(repo / "kept"))
    pool = _pool(config)
    calls: list[list[str]] = []
    _planting(monkeypatch, pool, calls)
    rft.run(config, commit=True)
    pool_ids = {r["id"] for r in pool}
    assert [ids[0] for ids in calls if ids[0] in pool_ids] == [pool[3]["id"], pool[6]["id"]]  # chunks 1 and 2
    assert _pool_records(tmp / "elsewhere") == _pool_records(first_run["out"])
    subjects = git("log", "--format=%s").splitlines()
    assert [s.split(" (")[0] for s in subjects[1:4]] == [
        "rft pool: chunk 3 of 3 sampled and scored",
        "rft pool: chunk 2 of 3 sampled and scored",
        "a stopped run's first chunk",
    ]
    assert subjects[0].startswith("rft (remedy 1 of issue 52)")
    assert git("show", "--name-only", "--format=", "HEAD~2").split() == ["kept/pool/chunk0001.jsonl"]
    assert git("status", "--porcelain") == ""
    # a committed pool drawn with other settings is not mixed with new draws
    plan = json.loads((repo / "kept" / "pool" / "plan.json").read_text())
    (repo / "kept" / "pool" / "plan.json").write_text(json.dumps({**plan, "chunk_prompts": 2}))
    with pytest.raises(ConfigError, match="committed pool"):
        rft.run(_write_configs(tmp, "other", results_dir=str(repo / "kept"), chunk_prompts=3), commit=True)


# -- settings -------------------------------------------------------------------------------------
def test_bad_rft_settings_name_the_key(tmp_path):
    from rubriq.cli import app
    from rubriq.config import ConfigError
    from rubriq.studies.rft import RftSettings

    def error(text: str) -> str:
        (tmp_path / "r.yaml").write_text(text)
        with pytest.raises(ConfigError) as exc:
            RftSettings.from_yaml(tmp_path / "r.yaml")
        return str(exc.value)

    base = "train_config: t.yaml\nwarm_start_model: w\n"
    assert "warm_start_model" in error("train_config: t.yaml\n")
    assert "train_config" in error("warm_start_model: w\n")
    assert "samples_per_prompt" in error(base + "samples_per_prompt: 4\n")
    assert "per_prompt" in error(base + "per_prompt: 0\n")
    assert "eval_samples" in error(base + "eval_samples: 1\n")
    assert "pool_split" in error(base + "pool_split: validation\n")
    assert "mix_gold" in error(base + "mix_gold: -1\n")
    assert "pool_sampler" in error(base + "pool_sampler: fast\n")
    assert "output_dir" in error(base + "sft_args: {output_dir: x}\n")
    (tmp_path / "r.yaml").write_text(base + "chunk_prompt: 4\n")
    result = CliRunner().invoke(app, ["study", "rft", str(tmp_path / "r.yaml")])
    assert result.exit_code == 2 and "chunk_prompt" in result.output


def test_the_shipped_rft_configs_start_from_the_warm_start_and_reuse_the_pilots_step0(tmp_path):
    """configs/studies/rewriting_rft.yaml samples the SFT corpus and evaluates on the validation
    split as the pilots did (their step-0 samples reused: 29 correct reductions of 384), and
    rewriting_pilot_rft.yaml is the lr 3e-4 pilot from the RFT adapter."""
    from types import SimpleNamespace

    from rubriq.config import ConfigError
    from rubriq.studies.demo import outcome_counts
    from rubriq.studies.rft import RftSettings, check_reusable
    from rubriq.studies.settings import StudySettings
    from rubriq.training.config import TrainSettings

    studies = ROOT / "configs" / "studies"
    rft = RftSettings.from_yaml(studies / "rewriting_rft.yaml")
    train = TrainSettings.from_yaml(rft.train_config)
    assert rft.pool_split == train.sft.split == "sft" and rft.eval_split == "validation"
    assert Path(rft.warm_start_model) == ROOT / "results" / "studies" / "rewriting" / "warm_start"
    assert rft.output_dir == "runs/studies/rewriting_rft" and rft.results_dir == "results/studies/rewriting/rft"
    pilot = StudySettings.from_yaml(studies / "rewriting_pilot_lr3e-4.yaml")
    reuse = Path(rft.reuse_step0)
    assert reuse == ROOT / pilot.results_dir
    records = _jsonl(reuse / "step0" / "records_seed0.jsonl")
    counts = outcome_counts(records, 1 - train.rubric.fidelity.correct_threshold)
    assert (counts["reduction"], len(records)) == (29, 384)
    study = rft.evaluation_study()
    held_out = study.held_out_sampling(train)
    rows = list({r["prompt_id"]: {"id": r["prompt_id"], "target": r["target"]} for r in records}.values())
    evaluate = SimpleNamespace(rows=rows, sampling=held_out)
    check_reusable(reuse, records, evaluate, study, Path(rft.warm_start_model))
    # what would make the reused samples another evaluation than this one is refused, and named
    with pytest.raises(ConfigError, match="batch_size"):
        check_reusable(reuse, records, evaluate, dataclasses.replace(study, batch_size=16), Path(rft.warm_start_model))
    with pytest.raises(ConfigError, match="x 4 samples"):
        check_reusable(reuse, records, SimpleNamespace(rows=rows, sampling=held_out.replace(samples=4)), study, reuse)
    with pytest.raises(ConfigError, match="other targets"):
        moved = [{**rows[0], "target": rows[1]["target"]}, *rows[1:]]
        check_reusable(reuse, records, SimpleNamespace(rows=moved, sampling=held_out), study, reuse)
    (tmp_path / "adapter_model.safetensors").write_bytes(b"other weights")
    with pytest.raises(ConfigError, match="another adapter"):
        check_reusable(reuse, records, evaluate, study, tmp_path)
    assert (held_out.samples, held_out.temperature, held_out.top_p, held_out.max_new_tokens) == (8, 0.8, 1.0, 192)
    # the pilot from the RFT adapter: the lr 3e-4 pilot but for where it starts and writes
    remedy = StudySettings.from_yaml(studies / "rewriting_pilot_rft.yaml")
    assert Path(remedy.warm_start_model) == ROOT / rft.results_dir / "adapter"
    assert (remedy.output_dir, remedy.results_dir) == (
        "runs/studies/rewriting_pilot_rft",
        "results/studies/rewriting/pilot/rft",
    )
    same = dataclasses.replace(
        remedy,
        warm_start_model=pilot.warm_start_model,
        output_dir=pilot.output_dir,
        results_dir=pilot.results_dir,
    )
    assert same == pilot
