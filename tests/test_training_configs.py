"""Every shipped training config loads; variants are generated programmatically and match the
committed files; launcher and Slurm dry runs build the paper's commands; early stopping."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("trl")

from rubriq.config import ConfigError  # noqa: E402
from rubriq.training.callbacks import EarlyStopper  # noqa: E402
from rubriq.training.config import EarlyStoppingSettings, TrainSettings  # noqa: E402
from rubriq.training.launch import LaunchSettings, launch_command  # noqa: E402
from rubriq.training.variants import drop_weight, shift_weight, variant_overrides, write_variants  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAPER_W = {"clifford": 0.20, "tcount": 0.15, "hardware": 0.15, "fidelity": 0.40, "efficiency": 0.10}


@pytest.mark.parametrize(
    "path",
    sorted(p for p in (ROOT / "configs").rglob("*.yaml") if p.name != "rubric_default.yaml"),
    ids=lambda p: p.name,
)  # rubric_default.yaml is a RubricConfig: tested in test_evaluator
def test_every_shipped_config_loads(path):
    data = yaml.safe_load(path.read_text()) or {}
    if "train_config" in data and "goal_reduction" in data:  # an SFT curve (rubriq study sft-curve)
        from rubriq.studies.sft_curve import SftCurveSettings

        curve = SftCurveSettings.from_yaml(path)
        assert len(curve.eval_at) >= 4 and 0 < curve.goal_reduction < 1
        TrainSettings.from_yaml(path.parent / curve.train_config)
        return
    if "train_config" in data and "pool_split" in data:  # rejection-sampling fine-tuning (rubriq study rft)
        from rubriq.studies.rft import RftSettings

        rft = RftSettings.from_yaml(path)
        train = TrainSettings.from_yaml(rft.train_config)
        assert rft.eval_split != "test" and rft.pool_split != rft.eval_split and train.sft.enabled
        return
    if path.name == "demo_rewriting.yaml":  # make demo (rubriq study demo)
        from rubriq.studies.demo import DemoSettings

        demo = DemoSettings.from_yaml(path)
        assert demo.grpo_from in demo.policies and demo.sampling.samples >= 1
        TrainSettings.from_yaml(ROOT / demo.train_config)
        return
    if "train_config" in data:  # a study (configs/studies/)
        from rubriq.studies.convergence import StudySettings

        study = StudySettings.from_yaml(path)
        if study.split == "validation":  # a pilot: chooses settings on the validation split, never the test split
            assert not study.eval_tiers and study.same_eval_seed and len(study.arms) >= 2
        else:
            # the paper's reward and the no-RL control beside at least two other rewards, >= 3 seeds
            assert len(study.seeds) >= 3 and {"rubric", "none"} <= set(study.arms) and len(study.arms) >= 4
        TrainSettings.from_yaml(study.train_config)
        return
    if path.name == "leaderboard.yaml":
        from rubriq.evaluation.leaderboard import LeaderboardConfig

        board = LeaderboardConfig.from_yaml(path)
        assert board.entries and board.sampling.samples >= 1
        return
    if path.parent.name == "accelerate":
        from accelerate.commands.config.config_args import ClusterConfig

        cfg = ClusterConfig.from_yaml_file(str(path))
        assert cfg.distributed_type.value == "DEEPSPEED" and cfg.deepspeed_config["zero_stage"] == 2
        assert str(getattr(cfg.mixed_precision, "value", cfg.mixed_precision)) == "bf16"
    else:
        TrainSettings.from_yaml(path)


def test_quickstart_config_fits_a_cpu():
    s = TrainSettings.from_yaml(ROOT / "configs" / "quickstart_cpu.yaml")
    assert s.model.name_or_path == "embedded" and s.sft.enabled
    # 8 completions per step as before, as 2 prompts x N = 4 (two groups to compare; docs/studies.md)
    assert s.grpo.sampling.samples * 2 == s.grpo.per_device_train_batch_size == 8
    assert s.evaluation.sampling.samples >= 4 and s.evaluation.sampling.temperature == s.sampling().temperature
    assert s.grpo.bf16 is False and s.sft.args["bf16"] is False
    assert s.data.build["prompt_style"] == "compact"


def test_gpu_config_inherits_table_iii_and_turns_on_vllm():
    s = TrainSettings.from_yaml(ROOT / "configs" / "rubriq_grpo_gpu.yaml")
    assert s.grpo.use_vllm is True and s.grpo.vllm_mode == "colocate"
    assert s.grpo.sampling.samples == 8 and s.lora.r == 64  # from the base file


def test_base_chain_errors(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match="circular"):
        TrainSettings.from_yaml(tmp_path / "a.yaml")
    with pytest.raises(ConfigError, match="SFTConfig"):
        TrainSettings.from_dict({"sft": {"args": {"learning_rat": 1}}})
    with pytest.raises(ConfigError, match="PPOSettings"):
        TrainSettings.from_dict({"ppo": {"clip": 0.2}})


def test_ablation_and_sensitivity_weights_are_hand_checkable():
    no_h = drop_weight(PAPER_W, "hardware")
    assert no_h["hardware"] == 0.0 and sum(no_h.values()) == pytest.approx(1.0)
    assert no_h["clifford"] / no_h["fidelity"] == pytest.approx(0.20 / 0.40, rel=1e-5)  # proportions kept
    up = shift_weight(PAPER_W, "tcount", 0.05)
    assert up["tcount"] == pytest.approx(0.20) and sum(up.values()) == pytest.approx(1.0)
    assert up["fidelity"] == pytest.approx(0.40 * 0.80 / 0.85, abs=1e-6)
    grid = variant_overrides(PAPER_W)
    assert len([k for k in grid if k.startswith("sens_")]) == 10  # 5 dimensions x (+, -)
    assert grid["sparse_ppo"] == {"algorithm": "ppo", "reward": {"kind": "sparse_inverse_t"}}
    with pytest.raises(ConfigError):
        shift_weight(dict(PAPER_W, efficiency=0.0, fidelity=0.5), "efficiency", -0.05)


def test_committed_variants_are_exactly_what_the_generator_writes(tmp_path):
    written = write_variants(ROOT / "configs" / "rubriq_grpo.yaml", tmp_path / "configs" / "variants")
    committed = ROOT / "configs" / "variants"
    assert sorted(p.name for p in committed.glob("*.yaml")) == sorted(p.name for p in written)
    for p in written:
        assert yaml.safe_load(p.read_text()) | {"base": None} == yaml.safe_load((committed / p.name).read_text()) | {
            "base": None
        }
        s = TrainSettings.from_yaml(committed / p.name)
        assert s.lora.r == 64  # the base chain resolves from the committed location
    s = TrainSettings.from_yaml(committed / "no_w_T.yaml")
    assert s.rubric.weights.tcount == 0.0 and s.output_dir == "runs/rubriq_grpo_no_w_T"


def test_launcher_builds_the_papers_commands():
    cmd = launch_command(
        "configs/rubriq_grpo.yaml",
        LaunchSettings("accelerate", num_processes=4),
        script="rubriq/training/train_rubriq.py",
    )
    assert cmd == [
        "accelerate",
        "launch",
        "--num_processes",
        "4",
        "rubriq/training/train_rubriq.py",
        "--rubriq_config",
        "configs/rubriq_grpo.yaml",
    ]
    multi = launch_command(
        "c.yaml",
        LaunchSettings("accelerate", 8, 2, 1, "nid001", accelerate_config="configs/accelerate/deepspeed_zero2.yaml"),
        resume=True,
    )
    assert multi[:4] == ["accelerate", "launch", "--config_file", "configs/accelerate/deepspeed_zero2.yaml"]
    assert ["--num_machines", "2", "--machine_rank", "1", "--main_process_ip", "nid001"] == multi[6:12]
    assert multi[-1] == "--resume"
    with pytest.raises(ValueError, match="main-process-ip"):
        launch_command("c.yaml", LaunchSettings("accelerate", 8, 2))
    with pytest.raises(ValueError, match="one process"):
        launch_command("c.yaml", LaunchSettings("python", 4))


def test_cli_dry_run_and_clear_errors_without_gpus():
    from typer.testing import CliRunner

    from rubriq.cli import app

    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "train",
            "run",
            str(ROOT / "configs" / "rubriq_grpo.yaml"),
            "--launcher",
            "accelerate",
            "--num-processes",
            "4",
            "--dry-run",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "accelerate launch --num_processes 4" in res.output and "--rubriq_config" in res.output
    res = runner.invoke(
        app,
        [
            "train",
            "run",
            str(ROOT / "configs" / "rubriq_grpo.yaml"),
            "--launcher",
            "accelerate",
            "--num-processes",
            "4",
            "--accelerate-config",
            str(ROOT / "configs" / "accelerate" / "deepspeed_zero2.yaml"),
        ],
    )
    assert res.exit_code == 2 and ("DeepSpeed" in res.output or "GPU" in res.output)
    res = runner.invoke(app, ["train", "run", "missing.yaml", "--dry-run"])
    assert res.exit_code == 2 and "error" in res.output


def test_slurm_script_dry_run_builds_the_multi_node_launch():
    script = ROOT / "scripts" / "submit_rubriq_perlmutter.slurm"
    text = script.read_text()
    for var in ("FI_CXI_DISABLE_HOST_REGISTER=1", "FI_MR_CACHE_MONITOR=userfaultfd", "FI_CXI_DEFAULT_CQ_SIZE=131072"):
        assert f"export {var}" in text
    assert "#SBATCH -N 2" in text and "#SBATCH --gpus-per-node=4" in text
    env = {**os.environ, "RUBRIQ_DRY_RUN": "1", "SLURM_NNODES": "2", "MASTER_ADDR": "nid001"}
    out = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.startswith("srun --ntasks-per-node=1")
    assert "--config_file configs/accelerate/deepspeed_zero2.yaml --num_machines 2 --num_processes 8" in out
    assert "--main_process_ip nid001" in out and "--rubriq_config configs/rubriq_grpo.yaml" in out


def test_entry_point_runs_as_a_script_and_reports_bad_configs(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("grpo: {learning_rat: 1}\n")
    res = subprocess.run(
        [sys.executable, str(ROOT / "rubriq" / "training" / "train_rubriq.py"), "--rubriq_config", str(bad)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and "learning_rat" in res.stderr


def test_early_stopping_uses_a_moving_average():
    stop = EarlyStopper(EarlyStoppingSettings(patience=3, window=2))
    seq = [0.1, 0.2, 0.3, 0.25, 0.3, 0.2, 0.2, 0.2]
    flags = [stop.update(v) for v in seq]
    # averages: .1 .15 .25 .275 .275 .25 .2 .2 -> best .275 at index 3; 3 logs later it stops
    assert flags == [False] * 6 + [True, True]
    assert not any(EarlyStopper(EarlyStoppingSettings(patience=0)).update(0.0) for _ in range(10))


def test_normalize_then_sum_is_refused_because_the_reward_would_not_be_the_rubric():
    """TRL's normalize_then_sum (GDPO) normalizes each reward function within the group before
    the weighted sum: with one function per rubric dimension the advantages would no longer be
    those of R = sum w_d S_d, so the config check refuses it (TRL's default passes)."""
    from rubriq.config import ConfigError
    from rubriq.training.config import TrainSettings

    with pytest.raises(ConfigError, match="sum_then_normalize"):
        TrainSettings.from_dict({"grpo": {"multi_objective_aggregation": "normalize_then_sum"}})
    assert TrainSettings.from_dict({"grpo": {"multi_objective_aggregation": "sum_then_normalize"}}).grpo


def test_typed_grpo_and_ppo_sections():
    """grpo and ppo are typed: TRL's GRPOConfig gets exactly the keys a config gives (the sampling
    ones always, at TRL's own defaults when left out), an unknown key is an error naming it, a
    config round-trips through to_dict, and both sections' sampling is one SamplingSpec."""
    import dataclasses

    import trl

    from rubriq.config import ConfigError
    from rubriq.training.config import GRPO_SAMPLING_KEYS, TRL_GRPO_SAMPLING, GRPOSettings, TrainSettings

    trl_defaults = {f.name: f.default for f in dataclasses.fields(trl.GRPOConfig)}
    assert TRL_GRPO_SAMPLING.to_dict() | {"top_k": None, "seed": 0} == {
        name: trl_defaults[key] for key, name in GRPO_SAMPLING_KEYS.items() if key != "top_k"
    } | {"top_k": None, "seed": 0}
    g = GRPOSettings.from_dict({"learning_rate": 1, "seed": 3, "temperature": 0.7, "num_generations": 4})
    assert g.learning_rate == 1.0 and isinstance(g.learning_rate, float)
    assert g.sampling.temperature == 0.7 and g.sampling.samples == 4
    assert g.to_trl() == {
        "seed": 3,
        "learning_rate": 1.0,
        "temperature": 0.7,
        "top_p": 1.0,
        "num_generations": 4,
        "max_completion_length": 512,
    }
    assert g.replace(max_steps=5).max_steps == 5 and g.replace(max_steps=5).sampling == g.sampling
    with pytest.raises(ConfigError, match="'dataloader_num_workers'.*add it to GRPOSettings"):
        GRPOSettings.from_dict({"dataloader_num_workers": 2})
    with pytest.raises(ConfigError, match="'temprature': not a field of TRL's GRPOConfig"):
        GRPOSettings.from_dict({"temprature": 0.8})
    with pytest.raises(ConfigError, match="GRPOSettings.seed expects an integer"):
        GRPOSettings.from_dict({"seed": "x"})
    s = TrainSettings.from_yaml(ROOT / "configs" / "variants" / "sparse_ppo.yaml")
    assert s.algorithm == "ppo" and s.sampling() == s.ppo.sampling
    assert (s.ppo.sampling.temperature, s.ppo.sampling.top_p, s.ppo.sampling.max_new_tokens) == (0.8, 0.95, 2048)
    assert s.grpo.sampling.temperature == 0.8 and s.ppo.learning_rate == 5e-6
    assert TrainSettings.from_dict(s.to_dict()) == s
    with pytest.raises(ConfigError, match="temprature"):
        TrainSettings.from_dict({"ppo": {"temprature": 0.8}})
