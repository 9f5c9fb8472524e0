"""``rubriq train``: run a training config (here or under accelerate), write the variants."""

from __future__ import annotations

from pathlib import Path

import typer

from rubriq.cli.common import (
    check,
    command_group,
    console,
    packaged,
    reported,
)
from rubriq.options import typer_options
from rubriq.training.launch import LaunchSettings, RunOptions

train_app = command_group("train", "Train a policy (GRPO, Sparse-GRPO, Sparse-PPO, ablations).")
LAUNCHERS = ("python", "accelerate")


@train_app.command("run")
@typer_options(LaunchSettings, into="launch")
@typer_options(RunOptions, into="run")
def train_run(
    config: Path = typer.Argument(
        ..., metavar="YAML", help="Training YAML (configs/rubriq_grpo.yaml, configs/variants/...)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the config, print the command, run nothing."),
    launch: LaunchSettings = LaunchSettings(),
    run: RunOptions = RunOptions(),
) -> None:
    """Train with the entry point rubriq/training/train_rubriq.py (here or under accelerate; for
    Slurm, sbatch scripts/submit_rubriq_perlmutter.slurm)."""
    import subprocess

    from rubriq.training.launch import as_shell, check_runnable, launch_command

    check(
        launch.launcher in LAUNCHERS,
        "--launcher",
        f"unknown launcher {launch.launcher!r}; use python or accelerate (Slurm: "
        "sbatch scripts/submit_rubriq_perlmutter.slurm)",
    )
    check(launch.num_processes >= 1, "--num-processes", f"must be >= 1, got {launch.num_processes}")
    check(launch.num_machines >= 1, "--num-machines", f"must be >= 1, got {launch.num_machines}")
    check(
        0 <= launch.machine_rank < launch.num_machines,
        "--machine-rank",
        f"must be in 0..{launch.num_machines - 1}, got {launch.machine_rank}",
    )
    check(
        1 <= launch.main_process_port <= 65535, "--main-process-port", f"{launch.main_process_port} is not a TCP port"
    )
    check(run.max_steps is None or run.max_steps >= 1, "--max-steps", f"must be >= 1, got {run.max_steps}")
    config = packaged(config)
    check(config.is_file(), "YAML", f"no such file: {config}")
    check(
        launch.accelerate_config is None or Path(launch.accelerate_config).is_file(),
        "--accelerate-config",
        f"no such file: {launch.accelerate_config}",
    )
    with reported():
        cmd = launch_command(config, launch, resume=run.resume, max_steps=run.max_steps)
    from rubriq.training.config import TrainSettings

    with reported(flag=str(config)):
        settings = TrainSettings.from_yaml(config)
    if dry_run:
        console.print(
            f"config ok: {config} ({settings.algorithm}, reward {settings.reward.kind}, "
            f"model {settings.model.name_or_path}, output {settings.output_dir})",
            markup=False,
        )
        print(as_shell(cmd))
        return
    with reported():
        check_runnable(launch)
    raise typer.Exit(subprocess.call(cmd))


@train_app.command("variants")
def train_variants(
    base: Path = typer.Option(
        Path("configs/rubriq_grpo.yaml"), metavar="YAML", help="The config the variants start from."
    ),
    out: Path = typer.Option(
        Path("runs/variants"),
        metavar="DIR",
        help="Folder for the variant YAML files (the committed ones: --out configs/variants).",
    ),
    delta: float = typer.Option(0.05, metavar="STEP", help="Weight step of the sensitivity grid."),
) -> None:
    """Write Sparse-GRPO, Sparse-PPO, no-w_H/T/E and the +/-delta weight grid as YAML files."""
    from rubriq.training.variants import write_variants

    check(base.is_file(), "--base", f"no such file: {base}")
    check(0 < delta < 1, "--delta", f"must be in (0, 1), got {delta}")
    with reported():
        paths = write_variants(base, out, delta)
    console.print(f"wrote {len(paths)} variants to {out}: " + ", ".join(p.stem for p in paths), markup=False)
