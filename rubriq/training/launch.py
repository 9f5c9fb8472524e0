"""Build (and run) the training command for one process, ``accelerate launch`` or Slurm.

The paper's multi-GPU command is

    accelerate launch --num_processes 4 rubriq/training/train_rubriq.py --rubriq_config configs/rubriq_grpo.yaml

and multi-node adds ``--config_file configs/accelerate/deepspeed_zero2.yaml --num_machines 2
--machine_rank R --main_process_ip HOST`` (``scripts/submit_rubriq_perlmutter.slurm``).
:func:`launch_command` writes these commands; ``rubriq train run --dry-run`` prints them
without running anything.  With ``cpu`` the processes run on CPUs (torchrun through
``accelerate launch --multi_gpu`` on a machine without GPUs; torch.distributed's gloo backend;
the training config must set ``use_cpu: true``): that is how the multi-process path is really
run in the tests (tests/test_multiprocess.py), and how it can be debugged without GPUs.
"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from rubriq.options import option

SCRIPT = Path(__file__).resolve().with_name("train_rubriq.py")


@dataclass(frozen=True)
class LaunchSettings:
    """How the training entry point is started: one process, or accelerate over processes and machines."""

    launcher: str = option("python", "python (one process, the CPU path) or accelerate.", metavar="NAME")
    num_processes: int = option(1, "Processes over all machines (GPUs).", metavar="N")
    num_machines: int = option(1, "Machines (multi-node needs --main-process-ip).", metavar="N")
    machine_rank: int = option(0, "Rank of this machine.", metavar="N")
    main_process_ip: str | None = option(None, "Rank-0 host for multi-node runs.", metavar="HOST")
    main_process_port: int = option(29500, "Rendezvous port of rank 0.", metavar="PORT")
    accelerate_config: str | None = option(
        None, "An accelerate config file, e.g. configs/accelerate/deepspeed_zero2.yaml.", metavar="YAML"
    )
    cpu: bool = option(False, "Run the accelerate processes on CPUs (gloo), one machine: tests and debugging.")


@dataclass(frozen=True)
class RunOptions:
    """What one training run does beyond its YAML, declared once: ``rubriq train run`` and the
    paper's ``train_rubriq.py`` (which also takes ``--max_steps``) derive their flags from it."""

    resume: bool = option(False, "Continue from the last checkpoint in output_dir.")
    max_steps: int | None = option(None, "Override the RL max_steps (>= 1).", metavar="N")


def launch_command(
    config: str | Path,
    launch: LaunchSettings = LaunchSettings(),
    resume: bool = False,
    max_steps: int | None = None,
    script: str | Path = SCRIPT,
) -> list[str]:
    """The argv that trains ``config`` under ``launch``."""
    tail = [str(script), "--rubriq_config", str(config)]
    if resume:
        tail.append("--resume")
    if max_steps is not None:
        tail += ["--max_steps", str(max_steps)]
    if launch.launcher == "python":
        if launch.num_processes != 1 or launch.num_machines != 1:
            raise ValueError("the python launcher runs one process: use --launcher accelerate")
        return [sys.executable, *tail]
    if launch.launcher != "accelerate":
        raise ValueError(f"unknown launcher {launch.launcher!r}: use python or accelerate")
    cmd = ["accelerate", "launch"]
    if launch.accelerate_config:
        cmd += ["--config_file", str(launch.accelerate_config)]
    if launch.cpu:
        if launch.num_machines != 1 or launch.accelerate_config:
            raise ValueError("--cpu runs the processes on this machine, without an accelerate config")
        # accelerate's --cpu with several processes needs MPI; torchrun (--multi_gpu) on a machine
        # without GPUs gives CPU processes on gloo
        cmd += [
            "--multi_gpu",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            str(launch.main_process_port),
        ]
    cmd += ["--num_processes", str(launch.num_processes)]
    if launch.num_machines > 1:
        if not launch.main_process_ip:
            raise ValueError("multi-node training needs --main-process-ip (the rank-0 host)")
        cmd += [
            "--num_machines",
            str(launch.num_machines),
            "--machine_rank",
            str(launch.machine_rank),
            "--main_process_ip",
            launch.main_process_ip,
            "--main_process_port",
            str(launch.main_process_port),
        ]
    return cmd + tail


def check_runnable(launch: LaunchSettings) -> None:
    """Fail with a clear message when the launch cannot work on this machine."""
    if launch.launcher != "accelerate":
        return
    if importlib.util.find_spec("accelerate") is None:
        raise RuntimeError("accelerate is not installed: pip install 'rubriq[train]'")
    cfg = Path(launch.accelerate_config) if launch.accelerate_config else None
    if cfg is not None:
        if not cfg.is_file():
            raise FileNotFoundError(f"accelerate config {cfg} not found")
        if "DEEPSPEED" in cfg.read_text(encoding="utf-8") and importlib.util.find_spec("deepspeed") is None:
            raise RuntimeError(
                f"{cfg} uses DeepSpeed, which is not installed: pip install 'rubriq[gpu]' on a CUDA machine"
            )
    try:
        import torch

        gpus = torch.cuda.device_count()
    except ImportError:
        gpus = 0
    if gpus == 0 and launch.num_processes > 1 and not launch.cpu:
        raise RuntimeError(
            f"{launch.num_processes} processes need GPUs and this machine has none; "
            "print the command with --dry-run, run them on CPUs with --cpu (and use_cpu: true "
            "in the config), or train in one process with --launcher python"
        )


def as_shell(cmd: list[str]) -> str:
    """The command as one shell-quoted line."""
    return shlex.join(cmd)
