"""Convergence study: does GRPO on the rubric improve a policy, and faster than a sparse reward?

    rubriq study convergence configs/studies/convergence_cpu.yaml

One shared SFT warm-start, then one *arm* per reward, each over several seeds, every arm from
the same checkpoint with the same prompts and the same step budget:

* ``rubric``: the paper's reward R = sum_d w_d S_d;
* ``rubric_gated``: the same with ``fidelity_gating: multiplicative``;
* ``sparse``: Sparse-GRPO (1/T(c) for a correct circuit, else 0);
* ``binary`` (``sparse_correct``): 1 for a correct circuit, else 0;
* ``none``: no RL at all: the SFT policy (the control); its policy never changes, so its value
  at every evaluated step is its step-0 evaluation (the same samples).

:func:`run` is the study, its stages in order, each a module of this package (its docstring
maps them): the data (``data.py``), the warm-start (``warm_start.py``), the pilot that filters
the training prompts (``pilot.py``), the evaluations every arm-seed gets (``evaluate.py``), the
arms (``arms.py``, one process per arm-seed with ``parallel.py``), and the summary
(``aggregate.py`` -> ``summary.py`` + ``plots.py``).  ``settings.py`` is the YAML and
``layout.py`` the files under the output folder.  The names this module always offered are
imported here, so ``from rubriq.studies.convergence import ...`` keeps working.

A study can also start from a pre-built warm-start (``warm_start_model``), evaluate further
held-out tiers beside the held-out split (``eval_tiers``, with ``primary_tier`` naming the one
``primary_metric`` is judged on), filter its training prompts, and evaluate a fixed sample of
them (``StudySettings`` documents every field; docs/studies.md shows them in use).

Everything is written as it goes, so a stopped study loses at most one arm-seed (a finished
arm-seed has ``done.json`` and is skipped; an unfinished one is restarted).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from rubriq.config import ConfigError
from rubriq.evaluation.metrics import mean_ci
from rubriq.studies import layout, units
from rubriq.studies.aggregate import aggregate, collect, correlations, time_to_target
from rubriq.studies.arms import check_arm_rubrics, run_arm
from rubriq.studies.compare import compare_arm_seeds
from rubriq.studies.data import prepare_data
from rubriq.studies.evaluate import eval_seed, held_out_metrics, step0_evaluation, study_evaluators, train_sample
from rubriq.studies.parallel import run_parallel
from rubriq.studies.pilot import arm_reward_values, filter_training_prompts
from rubriq.studies.settings import ArmSettings, StudySettings
from rubriq.studies.summary import eval_prompt_count, headline_readmes, summary_markdown, write_summary
from rubriq.studies.warm_start import prepare_warm_start, warm_start_fingerprint

log = logging.getLogger(__name__)


def run(
    config: str | Path,
    out: str | Path | None = None,
    arms: list[str] | None = None,
    seeds: list[int] | None = None,
    progress=None,
    workers: int = 1,
    summary: bool = True,
    commit: bool = False,
) -> Path:
    """Run (or resume) the study of ``config``; write and return the path of ``summary.md``.

    ``arms`` / ``seeds`` restrict this invocation (the summary covers whatever is done);
    ``progress(message)`` is called between arm-seeds.  ``workers > 1`` runs the pending
    arm-seeds that many at a time, each in its own process with ``cpus // workers`` threads
    (:func:`run_parallel`); ``summary=False`` leaves the summary to the caller (what those
    processes do, so that they never write it at the same time).  With the study's
    ``results_dir``, the units kept there are restored first (and skipped), and every arm-seed
    that finishes is kept there (:mod:`rubriq.studies.units`), with ``commit`` also committed."""
    study = StudySettings.from_yaml(config)
    out = Path(out or study.output_dir)
    unknown = sorted(set(arms or ()) - set(study.arms))
    if unknown:
        raise ConfigError(f"unknown arm(s) {unknown}; this study has {sorted(study.arms)}")
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(json.dumps(study.to_record(), indent=2, default=str))
    results = Path(study.results_dir) if study.results_dir else None
    if results is not None:
        units.restore(results, out, study)
    data = prepare_data(study, out)
    check_arm_rubrics(study, data.settings)
    warm = prepare_warm_start(study, data, out)
    data = filter_training_prompts(study, data, warm, out)
    evaluators = study_evaluators(study, data, warm)
    if results is not None:  # a unit that finished here but was not kept (a run stopped in between)
        for name in arms or study.arms:
            for seed, _ in layout.finished_arm_seeds(out, study, name):
                if not (layout.arm_dir(results, name, seed) / "done.json").is_file():
                    units.publish(out, results, study, name, seed, commit=commit)
    pending = [
        (name, seed)
        for seed in seeds or study.seeds
        for name in arms or study.arms
        if not (layout.arm_dir(out, name, seed) / "done.json").is_file()
    ]
    if workers > 1 and len(pending) > 1:
        # what every arm-seed of a seed shares is computed here, once, before the processes start
        for seed in sorted({s for _, s in pending}):
            for ev in evaluators:
                step0_evaluation(ev, warm, out, seed)

        def keep(name: str, seed: int) -> None:  # each unit kept (and committed) as its process ends
            if results is not None and (layout.arm_dir(out, name, seed) / "done.json").is_file():
                units.publish(out, results, study, name, seed, commit=commit)

        run_parallel(config, out, pending, workers, progress, on_done=keep)
        return _summaries(out, results, study, len(data.eval_rows), commit)
    for name, seed in pending:
        if progress:
            progress(f"arm {name}, seed {seed}")
        result = run_arm(study, name, seed, data.settings, warm, evaluators, out)
        log.info("arm %s seed %d: %.0f s", name, seed, result["seconds"])
        if results is not None:
            units.publish(out, results, study, name, seed, commit=commit)
        if summary:
            _summaries(out, results, study, len(data.eval_rows), commit)  # results as they come
    if not summary:
        return out / "summary.md"
    return _summaries(out, results, study, len(data.eval_rows), commit)


def _summaries(out: Path, results: Path | None, study, n_eval: int, commit: bool) -> Path:
    """The summary of ``out``, and with a ``results_dir`` the same regenerated from the kept units
    alone (committed with them when ``commit``); returns the path of ``out``'s."""
    report = write_summary(out, study, n_eval)
    if results is not None and results.is_dir():
        write_summary(results, study, n_eval)
        if commit:  # with the results READMEs whose headline table the summary rewrote
            units.git_commit(
                results, f"study summary regenerated from the kept units ({results})", also=headline_readmes(results)
            )
    return report


__all__ = [
    "ArmSettings",
    "StudySettings",
    "aggregate",
    "arm_reward_values",
    "collect",
    "compare_arm_seeds",
    "correlations",
    "eval_prompt_count",
    "eval_seed",
    "filter_training_prompts",
    "held_out_metrics",
    "mean_ci",
    "run",
    "run_arm",
    "summary_markdown",
    "time_to_target",
    "train_sample",
    "warm_start_fingerprint",
    "write_summary",
]
