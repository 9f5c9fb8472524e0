"""The training entry point: config loading, a real 2-step run on a tiny model, resume."""

import json

import pytest
import yaml

pytest.importorskip("trl")

from rubriq.config import ConfigError  # noqa: E402
from rubriq.training.config import TrainSettings  # noqa: E402

REPO_CONFIG = "configs/rubriq_grpo.yaml"


def test_paper_config_carries_table_iii():
    from pathlib import Path

    s = TrainSettings.from_yaml(Path(__file__).resolve().parents[1] / REPO_CONFIG)
    assert (s.lora.r, s.lora.lora_alpha, s.lora.lora_dropout) == (64, 128, 0.05)
    g = s.grpo.to_trl()  # the keywords TRL's GRPOConfig gets
    assert (g["learning_rate"], g["lr_scheduler_type"], g["warmup_steps"]) == (5e-6, "cosine", 0.1)
    assert (g["per_device_train_batch_size"], g["gradient_accumulation_steps"], g["num_generations"]) == (1, 8, 8)
    assert (g["temperature"], g["top_p"], g["max_completion_length"], g["num_train_epochs"]) == (0.8, 0.95, 2048, 50)
    assert g["bf16"] is True and s.rubric.weights.fidelity == 0.40
    assert s.early_stopping.patience > 0  # "50 epochs with early stopping"


def test_config_errors_are_clear():
    with pytest.raises(ConfigError, match="GRPOConfig"):
        TrainSettings.from_dict({"grpo": {"learning_rat": 1e-5}})
    with pytest.raises(ConfigError, match="rubric.weights"):
        TrainSettings.from_dict({"grpo": {"reward_weights": [1, 0, 0, 0, 0]}})
    with pytest.raises(ConfigError, match="unknown key"):
        TrainSettings.from_dict({"lora": {"rank": 8}})


def test_two_steps_then_resume(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    from rubriq.data import build_all
    from rubriq.training.train_rubriq import main

    build_all(tmp_path / "data", small=True, collections=())
    out = tmp_path / "run"
    config = {
        "output_dir": str(out),
        "model": {"name_or_path": "embedded", "tiny": True},
        "lora": {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]},
        "data": {"dataset": str(tmp_path / "data" / "prompts"), "max_rows": 8},
        "grpo": {
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 8,
            "max_steps": 2,
            "save_steps": 1,
            "logging_steps": 1,
            "use_cpu": True,
            "bf16": False,
            "gradient_checkpointing": False,
            "learning_rate": 1e-4,
            "seed": 42,
        },
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["--rubriq_config", str(path)]) == 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if "rewards/fidelity/mean" in x]
    assert [x["step"] for x in steps] == [1, 2]
    assert (out / "checkpoint-2").is_dir() and (out / "final").is_dir()
    # a run killed while saving leaves newer folders without a (whole) trainer_state.json, which
    # is written last: one with the rest of the checkpoint (what CI once hit), one cut mid-write
    import shutil

    from rubriq.training.train_rubriq import last_checkpoint

    shutil.copytree(out / "checkpoint-2", out / "checkpoint-3")
    (out / "checkpoint-3" / "trainer_state.json").unlink()
    (out / "checkpoint-10").mkdir()
    (out / "checkpoint-10" / "trainer_state.json").write_text('{"global_step": 1')
    assert last_checkpoint(out) == str(out / "checkpoint-2")  # by number: 10 > 3 > 2
    assert last_checkpoint(out / "checkpoint-10") is None and last_checkpoint(tmp_path / "absent") is None
    # resume: continue from checkpoint-2 up to step 3
    assert main(["--rubriq_config", str(path), "--resume", "--max_steps", "3"]) == 0
    assert (out / "checkpoint-10" / "trainer_state.json").read_text() == '{"global_step": 1'  # left as found
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines if "rewards/fidelity/mean" in x] == [1, 2, 3]
    state = json.loads((out / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3


def test_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    """SIGKILL a real training process after its first checkpoint, then --resume it."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from rubriq.data import build_all

    env = {**os.environ, "RUBRIQ_CACHE": str(tmp_path / "cache")}
    build_all(tmp_path / "data", small=True, collections=())
    out = tmp_path / "run"
    config = {
        "output_dir": str(out),
        "model": {"name_or_path": "embedded", "tiny": True},
        "lora": {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]},
        "data": {"dataset": str(tmp_path / "data" / "prompts"), "max_rows": 8},
        "grpo": {
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 8,
            "max_steps": 40,
            "save_steps": 1,
            "logging_steps": 1,
            "use_cpu": True,
            "bf16": False,
            "gradient_checkpointing": False,
            "seed": 42,
        },
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    script = Path(__file__).resolve().parents[1] / "rubriq" / "training" / "train_rubriq.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--rubriq_config", str(path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    # kill it once checkpoint 2 is written (however long that takes: pytest's timeout is the bound);
    # a machine fast enough to finish all 40 steps first still leaves checkpoints to resume from
    while not (out / "checkpoint-2" / "trainer_state.json").exists() and proc.poll() is None:
        time.sleep(0.5)  # paces the poll for checkpoint 2 (pytest's timeout bounds it)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (out / "checkpoint-2" / "trainer_state.json").exists(), "training ended before checkpoint 2"
    # the newest checkpoint the kill left whole (its trainer_state.json, written last, parses);
    # a newer one cut mid-save is what --resume must skip
    whole = []
    for p in out.glob("checkpoint-*"):
        try:
            whole.append(json.loads((p / "trainer_state.json").read_text())["global_step"])
        except (OSError, ValueError):
            pass
    done = max(whole)
    from rubriq.training.train_rubriq import main

    assert main(["--rubriq_config", str(path), "--resume", "--max_steps", str(done + 1)]) == 0
    state = json.loads((out / f"checkpoint-{done + 1}" / "trainer_state.json").read_text())
    assert state["global_step"] == done + 1
