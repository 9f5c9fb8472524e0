"""Convergence study: does GRPO on the rubric improve a policy, and faster than a sparse reward?

    rubriq study convergence configs/studies/convergence_cpu.yaml

One shared SFT warm-start, then one *arm* per reward, each over several seeds, every arm from
the same checkpoint with the same prompts and the same step budget:

* ``rubric``: the paper's reward R = sum_d w_d S_d;
* ``rubric_gated``: the same with ``fidelity_gating: multiplicative``;
* ``sparse``: Sparse-GRPO (1/T(c) for a correct circuit, else 0);
* ``none``: no RL at all: the SFT policy (the control); its policy never changes, so its value
  at every evaluated step is its step-0 evaluation (the same samples).

Every arm is evaluated on the held-out split (targets never trained on: splits are by target)
at steps 0, ``eval_every``, 2 ``eval_every``, ... ``steps`` by **sampling** ``samples``
completions per prompt at the training temperature, and every evaluation is scored with the
training config's rubric (the paper's reward), one yardstick for all arms.  The evaluation
sampling seed depends on (seed, step) only, so at a given step all arms draw with the same
seed; step 0 (the SFT policy for every arm) is evaluated once per seed and shared.

Everything is written as it goes, so a stopped study loses at most one arm-seed
(a finished arm-seed has ``done.json`` and is skipped; an unfinished one is restarted)::

    OUT/data/                 the prompt splits            OUT/sft/model/   the warm-start
    OUT/sft/fingerprint.json  SHA-256 of its weights (each done.json records the one it used)
    OUT/step0/seedS.json      the shared step-0 evaluation
    OUT/arms/ARM/seedS/       metrics.jsonl (training log), evals.jsonl (one line per
                              evaluation), records_stepN.jsonl (scored samples), done.json
    OUT/per_step.csv  OUT/summary.json  OUT/summary.md  OUT/curves.png  OUT/training.png
    OUT/logs/ARM_seedS.log    each arm-seed's output when run with ``workers > 1``

Means over seeds carry 95% t-intervals (:func:`mean_ci`); time-to-target is the first
evaluated step at which the held-out ``primary_metric`` reaches ``target_value`` (by default the
correct rate and ``target_correct_rate``), both named in the study's YAML before it runs.

A study can also (the learning study, ``configs/studies/learning_cpu.yaml``):

* evaluate at chosen steps (``eval_at``) and on a fixed sample of training prompts
  (``train_eval_prompts``: learning on its own prompts vs generalization to held-out ones;
  ``evals.jsonl`` rows carry ``split``);
* filter the training prompts once before any arm trains (``filter_prompts``): the warm-start
  samples ``filter_samples`` completions per training prompt, and prompts whose group would have
  all-equal rewards under every arm's reward (always solved with the same T, or never solved
  with the same wrong score) are dropped, for every arm alike (an offline version of DAPO's
  dynamic sampling; ``OUT/filter.json`` says how many, and the zero-variance fraction of each
  arm's reward on the pilot groups, i.e. before training);
* record every training completion's five scores (``train_scores.jsonl``) for the correlation
  matrix of the dimensions and their effective number (``analysis.py``), per task family, over
  training completions and held-out samples, beside the paper's 0.31 / 3.2;
* report the rewrite gap to PyZX (``gap_closed``, ``reached_pyzx``, ``t_gap_pyzx``), C over
  correct circuits, and the smallest paired effect the design can detect
  (:func:`rubriq.studies.analysis.minimum_detectable_effect`), over seeds and over (seed,
  prompt) pairs.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rubriq.config import ConfigError, RubricConfig, from_dict, load_yaml_mapping
from rubriq.evaluation.metrics import mean_ci
from rubriq.evaluation.records import RecordLike
from rubriq.extract.files import open_record
from rubriq.tables import fmt, format_ci, markdown_table

log = logging.getLogger(__name__)

DEFAULT_ARMS = {
    "rubric": {"reward": "rubric"},
    "rubric_gated": {"reward": "rubric", "rubric": {"fidelity_gating": "multiplicative"}},
    "sparse": {"reward": "sparse_inverse_t"},
    "none": {"reward": "none"},
}
EVAL_METRICS = (
    "mean_reward",
    "correct_rate",
    "pass@k",
    "mean_t_correct",
    "wrong_rewarded_rate",
    "trivial_rate",
    "parse_rate",
    "mean_fidelity",
    "compression",
    "gap_closed",
    "reached_pyzx",
    "t_gap_pyzx",
    "rewrite_correct_rate",
    "synthesis_correct_rate",
)
"""Metrics per evaluation (``pass@k`` for k = ``samples``; the rewrite ones on prompts with a
recorded PyZX optimum, else None)."""
TRAIN_METRICS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "entropy",
    "correct_rate",
    "wrong_rewarded_rate",
    "completions/mean_length",
    "step_time",
)
"""Training-log metrics averaged over an arm-seed's steps (TRL's names and RubriQ's batch metrics)."""


@dataclass(frozen=True)
class ArmSettings:
    """One reward to train with."""

    reward: Literal["rubric", "sparse_inverse_t", "sparse_correct", "none"] = "rubric"
    """rubric: the rubric (with the overrides below); sparse_inverse_t: Sparse-GRPO (1/T if
    correct); sparse_correct: 1 if correct (the plain verifiable reward); none: no RL (control)."""
    rubric: dict = field(default_factory=dict)
    """Rubric fields that differ from the training config's (e.g. ``fidelity_gating``)."""


