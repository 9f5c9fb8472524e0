"""The SFT curve end to end on a tiny random model: a generated SFT corpus disjoint from the
held-out tiers, evaluations at the named points, resuming a stopped run, and the outcome rates
against hand-classified samples."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from tests.tiny import CPU, TINY_MODEL, tiny_build

pytest.importorskip("trl")

REWRITES = {"qubits": [2], "core_gates": [2, 3], "redundancies": [1, 1], "kinds": ["adjacent"]}


def _config(tmp_path, max_steps: int = 4) -> object:
    build = tiny_build(
        qft_sizes=[],
        encoding_sizes=[],
        small_rewrites=[{"count": 10, "seed": 0, **REWRITES}],
        fractions=[0.0, 0.4],
        extra_splits={
            "hard": {"count": 3, "seed": 1, **REWRITES, "redundancies": [2, 2]},
            "sft": {
                "count": 30,
                "seed": 0,
                **REWRITES,
                "answers": 1,
                "keep_probability": 0.0,
                "copies": False,
                "optimum": False,
                "target_t_best": False,
            },
        },
    )
    train = {
        "model": TINY_MODEL,
        "data": {"build": build},
        "sft": {
            "enabled": True,
            "split": "sft",
            "lora": True,
            "adapter": {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "down_proj"]},
            "args": {"max_steps": max_steps, "per_device_train_batch_size": 2, "learning_rate": 1e-3, **CPU},
        },
        "grpo": {"max_completion_length": 8, "temperature": 1.0, **CPU},
    }
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(train))
    curve = {
        "train_config": "train.yaml",
        "output_dir": str(tmp_path / "out"),
        "eval_at": [2, 4],
        "eval_splits": ["test", "hard"],
        "samples": 2,
        "batch_size": 8,
    }
    (tmp_path / "curve.yaml").write_text(yaml.safe_dump(curve))
    return tmp_path / "curve.yaml"


def _read(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_sft_curve_trains_on_its_corpus_evaluates_at_each_point_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    from rubriq.cli import app

    config = _config(tmp_path)
    result = CliRunner().invoke(app, ["study", "sft-curve", str(config)])
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    splits = {name: _read(out / "data" / f"{name}.jsonl") for name in ("train", "test", "hard", "sft")}
    keys = {name: {r["target"] for r in rows} for name, rows in splits.items()}
    # every split disjoint by target; the SFT corpus lost the circuits drawn again from seed 0
    for a in keys:
        for b in keys:
            assert a == b or not keys[a] & keys[b], (a, b)
    assert 0 < len(splits["sft"]) < 30
    assert all(json.loads(r["target"]).get("t_best") == r["t_pyzx"] for r in splits["test"] + splits["hard"])
    assert all(r["t_pyzx"] is None and len(r["sft_answers"]) == 1 for r in splits["sft"])
    rows = _read(out / "curve.jsonl")
    # 2 examples per step: points 2 and 4 at steps 1 and 2; the end of training (step 4, 8 examples)
    assert sorted((r["examples"], r["split"]) for r in rows) == [(e, s) for e in (2, 4, 8) for s in ("hard", "test")]
    for r in rows:
        records = _read(out / "records" / f"{r['split']}_examples{r['examples']}.jsonl")
        assert r["samples"] == len(records) == 2 * len(splits[r["split"]])
        total = r["correct_reduction_rate"] + r["copy_rate"] + r["wrong_rate"]
        assert 0.0 <= total <= 1.0 + 1e-9
    assert (out / "sft" / "model" / "config.json").is_file()
    adapter = json.loads((out / "sft" / "adapter" / "adapter_config.json").read_text())
    assert adapter["r"] == 4 and set(adapter["target_modules"]) == {"q_proj", "down_proj"}
    assert json.loads((out / "sft" / "fingerprint.json").read_text())["sha256"]
    assert (out / "curve.md").read_text().count("| 8 |") == 2 and (out / "curve.png").stat().st_size > 0

    # --keep: the curve, every point's records and the adapter with a card and its hashes
    kept = tmp_path / "kept"
    result = CliRunner().invoke(app, ["study", "sft-curve", str(config), "--table-only", "--keep", str(kept)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (kept / "records").iterdir()) == sorted(p.name for p in (out / "records").iterdir())
    assert (kept / "curve.jsonl").read_text() == (out / "curve.jsonl").read_text()
    warm = kept / "warm_start"
    files = {p.name for p in warm.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "rubriq_policy.json", "README.md"} <= files
    assert not files & {"tokenizer.json", "tokenizer_config.json", "training_args.bin"}
    sums = dict(reversed(line.split("  ")) for line in (warm / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == files - {"SHA256SUMS"}
    import hashlib

    assert all(hashlib.sha256((warm / n).read_bytes()).hexdigest() == h for n, h in sums.items())
    assert (warm / "adapter_model.safetensors").read_bytes() == (
        out / "sft" / "adapter" / "adapter_model.safetensors"
    ).read_bytes()
    meta = yaml.safe_load((warm / "README.md").read_text().split("---\n")[1])
    final = max((r for r in rows if r["split"] == "test"), key=lambda r: r["examples"])
    metrics = {m["type"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]}
    assert metrics["correct_reduction_rate"] == round(final["correct_reduction_rate"], 3)
    assert metrics["wrong_rate"] == round(final["wrong_rate"], 3)
    assert "**did not meet**" in (warm / "README.md").read_text()  # a random tiny model
    # the training log, the merged model's hash and how to prompt it (the corpus's prompt style)
    assert [r["step"] for r in _read(kept / "sft_metrics.jsonl") if "loss" in r] == [1, 2, 3, 4]
    assert (kept / "warm_start_fingerprint.json").read_bytes() == (out / "sft" / "fingerprint.json").read_bytes()
    from rubriq.data.prompts import prompt_style_of_rows

    policy = json.loads((warm / "rubriq_policy.json").read_text())
    assert policy["prompt_style"] == prompt_style_of_rows(splits["sft"]) and policy["tiny"] is True
    # other weights in the folder are refused, and nothing is changed
    (warm / "adapter_model.safetensors").write_bytes(b"other weights")
    before = (kept / "curve.md").stat().st_mtime_ns
    refused = CliRunner().invoke(app, ["study", "sft-curve", str(config), "--table-only", "--keep", str(kept)])
    assert refused.exit_code != 0 and "other weights" in " ".join(refused.output.split())
    assert (kept / "curve.md").stat().st_mtime_ns == before
    bad = CliRunner().invoke(app, ["study", "sft-curve", str(config), "--table-only", "--commit"])
    assert bad.exit_code != 0 and "--keep" in bad.output

    # a run stopped after its first point resumes from that point's checkpoint and evaluates
    # only the points it had not: point 1 was evaluated at 2 examples (the first step past it),
    # so the resumed run evaluates at point 6 (step 3) and at the end (step 4), not at step 2
    first = tmp_path / "again"
    first.mkdir()
    config = _config(first)
    curve = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**curve, "eval_at": [1, 6]}))
    out2 = first / "out"
    from rubriq.studies import sft_curve

    calls = []
    real = sft_curve.CurveEvaluator.__call__

    def stop_after_first(self, model, examples, epoch):
        calls.append(examples)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed during the second evaluation
        return real(self, model, examples, epoch)

    monkeypatch.setattr(sft_curve.CurveEvaluator, "__call__", stop_after_first)
    with pytest.raises(KeyboardInterrupt):
        sft_curve.run(config)
    assert [r["examples"] for r in _read(out2 / "curve.jsonl")] == [2, 2]
    assert (out2 / "sft" / "checkpoint-1").is_dir() and not (out2 / "sft" / "model").exists()
    calls.clear()
    monkeypatch.setattr(sft_curve.CurveEvaluator, "__call__", lambda self, *a: (calls.append(a[1]), real(self, *a))[1])
    sft_curve.run(config)
    assert calls == [6, 8]
    assert [r["examples"] for r in _read(out2 / "curve.jsonl")] == [2, 2, 6, 6, 8, 8]


def test_point_metrics_classify_samples_as_derived_by_hand():
    from rubriq.studies.sft_curve import point_metrics

    qasm = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[1];\nt q[0];\nt q[0];\nh q[0];\n'
    spec = json.dumps({"algorithm": "circuit", "num_qubits": 1, "qasm": qasm, "t_best": 0})

    def rec(text, fid, t, parsed=True):
        return {
            "prompt_id": "a",
            "target": spec,
            "t0": 2,
            "text": text,
            "result": {"parsed": parsed, "average_fidelity": fid, "t_count": t, "reward": 0.5},
        }

    records = [
        rec(qasm, 1.0, 2),  # copy
        rec("qreg q[1];\ns q[0];\nh q[0];", 1.0, 0),  # correct, every T gone: closes the gap
        rec("qreg q[1];\nt q[0];\nh q[0];", 0.6, 1),  # wrong
        rec("", None, None, parsed=False),  # unparseable: wrong
    ]
    m = point_metrics(records, 0.01)
    assert (m["correct_reduction_rate"], m["copy_rate"], m["wrong_rate"]) == (0.25, 0.25, 0.5)
    assert m["correct_rate"] == 0.5 and m["mean_t_correct"] == 1.0
    assert m["gap_closed"] == pytest.approx(0.25)  # (2 - 0) / (2 - 0) for one sample of four


def test_bad_curve_settings_are_clear_errors(tmp_path):
    from rubriq.config import ConfigError
    from rubriq.studies.sft_curve import SftCurveSettings

    (tmp_path / "a.yaml").write_text("eval_at: [100]\n")
    with pytest.raises(ConfigError, match="train_config"):
        SftCurveSettings.from_yaml(tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text("train_config: t.yaml\neval_at: [0]\n")
    with pytest.raises(ConfigError, match="eval_at"):
        SftCurveSettings.from_yaml(tmp_path / "b.yaml")


def test_sft_adapter_settings_merge_into_the_lora_section_and_bad_ones_are_clear_errors(tmp_path):
    from rubriq.config import ConfigError
    from rubriq.training.config import TrainSettings

    settings = TrainSettings.from_dict(
        {"lora": {"r": 8, "layers_to_transform": [1]}, "sft": {"adapter": {"r": 4, "target_modules": ["up_proj"]}}}
    )
    sft = settings.sft_lora()
    assert (sft.r, sft.target_modules, sft.layers_to_transform, sft.lora_alpha) == (4, ("up_proj",), (), 128)
    assert settings.lora.r == 8 and settings.lora.layers_to_transform == (1,)  # the RL adapter's
    with pytest.raises(ConfigError, match="sft.adapter"):
        TrainSettings.from_dict({"sft": {"adapter": {"rank": 4}}})
