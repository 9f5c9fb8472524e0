"""``rubriq study``: the studies that measure what training does."""

from __future__ import annotations

from pathlib import Path

import typer

from rubriq.cli.common import (
    check,
    command_group,
    console,
    reported,
)

study_app = command_group("study", "Studies that measure what training does (docs/studies.md).")


@study_app.command("convergence")
def study_convergence(
    config: Path = typer.Argument(..., metavar="YAML", help="Study YAML (configs/studies/convergence_cpu.yaml)."),
    out: Path | None = typer.Option(None, metavar="DIR", help="Output folder (default: the study's output_dir)."),
    arm: list[str] | None = typer.Option(None, metavar="NAME", help="Run only this arm (repeatable)."),
    seed: list[int] | None = typer.Option(None, metavar="N", help="Run only this seed (repeatable)."),
    summary_only: bool = typer.Option(False, "--summary-only", help="Rewrite the summary from finished arm-seeds."),
    workers: int = typer.Option(
        1, min=1, metavar="N", help="Run the pending arm-seeds N at a time, one process each (CPUs / N threads each)."
    ),
    no_summary: bool = typer.Option(
        False,
        "--no-summary",
        help="Do not write the summary (what the --workers processes do); finish with --summary-only.",
    ),
    commit: bool = typer.Option(
        False,
        "--commit",
        help="Commit each finished arm-seed kept in the study's results_dir (git commit -- RESULTS_DIR) as it ends.",
    ),
) -> None:
    """Rubric vs gated rubric vs sparse reward vs no RL from one warm-start, over seeds, evaluated on
    held-out targets by sampling. Resumable: finished arm-seeds are skipped."""
    from rubriq.studies import convergence
    from rubriq.studies.settings import StudySettings
    from rubriq.studies.summary import eval_prompt_count, write_summary

    check(config.is_file(), "YAML", f"no such file: {config}")
    with reported():
        if summary_only:
            study = StudySettings.from_yaml(config)
            folder = out or Path(study.output_dir)
            report = write_summary(folder, study, eval_prompt_count(folder, study))
        else:
            report = convergence.run(
                config,
                out,
                arm or None,
                seed or None,
                progress=lambda m: console.print(f"study: {m}", markup=False),
                workers=workers,
                summary=not no_summary,
                commit=commit,
            )
    if no_summary and not summary_only:
        console.print(f"done; summary not written (rubriq study convergence {config} --summary-only)", markup=False)
    else:
        console.print(f"summary: {report}", markup=False)


@study_app.command("demo")
def study_demo(
    config: Path | None = typer.Option(
        None, metavar="YAML", help="Demo settings (default: configs/demo_rewriting.yaml)."
    ),
    out: Path = typer.Option(
        Path("runs/demo"), metavar="DIR", help="Output folder (report.md, records, summary.json)."
    ),
) -> None:
    """The rewriting study's policies side by side (base, warm-start, GRPO, from the committed
    weights) on a few held-out rewrite prompts: correct-reduction rates, a verified sample with
    fewer T gates, and a few GRPO steps. `make demo` runs it."""
    from rubriq.studies.demo import DEFAULT_CONFIG, DemoSettings, run

    path = config or DEFAULT_CONFIG
    check(path.is_file(), "--config", f"no such file: {path}")
    with reported():
        settings = DemoSettings.from_yaml(path)
        report = run(settings, out, progress=lambda m: console.print(f"demo: {m}", markup=False))
    console.print(report.read_text(), markup=False)
    console.print(f"report: {report}", markup=False)


@study_app.command("sft-curve")
def study_sft_curve(
    config: Path = typer.Argument(
        ..., metavar="YAML", help="SFT-curve YAML (configs/studies/rewriting_warm_start.yaml)."
    ),
    out: Path | None = typer.Option(None, metavar="DIR", help="Output folder (default: the YAML's output_dir)."),
    table_only: bool = typer.Option(False, "--table-only", help="Rewrite curve.md and curve.png from curve.jsonl."),
    keep: Path | None = typer.Option(
        None,
        "--keep",
        metavar="DIR",
        help="After the run, copy the curve, its records and the adapter with a model card into DIR.",
    ),
    commit: bool = typer.Option(False, "--commit", help="With --keep: commit DIR (git commit -- DIR)."),
) -> None:
    """Train an SFT warm-start and measure, at set numbers of examples seen, how often it rewrites
    held-out circuits correctly with fewer T, copies them, or breaks them. Resumable."""
    from rubriq.studies import sft_curve

    check(config.is_file(), "YAML", f"no such file: {config}")
    check(keep is not None or not commit, "--commit", "commits what --keep DIR keeps: give --keep DIR")
    with reported():
        if table_only:
            curve = sft_curve.SftCurveSettings.from_yaml(config)
            report = sft_curve.write_curve(Path(out or curve.output_dir), curve)
        else:
            report = sft_curve.run(config, out, progress=lambda m: console.print(f"sft-curve: {m}", markup=False))
        if keep is not None:
            curve = sft_curve.SftCurveSettings.from_yaml(config)
            kept = sft_curve.keep(Path(out or curve.output_dir), curve, keep, str(config), commit=commit)
            console.print(f"kept: {kept}", markup=False)
    console.print(f"curve: {report}", markup=False)