@dataclass(frozen=True)
class StudySettings:
    """A convergence study; YAML maps onto it one to one (``configs/studies/``)."""

    train_config: str
    """Training YAML (model, data, LoRA, SFT, GRPO settings), relative to the study file."""
    output_dir: str = "runs/studies/convergence"
    arms: dict = field(default_factory=lambda: dict(DEFAULT_ARMS))
    """Arm name -> :class:`ArmSettings` fields."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """GRPO seeds (sampling and data order); the warm-start is shared."""
    steps: int = 30
    """GRPO steps per arm-seed."""
    eval_every: int = 10
    samples: int = 4
    """Held-out completions per prompt (k of pass@k)."""
    temperature: float = 0.0
    """Held-out sampling temperature; 0: the training temperature (grpo.temperature)."""
    top_p: float = 0.0
    """0: the training top_p (grpo.top_p, else 1)."""
    max_new_tokens: int = 0
    """0: grpo.max_completion_length."""
    batch_size: int = 16
    split: str = "test"
    max_prompts: int = 0
    """Evaluate on at most this many held-out prompts (0: all)."""
    target_correct_rate: float = 0.5
    """Time-to-target threshold on the held-out correct rate (F_avg >= fidelity.correct_threshold)."""
    primary_metric: str = "correct_rate"
    """The held-out metric the study is judged on (an EVAL_METRICS name), named before it runs."""
    target_value: float | None = None
    """Time-to-target threshold on ``primary_metric`` (None: ``target_correct_rate``)."""
    eval_at: tuple[int, ...] = ()
    """Evaluated steps (0 and ``steps`` always are); (): every ``eval_every`` steps."""
    train_eval_prompts: int = 0
    """Also evaluate a fixed sample of this many training prompts at every evaluated step."""
    filter_prompts: bool = False
    """Drop training prompts whose pilot group has all-equal rewards under every arm's reward."""
    filter_samples: int = 4
    """Pilot completions per training prompt for ``filter_prompts`` (the GRPO group size)."""

    def __post_init__(self) -> None:
        if self.steps < 1 or self.eval_every < 1:
            raise ConfigError("steps and eval_every must be >= 1")
        if self.primary_metric not in EVAL_METRICS:
            raise ConfigError(f"primary_metric must be one of {', '.join(EVAL_METRICS)}, got {self.primary_metric!r}")
        if any(not 0 < s <= self.steps for s in self.eval_at):
            raise ConfigError(f"eval_at steps must lie in [1, {self.steps}], got {list(self.eval_at)}")
        if self.train_eval_prompts < 0 or self.filter_samples < 2:
            raise ConfigError("train_eval_prompts must be >= 0 and filter_samples >= 2")
        if self.samples < 2:
            raise ConfigError("samples must be >= 2: the study evaluates by sampling, not greedy decoding")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds must be distinct and not empty, got {list(self.seeds)}")
        if not self.arms:
            raise ConfigError("a study needs at least one arm")
        for name, arm in self.arms.items():
            if not isinstance(arm, ArmSettings):
                raise ConfigError(f"arm {name!r} is not an ArmSettings")

    @classmethod
    def from_yaml(cls, path: str | Path) -> StudySettings:
        path = Path(path)
        data = load_yaml_mapping(path)
        arms = data.get("arms", DEFAULT_ARMS)
        if not isinstance(arms, dict):
            raise ConfigError(f"{path}: arms must map names to settings")
        data["arms"] = {str(name): from_dict(ArmSettings, arm or {}) for name, arm in arms.items()}
        if "train_config" not in data:
            raise ConfigError(f"{path}: train_config (a training YAML) is required")
        data["train_config"] = str((path.parent / data["train_config"]).resolve())
        return from_dict(cls, data)

    def eval_steps(self) -> list[int]:
        """0, eval_every, 2 eval_every, ... and the last step (or 0, ``eval_at`` and the last step)."""
        if self.eval_at:
            return sorted({0, *self.eval_at, self.steps})
        return sorted({0, *range(self.eval_every, self.steps + 1, self.eval_every), self.steps})

    @property
    def threshold(self) -> float:
        """The time-to-target threshold on ``primary_metric``."""
        return self.target_correct_rate if self.target_value is None else float(self.target_value)


def eval_seed(seed: int, step: int) -> int:
    """Sampling seed of the held-out evaluation at ``step`` (equal for every arm)."""
    return 1_000_003 * (seed + 1) + step


# -- one evaluation -------------------------------------------------------------------------------
def held_out_metrics(
    records: Sequence[RecordLike], k: int, eps: float, t_pyzx: dict[str, int] | None = None
) -> dict[str, Any]:
    """EVAL_METRICS of scored records (see docs/metrics.md); ``t_pyzx`` maps prompt ids of small
    rewrite prompts to their PyZX optimum (the gap metrics, :func:`analysis.rewrite_gap`)."""
    from rubriq.evaluation.metrics import summarize
    from rubriq.evaluator.result import is_correct
    from rubriq.studies.analysis import family_of_spec, rewrite_gap

    s = summarize(records, eps, ks=(k,))
    t_correct = [r["result"]["t_count"] for r in records if is_correct(r["result"], 1 - eps)]
    gap = rewrite_gap(records, t_pyzx or {}, eps)
    is_rewrite = [family_of_spec(r.get("target") or "") == "rewrite" for r in records]
    rewrite = [r for r, w in zip(records, is_rewrite, strict=True) if w]
    synthesis = [r for r, w in zip(records, is_rewrite, strict=True) if not w]

    def rate(rs):
        return statistics.fmean(1.0 if is_correct(r["result"], 1 - eps) else 0.0 for r in rs) if rs else None

    return {
        "mean_reward": s["mean_reward"],
        "correct_rate": s["correct_rate"],
        "pass@k": s.get(f"pass@{k}"),
        "mean_t_correct": statistics.fmean(t_correct) if t_correct else None,
        "wrong_rewarded_rate": s["wrong_rewarded_rate"],
        "trivial_rate": s["trivial_rate"],
        "parse_rate": s["parse_rate"],
        "mean_fidelity": s["mean_fidelity"],
        "compression": s.get("compression"),
        "gap_closed": gap["gap_closed"],
        "reached_pyzx": gap["reached_pyzx"],
        "t_gap_pyzx": gap["t_gap_pyzx"],
        "rewrite_correct_rate": rate(rewrite),
        "synthesis_correct_rate": rate(synthesis),
        "completions": s["completions"],
    }


class _Evaluator:
    """Samples and scores a policy on a fixed set of rows (the held-out split, or the sample of
    training prompts) without disturbing training's RNG, generating the way GRPO does (shared
    prefill, completions ended after their code block)."""

    def __init__(self, study: StudySettings, settings, tokenizer, rows: list[dict], split: str = "test") -> None:
        grpo = settings.grpo
        self.study, self.tokenizer, self.rows, self.split = study, tokenizer, rows, split
        self.end_after_code_block = settings.end_after_code_block
        self.t_pyzx = {r["id"]: int(r["t_pyzx"]) for r in rows if r.get("t_pyzx") is not None}
        self.rubric: RubricConfig = settings.rubric
        self.eps = 1 - settings.rubric.fidelity.correct_threshold
        self.temperature = study.temperature or float(grpo.get("temperature", 1.0))
        self.top_p = study.top_p or float(grpo.get("top_p", 1.0))
        self.max_new_tokens = study.max_new_tokens or int(grpo.get("max_completion_length", 256))

    def __call__(self, model, seed: int, step: int, records_path: Path | None = None) -> dict[str, Any]:
        import torch

        from rubriq.evaluation.sampling import generate, save_records, score
        from rubriq.training.generation import install_prefix_generate

        install_prefix_generate(model, self.tokenizer, self.end_after_code_block)  # idempotent
        state, training = torch.random.get_rng_state(), model.training
        start = time.perf_counter()
        try:
            records = generate(
                model,
                self.tokenizer,
                self.rows,
                samples=self.study.samples,
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                batch_size=self.study.batch_size,
                seed=eval_seed(seed, step) + (0 if self.split == "test" else 7),
                progress=False,
            )
        finally:
            torch.random.set_rng_state(state)
            model.train(training)
        scored = score(records, self.rubric)
        if records_path is not None:
            save_records(scored, records_path)
        return {
            "step": step,
            "split": self.split,
            **held_out_metrics(scored, self.study.samples, self.eps, self.t_pyzx),
            "eval_seconds": time.perf_counter() - start,
        }


