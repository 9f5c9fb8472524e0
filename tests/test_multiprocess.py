"""Real multi-process training on CPUs: 2 processes under `accelerate launch` (torchrun, gloo)
through `rubriq train run --launcher accelerate --num-processes 2 --cpu`, with the tiny model.

GRPO (TRL) and Sparse-PPO (RubriQ's loop): both ranks score their own completions, rank 0
builds the dataset and writes the checkpoints, and the run resumes from its last checkpoint.
"""

import json
import os
import socket
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.tiny import CPU, tiny_build, tiny_training

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

SMALL = tiny_build(encodings=["basis_encoding", "angle_encoding"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(config: Path, *extra: str) -> None:
    from rubriq.cli import app

    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        result = CliRunner().invoke(
            app,
            [
                "train",
                "run",
                str(config),
                "--launcher",
                "accelerate",
                "--num-processes",
                "2",
                "--cpu",
                "--main-process-port",
                str(_free_port()),
                *extra,
            ],
        )
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert result.exit_code == 0, result.output


def _config(tmp_path: Path, **sections) -> Path:
    config = tiny_training(
        output_dir=str(tmp_path / "run"), data={"dataset": str(tmp_path / "data"), "build": SMALL}, **sections
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _stats(run: Path) -> dict[int, dict]:
    return {r: json.loads((run / "reward_stats" / f"rank{r}.json").read_text()) for r in (0, 1)}


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    os.environ.setdefault("RUBRIQ_CACHE", str(tmp_path_factory.mktemp("cache")))


def test_grpo_in_two_processes_scores_on_both_ranks_checkpoints_and_resumes(tmp_path):
    config = _config(
        tmp_path,
        grpo={
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 6,
            "max_steps": 2,
            "save_steps": 1,
            "logging_steps": 1,
            "report_to": [],
            **CPU,
        },
    )
    _launch(config)
    run = tmp_path / "run"
    info = json.loads((run / "run_info.json").read_text())
    assert info["devices"] == 2 and info["device_type"] == "cpu"
    # each rank scored its own 4 completions per step: 2 steps x 4 x 6 reward functions (R as `total`
    # and the five dimensions logged beside it, rubriq.reward.RubricRewards; one shared cache)
    stats = _stats(run)
    assert stats[0]["requests"] == stats[1]["requests"] == 2 * 4 * 6
    assert all(s["evaluated"] >= 1 for s in stats.values())
    # rank 0 built the dataset once (written under a temporary name, then renamed)
    assert (tmp_path / "data" / "train.jsonl").is_file() and not (tmp_path / "data.tmp").exists()
    assert {p.name for p in run.glob("checkpoint-*")} == {"checkpoint-1", "checkpoint-2"}
    steps = [
        json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines() if "reward" in json.loads(x)
    ]
    assert steps == [1, 2]  # rank 0 alone logs
    _launch(config, "--resume", "--max-steps", "3")
    state = json.loads((run / "checkpoint-3" / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    steps = [
        json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines() if "reward" in json.loads(x)
    ]
    assert steps == [1, 2, 3]


def test_sparse_ppo_in_two_processes(tmp_path):
    config = _config(
        tmp_path,
        algorithm="ppo",
        reward={"kind": "sparse_inverse_t"},
        ppo={
            "batch_size": 2,
            "mini_batch_size": 1,
            "ppo_epochs": 1,
            "max_new_tokens": 6,
            "max_steps": 2,
            "save_steps": 1,
            "tensorboard": False,
        },
    )
    _launch(config)
    run = tmp_path / "run"
    stats = _stats(run)
    assert stats[0]["requests"] == stats[1]["requests"] == 2 * 2  # 2 steps x 2 prompts, one reward function
    assert (run / "checkpoint-2" / "ppo_state.pt").is_file() and (run / "final" / "adapter_model.safetensors").is_file()
    _launch(config, "--resume", "--max-steps", "3")
    assert json.loads((run / "checkpoint-3" / "trainer_state.json").read_text())["global_step"] == 3


def _average(rank: int, world: int, port: int, out: str) -> None:
    import torch.distributed as dist

    from rubriq.training.ppo import average_gradients

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    p = torch.nn.Parameter(torch.zeros(3))
    p.grad = torch.full((3,), float(rank + 1))
    q = torch.nn.Parameter(torch.zeros(2))  # no gradient on this rank: counts as zero
    if rank == 0:
        q.grad = torch.ones(2) * 4
    average_gradients([p, q])
    torch.save({"p": p.grad, "q": q.grad}, f"{out}/rank{rank}.pt")
    dist.destroy_process_group()


def test_average_gradients_over_two_gloo_processes(tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(_average, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt")
        assert got["p"].tolist() == [1.5, 1.5, 1.5] and got["q"].tolist() == [2.0, 2.0]