@study_app.command("weights")
def study_weights(
    config: Path = typer.Argument(..., metavar="YAML", help="Study YAML (configs/studies/rewriting_cpu.yaml)."),
    arm: str = typer.Option(..., metavar="NAME", help="The arm whose trained adapter is kept."),
    seed: int = typer.Option(0, metavar="N", help="Its seed."),
    out: Path | None = typer.Option(None, metavar="DIR", help="The study folder it ran in (default: output_dir)."),
    commit: bool = typer.Option(False, "--commit", help="Commit the kept folder (git commit -- FOLDER)."),
) -> None:
    """Keep a finished arm-seed's trained adapter in the study's results_dir (weights/ARM_seedN),
    loadable by `rubriq evaluate --model` and `rubriq synthesize --model`: its base renamed to the
    committed warm-start adapter, its files' SHA-256 in SHA256SUMS."""
    from rubriq.studies.settings import StudySettings
    from rubriq.studies.weights import keep_weights

    check(config.is_file(), "YAML", f"no such file: {config}")
    with reported():
        study = StudySettings.from_yaml(config)
        check(bool(study.results_dir), "YAML", f"{config}: no results_dir to keep the weights in")
        folder = keep_weights(out or Path(study.output_dir), Path(study.results_dir), study, arm, seed, commit=commit)
    console.print(f"weights: {folder}", markup=False)


@study_app.command("rft")
def study_rft(
    config: Path = typer.Argument(..., metavar="YAML", help="RFT YAML (configs/studies/rewriting_rft.yaml)."),
    out: Path | None = typer.Option(None, metavar="DIR", help="Output folder (default: the YAML's output_dir)."),
    commit: bool = typer.Option(
        False,
        "--commit",
        help="Copy the summary, pool statistics, dataset and adapter into the YAML's results_dir and commit it.",
    ),
) -> None:
    """Rejection-sampling fine-tuning: the warm-start samples a prompt pool, its verified correct
    reductions (correct, fewer T) are kept, its adapter is trained further on them, and both are
    evaluated on held-out prompts with the same sampling seed. Resumable."""
    from rubriq.studies import rft

    check(config.is_file(), "YAML", f"no such file: {config}")
    with reported():
        report = rft.run(config, out, commit=commit, progress=lambda m: console.print(f"rft: {m}", markup=False))
    console.print(report.read_text(), markup=False)
    console.print(f"summary: {report}", markup=False)


@study_app.command("compare")
def study_compare(
    first: Path = typer.Argument(..., metavar="RUN_A", help="An arm-seed folder (OUT/arms/ARM/seedS)."),
    second: Path = typer.Argument(..., metavar="RUN_B", help="Another arm-seed folder."),
) -> None:
    """Whether two arm-seeds are the same run: every logged value per step (wall times and rates
    left out), every training completion's scores, every scored sample. Exits 1 if they differ."""
    from rubriq.studies.compare import compare_arm_seeds
    from rubriq.tables import markdown_table

    for folder in (first, second):
        check(folder.is_dir(), "RUN", f"no such folder: {folder}")
    with reported():
        result = compare_arm_seeds(first, second)
    rows = [
        [
            name,
            f"{c['rows'][0]} / {c['rows'][1]}",
            str(c["equal"]),
            "-" if c["first_difference"] is None else f"row {c['first_difference'][0]}: {c['first_difference'][1]}",
        ]
        for name, c in result.items()
    ]
    console.print("\n".join(markdown_table(["file", "rows", "equal", "first difference"], rows)), markup=False)
    if any(c["first_difference"] is not None for c in result.values()):
        raise typer.Exit(1)