# -- the study ------------------------------------------------------------------------------------
def _append(path: Path, row: dict) -> None:
    from rubriq.training.callbacks import append_jsonl

    path.parent.mkdir(parents=True, exist_ok=True)
    append_jsonl(path, row)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _prepare(study: StudySettings, out: Path):
    """Training settings rooted in ``out``, the data, the shared warm-start on disk and a loader
    of it (in the policy's precision, as GRPO runs it)."""
    from rubriq.training.config import TrainSettings
    from rubriq.training.models import EMBEDDED, load_model, load_tokenizer, prepare_embedded, to_policy_precision
    from rubriq.training.train_rubriq import load_base, load_rows, warm_start

    settings = TrainSettings.from_yaml(study.train_config)
    if settings.algorithm != "grpo":
        raise ConfigError(f"{study.train_config}: the convergence study compares GRPO rewards (algorithm: grpo)")
    settings = dataclasses.replace(
        settings, output_dir=str(out), data=dataclasses.replace(settings.data, dataset=str(out / "data"))
    )
    if settings.model.name_or_path == EMBEDDED and not settings.model.tiny:
        prepare_embedded()
    train_rows = load_rows(settings)
    eval_rows = load_rows(settings, study.split)
    if study.max_prompts:
        eval_rows = eval_rows[: study.max_prompts]
    if not eval_rows:
        raise ConfigError(f"the {study.split!r} split of {out / 'data'} is empty: nothing held out to evaluate on")
    sft_model = out / "sft" / "model"
    trained = not (sft_model / "config.json").is_file()
    if trained:
        tokenizer, model = load_base(settings)
        if settings.sft.enabled:
            log.info("SFT warm-start on %d training prompts", len(train_rows))
            model = warm_start(settings, tokenizer, model)
        else:
            model.save_pretrained(sft_model)
            tokenizer.save_pretrained(sft_model)
    warm_start_fingerprint(out, trained_here=trained)
    tokenizer = load_tokenizer(settings.model.name_or_path)

    def load_sft():
        return to_policy_precision(load_model(str(sft_model)), settings.model.precision)

    return settings, tokenizer, train_rows, eval_rows, load_sft


def warm_start_fingerprint(out: Path, trained_here: bool = False) -> dict:
    """``OUT/sft/fingerprint.json``: the SHA-256 of the warm-start's weights and the CPU that
    trained it.  Every finished arm-seed records the hash (``done.json``), so a study whose
    warm-start was rebuilt (a new machine: bf16 training on another CPU need not give the same
    weights) says which arm-seeds trained from which; the summary lists them.  The recorded
    file is kept only while it names the weights in ``OUT/sft/model`` (or no weights are
    there, as in committed results): a run folder restored from results and given a rebuilt
    warm-start gets the new model's fingerprint, with a warning, not the old one's."""
    import hashlib
    import platform

    path = out / "sft" / "fingerprint.json"
    weights = sorted((out / "sft" / "model").glob("*.safetensors"))
    recorded = json.loads(path.read_text()) if path.is_file() else None
    if recorded is not None and not weights:
        return recorded
    digest = hashlib.sha256()
    for file in weights:
        with open(file, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 24), b""):
                digest.update(chunk)
    if recorded is not None:
        if recorded.get("sha256") == digest.hexdigest():
            return recorded
        log.warning(
            "%s names warm-start %s, but the weights in %s are %s (the warm-start was rebuilt): recording the new one",
            path,
            str(recorded.get("sha256"))[:12],
            out / "sft" / "model",
            digest.hexdigest()[:12],
        )
    cpu = platform.processor() or platform.machine()
    try:
        names = [x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("model name")]
        cpu = names[0].split(":", 1)[1].strip() if names else cpu
    except OSError:
        pass
    info = {
        "sha256": digest.hexdigest(),
        "trained_on": cpu if trained_here else None,  # None: the model was there before the fingerprint
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path.write_text(json.dumps(info, indent=2))
    return info


def arm_reward_values(results: list, arm: ArmSettings, scorer_for_arm) -> list[float]:
    """Each result's reward under ``arm`` (the arm's own training reward): the rubric (re-scored
    by ``scorer_for_arm`` when the arm changes rubric settings), 1/T or 1 if correct, else 0."""
    from rubriq.evaluator.result import is_correct

    if arm.reward == "rubric":
        return [float(r.reward) for r in scorer_for_arm(arm)]
    out = []
    for r in results:
        ok = is_correct(r)
        if arm.reward == "sparse_correct":
            out.append(1.0 if ok else 0.0)
        else:
            out.append(0.0 if not ok or r.t_count is None else (1.0 if r.t_count == 0 else 1.0 / r.t_count))
    return out


def filter_training_prompts(
    study: StudySettings, settings, tokenizer, load_sft, out: Path, train_rows: list[dict], eval_rows: list[dict]
) -> tuple[Any, list[dict]]:
    """The training settings and rows every arm trains on: with ``filter_prompts``, the prompts
    whose pilot group (``filter_samples`` completions of the warm-start at the training
    temperature) has unequal rewards under at least one arm's reward; ``OUT/filter.json`` records
    the decision and, per arm, the fraction of zero-variance groups on the pilot (before
    training).  Computed once and reused on resume."""
    if not study.filter_prompts:
        return settings, train_rows
    from rubriq.data.prompts import save_splits

    path = out / "filter.json"
    if not path.is_file():
        info = _pilot(study, settings, tokenizer, load_sft, train_rows)
        path.write_text(json.dumps(info, indent=2))
    info = json.loads(path.read_text())
    kept_ids = set(info["kept"])
    kept = [r for r in train_rows if r["id"] in kept_ids]
    if not kept:
        raise ConfigError(
            f"{path}: no training prompt gives a reward signal on the pilot (every group has equal rewards "
            "under every arm): nothing to train on; a stronger warm-start or other prompts are needed"
        )
    folder = out / "data_filtered"
    if not (folder / "train.jsonl").is_file():
        save_splits({"train": kept, "validation": [], "test": eval_rows}, folder)
    log.info("difficulty filter: %d of %d training prompts kept (%s)", len(kept), len(train_rows), path)
    return dataclasses.replace(settings, data=dataclasses.replace(settings.data, dataset=str(folder))), kept


def _pilot(study: StudySettings, settings, tokenizer, load_sft, rows: list[dict]) -> dict:
    from rubriq.config import RubricConfig
    from rubriq.evaluation.sampling import generate
    from rubriq.evaluator.batch import BatchScorer
    from rubriq.training.config import deep_merge
    from rubriq.training.generation import install_prefix_generate

    grpo = settings.grpo
    model = install_prefix_generate(load_sft(), tokenizer, settings.end_after_code_block)
    records = generate(
        model,
        tokenizer,
        rows,
        samples=study.filter_samples,
        max_new_tokens=int(grpo.get("max_completion_length", 256)),
        temperature=float(grpo.get("temperature", 1.0)),
        top_p=float(grpo.get("top_p", 1.0)),
        batch_size=study.batch_size,
        seed=4242,
        progress=False,
    )
    texts = [r.text for r in records]
    specs: list[str | dict] = [r.target or "" for r in records]
    with BatchScorer(settings.rubric) as base:
        results = base.results(texts, specs)

    def rescored(arm: ArmSettings) -> list:
        if not arm.rubric:
            return results
        config = RubricConfig.from_dict(deep_merge(dataclasses.asdict(settings.rubric), arm.rubric))
        with BatchScorer(config) as scorer:
            return scorer.results(texts, specs)

    arms = {name: arm for name, arm in study.arms.items() if arm.reward != "none"}
    rewards = {name: arm_reward_values(results, arm, rescored) for name, arm in arms.items()}
    n = study.filter_samples
    ids = [r["id"] for r in rows]
    flat: dict[str, list[bool]] = {}
    for name, values in rewards.items():
        flat[name] = [statistics.pstdev(values[i * n : (i + 1) * n]) <= 1e-12 for i in range(len(rows))]
    kept = [ids[i] for i in range(len(rows)) if not all(flat[name][i] for name in flat)] if flat else ids
    from rubriq.evaluator.result import is_correct

    solved = [
        statistics.fmean(1.0 if is_correct(r) else 0.0 for r in results[i * n : (i + 1) * n]) for i in range(len(rows))
    ]
    kept_set = set(kept)
    return {
        "samples_per_prompt": n,
        "prompts": len(rows),
        "kept_prompts": len(kept),
        "kept": kept,
        "zero_variance_before_filter": {name: statistics.fmean(v) for name, v in flat.items()},
        "zero_variance_after_filter": {
            name: statistics.fmean(f for f, i in zip(v, ids, strict=True) if i in kept_set) if kept else None
            for name, v in flat.items()
        },
        "solve_rate_mean": statistics.fmean(solved) if solved else None,
        "solve_rate_quartiles": statistics.quantiles(solved, n=4) if len(solved) > 1 else solved,
        "solved_20_70": statistics.fmean(1.0 if 0.2 <= s <= 0.7 else 0.0 for s in solved) if solved else None,
    }


def train_sample(study: StudySettings, rows: list[dict]) -> list[dict]:
    """The fixed sample of ``train_eval_prompts`` training prompts (the same for every arm and seed)."""
    import numpy as np

    if not study.train_eval_prompts:
        return []
    order = np.random.default_rng(20261201).permutation(len(rows))
    return [rows[i] for i in sorted(order[: study.train_eval_prompts])]


def _arm_settings(settings, arm: ArmSettings, seed: int, steps: int, arm_dir: Path):
    from rubriq.training.config import deep_merge

    rubric = RubricConfig.from_dict(deep_merge(dataclasses.asdict(settings.rubric), arm.rubric))
    grpo = {**settings.grpo, "seed": seed, "max_steps": steps, "save_strategy": "no", "logging_steps": 1}
    return dataclasses.replace(
        settings,
        output_dir=str(arm_dir),
        rubric=rubric,
        grpo=grpo,
        reward=dataclasses.replace(settings.reward, kind=arm.reward),
        sft=dataclasses.replace(settings.sft, enabled=False),
    )


def _step0(study: StudySettings, evaluate: _Evaluator, load_sft, out: Path, seed: int) -> dict:
    prefix = "" if evaluate.split == "test" else "train_"
    path = out / "step0" / f"{prefix}seed{seed}.json"
    if path.is_file():
        return json.loads(path.read_text())
    row = evaluate(load_sft(), seed, 0, out / "step0" / f"{prefix}records_seed{seed}.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row, indent=2))
    return row


def run_arm(
    study: StudySettings,
    name: str,
    seed: int,
    settings,
    tokenizer,
    evaluate: _Evaluator,
    load_sft,
    out: Path,
    train_evaluate: _Evaluator | None = None,
) -> dict:
    """Train (or, for the control, only re-sample) one arm with one seed; return its done.json."""
    arm = study.arms[name]
    arm_dir = out / "arms" / name / f"seed{seed}"
    done = arm_dir / "done.json"
    if done.is_file():
        return json.loads(done.read_text())
    for stale in ("metrics.jsonl", "evals.jsonl", "train_scores.jsonl"):
        (arm_dir / stale).unlink(missing_ok=True)
    arm_dir.mkdir(parents=True, exist_ok=True)
    evals = arm_dir / "evals.jsonl"
    evaluators = [e for e in (evaluate, train_evaluate) if e is not None]
    for ev in evaluators:
        _append(evals, {**_step0(study, ev, load_sft, out, seed), "simulations": 0})
    start = time.perf_counter()
    later = [s for s in study.eval_steps() if s > 0]
    simulations = 0
    if arm.reward == "none":
        # the control's policy never changes: its value at every step is its step-0 evaluation
        # (the same samples; re-sampling would only add draws of the same policy)
        for ev in evaluators:
            prefix = "" if ev.split == "test" else "train_"
            step0 = json.loads((out / "step0" / f"{prefix}seed{seed}.json").read_text())
            for step in later:
                _append(evals, {**step0, "step": step, "simulations": 0, "eval_seconds": 0.0})
    else:
        from transformers import TrainerCallback

        from rubriq.evaluator.result import is_correct
        from rubriq.studies.analysis import family_of_spec
        from rubriq.training.rewards import RubricRewards
        from rubriq.training.train_rubriq import build

        arm_cfg = _arm_settings(settings, arm, seed, study.steps, arm_dir)
        rewards = RubricRewards(arm_cfg.rubric, workers=arm_cfg.reward.workers)
        batches = [0]

        def record_batch(results, targets, prompts) -> None:
            batches[0] += 1
            with open_record(arm_dir / "train_scores.jsonl", "a") as fh:  # 0600: completions and rewards
                for r, t in zip(results, targets, strict=True):
                    row = {
                        "batch": batches[0],
                        "family": family_of_spec(t),
                        "scores": r.scores,
                        "reward": r.reward,
                        "correct": is_correct(r),
                        "t_count": r.t_count,
                        "error_type": r.error_type,
                    }
                    fh.write(json.dumps(row) + "\n")

        rewards.on_batch = record_batch

        class HeldOutEval(TrainerCallback):
            def on_step_end(self, args, state, control, model=None, **kwargs):
                if state.global_step in later:
                    for ev in evaluators:
                        prefix = "" if ev.split == "test" else "train_"
                        row = ev(
                            model, seed, state.global_step, arm_dir / f"{prefix}records_step{state.global_step}.jsonl"
                        )
                        _append(evals, {**row, "simulations": rewards.stats["evaluated"]})
                        log.info(
                            "%s seed %d step %d (%s): correct %.3f, reward %.3f, %s %s",
                            name,
                            seed,
                            state.global_step,
                            ev.split,
                            row["correct_rate"],
                            row["mean_reward"],
                            study.primary_metric,
                            fmt(row.get(study.primary_metric)),
                        )

        trainer = build(arm_cfg, policy=(tokenizer, load_sft()), rewards=rewards, callbacks=[HeldOutEval()])
        trainer.train()
        trainer.save_model(str(arm_dir / "final"))  # the policy (LoRA adapter), for `rubriq evaluate` / the leaderboard
        simulations = int(rewards.stats["evaluated"])
        rewards.close()
    result = {
        "arm": name,
        "seed": seed,
        "warm_start_sha256": warm_start_fingerprint(out)["sha256"],
        "seconds": time.perf_counter() - start,
        "simulations": simulations,
        "steps": study.steps if arm.reward != "none" else 0,
    }
    done.write_text(json.dumps(result, indent=2))
    return result


def run(
    config: str | Path,
    out: str | Path | None = None,
    arms: list[str] | None = None,
    seeds: list[int] | None = None,
    progress=None,
    workers: int = 1,
    summary: bool = True,
) -> Path:
    """Run (or resume) the study of ``config``; write and return the path of ``summary.md``.

    ``arms`` / ``seeds`` restrict this invocation (the summary covers whatever is done);
    ``progress(message)`` is called between arm-seeds.  ``workers > 1`` runs the pending
    arm-seeds that many at a time, each in its own process with ``cpus // workers`` threads
    (:func:`run_parallel`); ``summary=False`` leaves the summary to the caller (what those
    processes do, so that they never write it at the same time)."""
    study = StudySettings.from_yaml(config)
    out = Path(out or study.output_dir)
    unknown = sorted(set(arms or ()) - set(study.arms))
    if unknown:
        raise ConfigError(f"unknown arm(s) {unknown}; this study has {sorted(study.arms)}")
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(json.dumps(dataclasses.asdict(study), indent=2, default=str))
    settings, tokenizer, train_rows, eval_rows, load_sft = _prepare(study, out)
    settings, train_rows = filter_training_prompts(study, settings, tokenizer, load_sft, out, train_rows, eval_rows)
    evaluate = _Evaluator(study, settings, tokenizer, eval_rows)
    sample = train_sample(study, train_rows)
    train_evaluate = _Evaluator(study, settings, tokenizer, sample, split="train") if sample else None
    pending = [
        (name, seed)
        for seed in seeds or study.seeds
        for name in arms or study.arms
        if not (out / "arms" / name / f"seed{seed}" / "done.json").is_file()
    ]
    if workers > 1 and len(pending) > 1:
        # what every arm-seed of a seed shares is computed here, once, before the processes start
        for seed in sorted({s for _, s in pending}):
            for ev in (e for e in (evaluate, train_evaluate) if e is not None):
                _step0(study, ev, load_sft, out, seed)
        run_parallel(config, out, pending, workers, progress)
        return write_summary(out, study, len(eval_rows))
    for name, seed in pending:
        if progress:
            progress(f"arm {name}, seed {seed}")
        result = run_arm(study, name, seed, settings, tokenizer, evaluate, load_sft, out, train_evaluate)
        log.info("arm %s seed %d: %.0f s", name, seed, result["seconds"])
        if summary:
            write_summary(out, study, len(eval_rows))  # results as they come
    if not summary:
        return out / "summary.md"
    return write_summary(out, study, len(eval_rows))


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


def run_parallel(config: str | Path, out: Path, pending: list[tuple[str, int]], workers: int, progress=None) -> None:
    """Run the (arm, seed) pairs of ``pending`` ``workers`` at a time, each as its own
    ``rubriq study convergence --arm A --seed S --no-summary`` process with ``cpus // workers``
    threads (the thread variables of :data:`THREAD_VARIABLES`), its output in
    ``OUT/logs/ARM_seedS.log``.  On a small CPU this is faster than one arm-seed after another:
    a 135M model's small matrix products do not keep two threads busy, so on 2 cores two
    one-thread arm-seeds each took 19 s per GRPO step against 17 s for one two-thread arm-seed
    (docs/studies.md).  A failed arm-seed does not stop the others; the call then raises, naming
    each failure and its log.  If this call is interrupted, the running processes are stopped
    (their arm-seeds restart on the next run)."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = max(1, cpus // workers)
    env = {**os.environ, **{v: str(threads) for v in THREAD_VARIABLES}}
    (out / "logs").mkdir(parents=True, exist_ok=True)
    queue, failed = list(pending), list[str]()
    running: list[tuple[Any, str, int, Path]] = []
    try:
        _run_queue(config, out, queue, running, failed, workers, threads, env, progress)
    finally:
        for proc, *_ in running:  # only on an interruption: a finished queue leaves none running
            proc.terminate()
        for proc, *_ in running:
            proc.wait(timeout=30)
    if failed:
        raise RuntimeError("arm-seeds failed: " + "; ".join(failed))


def _run_queue(
    config: str | Path,
    out: Path,
    queue: list[tuple[str, int]],
    running: list[tuple[Any, str, int, Path]],
    failed: list[str],
    workers: int,
    threads: int,
    env: dict[str, str],
    progress=None,
) -> None:
    """:func:`run_parallel`'s loop: start processes from ``queue`` while fewer than ``workers``
    run, collect the finished ones (``running`` and ``failed`` are the caller's, so that it can
    stop what still runs if this is interrupted)."""
    import subprocess
    import sys

    while queue or running:
        while queue and len(running) < workers:
            name, seed = queue.pop(0)
            log_path = out / "logs" / f"{name}_seed{seed}.log"
            cmd = [sys.executable, "-m", "rubriq.cli", "study", "convergence", str(config), "--out", str(out)]
            cmd += ["--arm", name, "--seed", str(seed), "--no-summary"]
            if progress:
                progress(f"arm {name}, seed {seed} ({threads} thread(s); log {log_path})")
            with open_record(log_path, "w") as fh:  # 0600, like the records it logs about
                proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)  # noqa: S603 (our own CLI)
            running.append((proc, name, seed, log_path))
        time.sleep(0.2)
        for item in [r for r in running if r[0].poll() is not None]:
            running.remove(item)
            proc, name, seed, log_path = item
            if proc.returncode:
                failed.append(f"{name} seed {seed} (exit {proc.returncode}; see {log_path})")
            else:
                log.info("arm %s seed %d: done (%s)", name, seed, log_path)


# -- aggregation ----------------------------------------------------------------------------------
def finished_arm_seeds(out: Path, study: StudySettings, name: str) -> list[tuple[int, Path]]:
    """(seed, folder) of the arm's finished arm-seeds (``done.json`` written): every table and plot
    reads only these, so a stopped arm-seed's partial files never enter them."""
    dirs = [(seed, out / "arms" / name / f"seed{seed}") for seed in study.seeds]
    return [(seed, d) for seed, d in dirs if (d / "done.json").is_file()]


def collect(out: Path, study: StudySettings) -> list[dict]:
    """One row per (arm, seed, evaluated step, split) of the finished arm-seeds, with the
    arm-seed's training-log means (TRAIN_METRICS, prefixed ``train/``) and seconds."""
    rows = []
    for name in study.arms:
        for seed, arm_dir in finished_arm_seeds(out, study, name):
            done = json.loads((arm_dir / "done.json").read_text())
            logged = [r for r in _read_jsonl(arm_dir / "metrics.jsonl") if "train_runtime" not in r]
            train = {}
            for key in (*TRAIN_METRICS, "dynamic_sampling/skipped_groups"):
                values = [r[key] for r in logged if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
                train[f"train/{key}"] = statistics.fmean(values) if values else None
            for ev in _read_jsonl(arm_dir / "evals.jsonl"):
                rows.append(
                    {
                        "arm": name,
                        "seed": seed,
                        "split": ev.get("split", "test"),
                        **{k: ev.get(k) for k in ("step", *EVAL_METRICS)},
                        "simulations": ev.get("simulations"),
                        **train,
                        "arm_seconds": done["seconds"],
                        "warm_start": done.get("warm_start_sha256") or "not recorded",
                    }
                )
    return rows


def time_to_target(rows: list[dict], threshold: float, metric: str = "correct_rate") -> int | None:
    """First evaluated step whose ``metric`` reaches ``threshold`` (rows of one arm-seed).

    >>> time_to_target([{"step": 0, "correct_rate": 0.1}, {"step": 10, "correct_rate": 0.6}], 0.5)
    10
    """
    hits = [r["step"] for r in sorted(rows, key=lambda r: r["step"]) if (r.get(metric) or 0) >= threshold]
    return hits[0] if hits else None


DIFFERENCE_METRICS = ("correct_rate", "mean_reward", "pass@k", "wrong_rewarded_rate", "gap_closed", "compression")


def _pairs(names) -> list[tuple[str, str]]:
    pairs = [(a, "none") for a in names if a != "none"]
    for a in ("rubric", "rubric_gated", "sparse"):
        if a in names and "binary" in names:
            pairs.append((a, "binary"))
    pairs += [("rubric", "sparse"), ("rubric_gated", "sparse"), ("rubric_gated", "rubric")]
    return [(a, b) for a, b in pairs if a in names and b in names]


def aggregate(rows: list[dict], study: StudySettings) -> dict[str, Any]:
    """Means and 95% intervals over seeds per arm and step (held-out, and the training-prompt
    sample as ``train_per_step``); time-to-target on the primary metric; paired differences of
    the final-step metrics (same seed) with the smallest effect the seeds can detect."""
    from rubriq.studies.analysis import minimum_detectable_effect

    arms: dict[str, Any] = {}
    test = [r for r in rows if r.get("split", "test") == "test"]
    final_step = max((r["step"] for r in test), default=0)
    metric = study.primary_metric
    for name in study.arms:
        mine = [r for r in test if r["arm"] == name]
        if not mine:
            continue
        seeds = sorted({r["seed"] for r in mine})
        per_step, train_per_step = {}, {}
        for step in sorted({r["step"] for r in mine}):
            at = [r for r in mine if r["step"] == step]
            per_step[step] = {m: mean_ci([r.get(m) for r in at]) for m in (*EVAL_METRICS, "simulations")}
            at_train = [r for r in rows if r["arm"] == name and r.get("split") == "train" and r["step"] == step]
            if at_train:
                train_per_step[step] = {m: mean_ci([r.get(m) for r in at_train]) for m in EVAL_METRICS}
        ttt = [time_to_target([r for r in mine if r["seed"] == s], study.threshold, metric) for s in seeds]
        first = {s: next(r for r in mine if r["seed"] == s) for s in seeds}
        arms[name] = {
            "seeds": seeds,
            "per_step": per_step,
            "train_per_step": train_per_step,
            "time_to_target": ttt,
            "simulations_to_target": [
                next(
                    (
                        r["simulations"]
                        for r in sorted(mine, key=lambda r: r["step"])
                        if r["seed"] == s and r["step"] == t
                    ),
                    None,
                )
                if t is not None
                else None
                for s, t in zip(seeds, ttt, strict=True)
            ],
            "seconds_per_seed": mean_ci([first[s]["arm_seconds"] for s in seeds]),
            "train": {k: mean_ci([first[s][k] for s in seeds]) for k in first[seeds[0]] if k.startswith("train/")},
        }
    diffs = {}
    start = {(r["arm"], r["seed"]): r.get("warm_start", "not recorded") for r in test}
    for a, b in _pairs(list(arms)):
        common = sorted(set(arms[a]["seeds"]) & set(arms[b]["seeds"]))
        out: dict[str, Any] = {}
        for m in dict.fromkeys((*DIFFERENCE_METRICS, metric)):
            values = []
            for s in common:
                va = [r.get(m) for r in test if r["arm"] == a and r["seed"] == s and r["step"] == final_step]
                vb = [r.get(m) for r in test if r["arm"] == b and r["seed"] == s and r["step"] == final_step]
                if va and vb and va[0] is not None and vb[0] is not None:
                    values.append(va[0] - vb[0])
            out[m] = mean_ci(values)
            out[f"mde/{m}"] = minimum_detectable_effect(values)
        # a pair of arm-seeds that trained from two warm-starts (a rebuilt one) differs by more
        # than the reward: say which seeds are matched ("not recorded" counts as one warm-start)
        same = [s for s in common if start[(a, s)] == start[(b, s)]]
        diffs[f"{a} - {b}"] = {"seeds": common, "same_warm_start": same, "step": final_step, **out}
    return {"final_step": final_step, "arms": arms, "differences": diffs}


def correlations(out: Path, study: StudySettings, final_step: int) -> dict[str, Any]:
    """The five dimensions' correlation and effective number (``analysis.dimension_correlation``)
    per arm over its finished arm-seeds' training completions (every seed, per task family and all) and over the
    held-out samples at the final step (and at step 0, shared)."""
    from rubriq.studies.analysis import dimension_correlation, family_of_spec

    result: dict[str, Any] = {"train": {}, "held_out": {}}
    for name in study.arms:
        finished = [arm_dir for _, arm_dir in finished_arm_seeds(out, study, name)]
        scored = []
        for arm_dir in finished:
            scored += _read_jsonl(arm_dir / "train_scores.jsonl")
        parsed = [r for r in scored if r.get("error_type") is None]
        if parsed:
            fams = sorted({r["family"] for r in parsed})
            result["train"][name] = {
                "all": dimension_correlation([r["scores"] for r in parsed]),
                **{f: dimension_correlation([r["scores"] for r in parsed if r["family"] == f]) for f in fams},
            }
        held = []
        for arm_dir in finished:
            held += _read_jsonl(arm_dir / f"records_step{final_step}.jsonl")
        if name == "none" or not held:
            continue
        result["held_out"][name] = _by_family(held, dimension_correlation, family_of_spec)
    step0 = []
    for seed in study.seeds:
        step0 += _read_jsonl(out / "step0" / f"records_seed{seed}.jsonl")
    if step0:
        result["held_out"]["step 0 (warm-start)"] = _by_family(step0, dimension_correlation, family_of_spec)
    return result


def _by_family(records: list[dict], corr, family_of) -> dict[str, Any]:
    parsed = [r for r in records if (r.get("result") or {}).get("error_type") is None and r.get("result")]
    fams = sorted({"rewrite" if family_of(r.get("target") or "") == "rewrite" else "synthesis" for r in parsed})
    out = {"all": corr([r["result"]["scores"] for r in parsed])}
    for f in fams:
        out[f] = corr(
            [
                r["result"]["scores"]
                for r in parsed
                if ("rewrite" if family_of(r.get("target") or "") == "rewrite" else "synthesis") == f
            ]
        )
    return out


def paired_from_step0(out: Path, study: StudySettings, final_step: int) -> dict[str, Any]:
    """Per finished arm-seed (the control left out: its later steps are its step 0) and split:
    the final step's change from step 0 on the same prompts (``analysis.paired_change``)."""
    from rubriq.data.prompts import load_split
    from rubriq.studies.analysis import paired_change, rewrite_copies

    eps = 1 - RubricConfig().fidelity.correct_threshold  # the studies' configs keep the default 0.99
    rows: list[dict] = []
    for split in ("test", "train"):
        try:
            rows += load_split(out / "data", split)
        except (OSError, ValueError):
            pass
    t_pyzx = {str(r["id"]): int(r["t_pyzx"]) for r in rows if r.get("t_pyzx") is not None}
    found: dict[str, Any] = {}
    for name, arm in study.arms.items():
        if arm.reward == "none":
            continue
        for seed, arm_dir in finished_arm_seeds(out, study, name):
            for split, prefix in (("test", ""), ("train", "train_")):
                before = _read_jsonl(out / "step0" / f"{prefix}records_seed{seed}.jsonl")
                after = _read_jsonl(arm_dir / f"{prefix}records_step{final_step}.jsonl")
                if before and after:
                    change = paired_change(before, after, t_pyzx, eps)
                    prompts = len({r.get("prompt_id") for r in after})
                    copies = {"step0": rewrite_copies(before, eps), "final": rewrite_copies(after, eps)}
                    found.setdefault(name, {}).setdefault(str(seed), {})[split] = {
                        **change,
                        "prompts": prompts,
                        "rewrite_copies": copies,
                    }
    return found


def eval_prompt_count(out: Path, study: StudySettings) -> int:
    """The number of held-out prompts each evaluation samples: from ``OUT/data`` (the study's
    split), else, in a committed results folder (no data), from its ``summary.json``."""
    split = out / "data" / f"{study.split}.jsonl"
    if split.is_file():
        n = sum(1 for line in split.read_text(encoding="utf-8").splitlines() if line.strip())
        return min(n, study.max_prompts) if study.max_prompts else n
    written = out / "summary.json"
    if written.is_file():
        return int(json.loads(written.read_text())["eval_prompts"])
    raise ConfigError(
        f"{out}: neither {split} nor summary.json to count the held-out prompts from; run the study "
        "(without --summary-only) to write its data"
    )


def write_summary(out: Path, study: StudySettings, eval_prompts: int) -> Path:
    """per_step.csv, summary.json, summary.md and the plots, from whatever arm-seeds are done."""
    rows = collect(out, study)
    if not rows:
        raise RuntimeError(f"no finished arm-seed under {out / 'arms'}")
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(out / "per_step.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    agg = aggregate(rows, study)
    agg["paired_from_step0"] = paired_from_step0(out, study, agg["final_step"])
    corr = correlations(out, study, agg["final_step"])
    filtered = json.loads((out / "filter.json").read_text()) if (out / "filter.json").is_file() else None
    train_prompts = study.train_eval_prompts
    summary = {
        "study": dataclasses.asdict(study),
        "eval_prompts": eval_prompts,
        "train_eval_prompts": train_prompts,
        "filter": {k: v for k, v in (filtered or {}).items() if k != "kept"},
        "correlations": corr,
        **agg,
        "warm_starts": warm_starts(out, study),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    from rubriq.studies import plots

    plots.curves(agg, out / "curves.png", study)
    if any(a["train_per_step"] for a in agg["arms"].values()):
        plots.curves(agg, out / "train_curves.png", study, key="train_per_step")
    plots.training(out, study, out / "training.png")
    text = summary_markdown(study, agg, corr, filtered, eval_prompts, train_prompts, summary["warm_starts"])
    (out / "summary.md").write_text(text)
    return out / "summary.md"


def warm_starts(out: Path, study: StudySettings) -> dict[str, list[str]]:
    """Finished trained arm-seeds ("ARM sS") by the SHA-256 of the warm-start they trained from
    (``done.json``; "not recorded" for arm-seeds that ran before the field existed)."""
    found: dict[str, list[str]] = {}
    for name, arm in study.arms.items():
        if arm.reward == "none":
            continue
        for seed, arm_dir in finished_arm_seeds(out, study, name):
            sha = json.loads((arm_dir / "done.json").read_text()).get("warm_start_sha256") or "not recorded"
            found.setdefault(sha, []).append(f"{name} s{seed}")
    return found


def summary_markdown(
    study: StudySettings,
    agg: dict,
    corr: dict,
    filtered,
    eval_prompts: int,
    train_prompts: int,
    starts: dict[str, list[str]] | None = None,
) -> str:
    """The study's tables (summary.md)."""
    k, last, metric = study.samples, agg["final_step"], study.primary_metric
    lines = [
        f"# Convergence study ({', '.join(agg['arms'])})",
        "",
        f"{eval_prompts} held-out prompts x {k} samples; {len(study.seeds)} seeds; {study.steps} GRPO steps. "
        "Means over seeds with 95% t-intervals. Primary metric (named before the run): held-out "
        f"`{metric}`; time-to-target threshold {study.threshold}.",
        "",
        f"## Held-out metrics at step {last}",
        "",
    ]

    def at_last(a: dict, key: str = "per_step") -> dict:
        per = a[key]
        return per.get(last) or per[max(per)]

    cols = ["correct_rate", "mean_reward", "pass@k", "gap_closed", "reached_pyzx", "compression", "wrong_rewarded_rate"]
    header = ["arm", "seeds", *(c.replace("pass@k", f"pass@{k}") for c in cols)]
    lines += markdown_table(
        header, [[n, str(len(a["seeds"])), *(format_ci(at_last(a)[c]) for c in cols)] for n, a in agg["arms"].items()]
    )
    lines += ["", f"## Held-out `{metric}` per evaluated step", ""]
    steps = sorted({s for a in agg["arms"].values() for s in a["per_step"]})
    lines += markdown_table(
        ["arm", *(f"step {s}" for s in steps)],
        [
            [n, *(format_ci(a["per_step"][s][metric]) if s in a["per_step"] else "-" for s in steps)]
            for n, a in agg["arms"].items()
        ],
    )
    if train_prompts:
        lines += [
            "",
            f"## Training prompts ({train_prompts} fixed prompts x {k} samples): learning vs generalization",
            "",
        ]
        lines += markdown_table(
            ["arm", *(f"{m} step {s}" for m in ("correct", metric) for s in steps)],
            [
                [
                    n,
                    *(
                        format_ci(a["train_per_step"][s][m]) if s in a["train_per_step"] else "-"
                        for m in ("correct_rate", metric)
                        for s in steps
                    ),
                ]
                for n, a in agg["arms"].items()
            ],
        )
    lines += ["", f"## Time to target (held-out {metric} >= {study.threshold})", ""]
    lines += markdown_table(
        ["arm", "step per seed", "simulations per seed", "mean seconds per arm-seed"],
        [
            [
                name,
                ", ".join(fmt(t) for t in a["time_to_target"]),
                ", ".join(fmt(t) for t in a["simulations_to_target"]),
                format_ci(a["seconds_per_seed"][0], 0),
            ]
            for name, a in agg["arms"].items()
        ],
    )
    lines += ["", "## Training signal (mean over steps)", ""]
    lines += markdown_table(
        ["arm", "reward", "reward std", "frac_reward_zero_std", "skipped groups", "entropy", "completion length"],
        [
            [
                name,
                format_ci(t["train/reward"]),
                format_ci(t["train/reward_std"]),
                format_ci(t["train/frac_reward_zero_std"]),
                format_ci(t.get("train/dynamic_sampling/skipped_groups", (None, None, None))),
                format_ci(t["train/entropy"]),
                format_ci(t["train/completions/mean_length"], 1),
            ]
            for name, t in ((name, a["train"]) for name, a in agg["arms"].items())
            if t.get("train/reward", (None,))[0] is not None
        ],
    )
    if filtered:
        lines += [
            "",
            "## Difficulty filter (pilot of the warm-start, before training)",
            "",
            f"{filtered['kept_prompts']} of {filtered['prompts']} training prompts kept ({filtered['samples_per_prompt']} "
            f"samples each); mean solve rate {fmt(filtered.get('solve_rate_mean'))}, fraction of prompts solved on "
            f"20-70% of samples {fmt(filtered.get('solved_20_70'))}.",
            "",
        ]
        lines += markdown_table(
            ["arm", "zero-variance groups, all prompts", "after the filter"],
            [
                [name, fmt(v), fmt(filtered["zero_variance_after_filter"].get(name))]
                for name, v in filtered["zero_variance_before_filter"].items()
            ],
        )
    lines += [
        "",
        f"## Paired differences at step {last} (same seed; MDE: smallest effect {len(study.seeds)} seeds detect at 80% power)",
        "",
        "Same warm-start: the seeds at which both arm-seeds trained from the same SFT weights (the "
        "Warm-starts table below; the control's: the one its done.json records). At the other "
        "seeds the difference also holds that of two warm-starts.",
        "",
    ]
    dm = list(dict.fromkeys(("correct_rate", "mean_reward", "gap_closed", metric)))

    def matched(d: dict) -> str:
        same = d.get("same_warm_start", d["seeds"])
        return f"{', '.join(f's{s}' for s in same) or 'none'} ({len(same)} of {len(d['seeds'])})"

    lines += markdown_table(
        ["pair", *(f"{m} (MDE)" for m in dm), f"pass@{k}", "wrong rewarded", "same warm-start"],
        [
            [
                pair,
                *(f"{format_ci(d[m])} ({fmt(d.get('mde/' + m))})" for m in dm),
                format_ci(d["pass@k"]),
                format_ci(d["wrong_rewarded_rate"]),
                matched(d),
            ]
            for pair, d in agg["differences"].items()
        ],
    )
    lines += [
        "",
        "## The paper's mechanism: correlation of the five dimensions",
        "",
        "Mean pairwise correlation and effective number of dimensions (participation ratio of the "
        "correlation matrix' eigenvalues; constant dimensions left out). The paper: mean correlation "
        "0.31, D_eff ~ 3.2 (for 5 equicorrelated dimensions at 0.31 the participation ratio is 3.6).",
        "",
    ]
    table = []
    for where, per_arm in (("training", corr.get("train", {})), ("held-out", corr.get("held_out", {}))):
        for name, fams in per_arm.items():
            for fam, c in fams.items():
                if c.get("n", 0) >= 3:
                    table.append(
                        [
                            where,
                            name,
                            fam,
                            str(c["n"]),
                            fmt(c.get("mean_correlation")),
                            fmt(c.get("effective_dimensions")),
                            ", ".join(c.get("constant") or []) or "-",
                        ]
                    )
    lines += markdown_table(
        ["completions", "arm", "family", "n", "mean correlation", "effective dimensions", "constant"], table
    )
    paired = agg.get("paired_from_step0") or {}
    if paired:
        lines += [
            "",
            f"## Change from step 0 to step {last} on the same prompts, per seed",
            "",
            "Mean over prompts of the per-prompt change (final step minus step 0, the same policy's warm-start), "
            "95% t-intervals over prompts: what one seed can say about its own policy (the control's later steps "
            "are its step 0, so it is left out; differences between arms are in the tables above).",
            "",
        ]
        table = []
        for name, seeds in paired.items():
            for seed, splits in seeds.items():
                for split, c in splits.items():
                    table.append(
                        [
                            name,
                            seed,
                            "held-out" if split == "test" else "training prompts",
                            str(c["prompts"]),
                            *(format_ci(c.get(m), 3) for m in ("correct", "reward", "gap_closed")),
                            " -> ".join(
                                f"{k['copies']} / {k['fewer_t']} of {k['correct']}"
                                for k in (c["rewrite_copies"]["step0"], c["rewrite_copies"]["final"])
                            ),
                        ]
                    )
        lines += markdown_table(
            [
                "arm",
                "seed",
                "prompts",
                "n",
                "correct",
                "reward",
                "gap_closed",
                "correct rewrites: verbatim copies / fewer T (step 0 -> final)",
            ],
            table,
        )
    if starts:
        lines += ["", "## Warm-starts (SHA-256 of the SFT weights each trained arm-seed started from)", ""]
        lines += markdown_table(["warm-start", "arm-seeds"], [[sha[:16], ", ".join(v)] for sha, v in starts.items()])
    lines += ["", "![held-out curves](curves.png)", ""]
    if train_prompts:
        lines += ["![training-prompt curves](train_curves.png)", ""]
    lines += ["![training signal](training.png)", ""]
    return "\n".join(lines)


def _timing(key: str) -> bool:
    """Keys whose values are wall times or rates, which no two runs share."""
    return any(part in key for part in ("time", "timing", "seconds", "per_s", "runtime"))


def compare_arm_seeds(a: str | Path, b: str | Path) -> dict[str, dict[str, Any]]:
    """Whether two arm-seed folders (``OUT/arms/ARM/seedS``) hold the same run, file by file:
    TRL's log per step and the evaluations (every value but wall times and rates), every training
    completion's five scores, and every scored held-out and training-prompt sample.

    Returns ``{file: {"rows": (n_a, n_b), "equal": rows equal, "first_difference": (row, key) or None}}``
    over the ``.jsonl`` files either folder has and ``done.json`` (one row: arm, seed, steps,
    simulations, warm-start); a file only one of them has shows 0 rows on the other side.
    Two runs from the same warm-start, seed and settings are equal here when the CPU arithmetic
    is; a different warm-start shows as a difference from the first step on."""
    a, b = Path(a), Path(b)
    for folder in (a, b):
        if not (folder / "done.json").is_file() and not (folder / "metrics.jsonl").is_file():
            raise ConfigError(f"{folder}: not an arm-seed folder (no done.json or metrics.jsonl)")
    names = sorted({p.name for folder in (a, b) for p in folder.glob("*.jsonl")})
    result: dict[str, dict[str, Any]] = {}
    for name in ["done.json", *names]:
        if name == "done.json":
            ra, rb = ([json.loads(f.read_text())] if f.is_file() else [] for f in (a / name, b / name))
        else:
            ra, rb = _read_jsonl(a / name), _read_jsonl(b / name)
        equal, first = 0, None
        for i, (x, y) in enumerate(zip(ra, rb, strict=False)):  # the shorter one: a missing row
            keys = [k for k in dict.fromkeys((*x, *y)) if not _timing(k)]
            bad = next((k for k in keys if x.get(k) != y.get(k)), None)
            if bad is None:
                equal += 1
            elif first is None:
                first = (i, bad)
        if first is None and len(ra) != len(rb):
            first = (min(len(ra), len(rb)), None)
        result[name] = {"rows": (len(ra), len(rb)), "equal": equal, "first_difference": first}
    return result


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
    "write_summary",
]
