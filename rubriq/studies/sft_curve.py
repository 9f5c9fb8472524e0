"""The warm-start's SFT curve: how often the policy rewrites correctly as it sees more examples.

    rubriq study sft-curve configs/studies/rewriting_warm_start.yaml

Trains the training config's SFT warm-start (its ``sft`` section, on ``sft.split``: e.g. a
generated corpus of small rewrite circuits, ``data.build.extra_splits``) and, each time the
number of training examples seen reaches a value of ``eval_at`` (and at the end), samples the
held-out rewrite targets of ``eval_splits`` the way GRPO samples (``samples`` completions per
prompt at the training temperature) and classifies every sample of a rewrite prompt
(:func:`rubriq.studies.analysis.rewrite_outcomes`):

* **correct reduction**: correct (F_avg >= the rubric's threshold) with T < T0;
* **copy**: correct and the input circuit verbatim;
* **wrong**: not correct (unparseable included);

with the correct rate, ``gap_closed`` and C over correct circuits beside them.  The named goal
(``goal_reduction``, ``goal_wrong``) is checked on the first split at the final point.

Everything is written as it goes and the run resumes where it stopped (an HF checkpoint is
saved at each evaluated point; points already in ``curve.jsonl`` are not evaluated again)::

    OUT/data/                      the dataset (built from data.build on first use)
    OUT/sft/checkpoint-N/          the trainer's checkpoints (the newest complete one resumes)
    OUT/sft/model/                 the final warm-start (with OUT/sft/fingerprint.json)
    OUT/curve.jsonl                one row per (evaluated point, split)
    OUT/records/SPLIT_examplesN.jsonl   the scored samples of each point
    OUT/curve.md  OUT/curve.png    the table and the plot

``OUT`` may be a convergence study's output folder: the study then starts from this warm-start
(it trains none when ``OUT/sft/model`` exists) and uses the same data.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubriq.config import ConfigError, load_yaml_mapping
from rubriq.models.sampling import SamplingSpec, read_section
from rubriq.studies.settings import STUDY_SAMPLING_KEYS, held_out_sampling

log = logging.getLogger(__name__)

CURVE_METRICS = (
    "correct_reduction_rate",
    "copy_rate",
    "wrong_rate",
    "correct_rate",
    "gap_closed",
    "mean_t_correct",
    "parse_rate",
)
"""What each evaluated point records per split (besides examples, epoch and seconds)."""


CURVE_SAMPLING_KEYS = {**STUDY_SAMPLING_KEYS, "seed": "seed"}
"""An SFT-curve YAML's keys that are :class:`SamplingSpec` fields."""
CURVE_SAMPLING = SamplingSpec(samples=8, temperature=0.0, top_p=0.0, max_new_tokens=0)
"""The curve's sampling unless its YAML says otherwise: 8 samples, the rest the training's."""


@dataclass(frozen=True)
class SftCurveSettings:
    """An SFT-curve run; YAML maps onto it one to one (``configs/studies/``)."""

    train_config: str
    """Training YAML (model, data with its build, sft section), relative to this file."""
    output_dir: str = "runs/studies/warm_start"
    eval_at: tuple[int, ...] = ()
    """Training examples seen at which to evaluate (the end of training always is)."""
    eval_splits: tuple[str, ...] = ("test",)
    """Held-out splits of the dataset to evaluate on (the first is the one the goal names)."""
    sampling: SamplingSpec = field(default_factory=lambda: CURVE_SAMPLING)
    """How every point samples (the seed the same at every point): ``samples`` completions per
    prompt, ``temperature``, ``top_p`` and ``max_new_tokens`` 0: the training's (what GRPO will
    sample at; :func:`rubriq.studies.settings.held_out_sampling`). In YAML the keys ``samples``,
    ``temperature``, ``top_p``, ``top_k``, ``max_new_tokens``, ``seed``."""
    batch_size: int = 32
    max_prompts: int = 0
    """At most this many prompts per split (0: all)."""
    goal_reduction: float = 0.25
    """Named before the run: the held-out correct-reduction rate the warm-start must reach."""
    goal_wrong: float = 0.40
    """... with at most this wrong rate."""

    def __post_init__(self) -> None:
        if any(int(x) < 1 for x in self.eval_at):
            raise ConfigError(f"eval_at counts training examples: each must be >= 1, got {list(self.eval_at)}")
        if self.sampling.samples < 1 or self.batch_size < 1:
            raise ConfigError("samples and batch_size must be >= 1")
        if not self.eval_splits:
            raise ConfigError("eval_splits must name at least one split")

    @classmethod
    def from_yaml(cls, path: str | Path) -> SftCurveSettings:
        path = Path(path)
        data = load_yaml_mapping(path)
        if "train_config" not in data:
            raise ConfigError(f"{path}: train_config (a training YAML) is required")
        data["train_config"] = str((path.parent / data["train_config"]).resolve())
        return read_section(cls, data, CURVE_SAMPLING, CURVE_SAMPLING_KEYS, str(path))


def training_settings(curve: Any, out: Path):
    """The training config of ``curve`` (settings with a ``train_config``: an SFT curve's, an RFT
    run's) rooted in ``out`` (its data in ``out/data``), checked to have SFT on."""
    from rubriq.training.config import TrainSettings

    settings = TrainSettings.from_yaml(curve.train_config)
    if not settings.sft.enabled:
        raise ConfigError(f"{curve.train_config}: sft.enabled is false: there is no warm-start to train")
    return dataclasses.replace(
        settings, output_dir=str(out), data=dataclasses.replace(settings.data, dataset=str(out / "data"))
    )


def point_metrics(records: list, eps: float) -> dict[str, Any]:
    """CURVE_METRICS of one split's scored samples."""
    from rubriq.evaluation.metrics import summarize
    from rubriq.evaluator.result import is_correct
    from rubriq.studies.analysis import rewrite_gap, rewrite_outcomes

    t_pyzx: dict[str, int] = {}
    for r in records:
        spec = json.loads(str(r.get("target") or "{}"))
        if spec.get("t_best") is not None:
            t_pyzx[str(r.get("prompt_id"))] = int(spec["t_best"])
    summary = summarize(records, eps, ks=(1,))
    outcomes = rewrite_outcomes(records, eps)
    t_correct = [r["result"]["t_count"] for r in records if is_correct(r["result"], 1 - eps)]
    return {
        **{k: outcomes[k] for k in ("correct_reduction_rate", "copy_rate", "wrong_rate")},
        "correct_rate": summary["correct_rate"],
        "gap_closed": rewrite_gap(records, t_pyzx, eps)["gap_closed"],
        "mean_t_correct": sum(t_correct) / len(t_correct) if t_correct else None,
        "parse_rate": summary["parse_rate"],
        "rewrite_samples": outcomes["samples"],
        "samples": len(records),
    }


class CurveEvaluator:
    """Samples and scores the policy under training on the held-out splits, without disturbing
    the trainer's random state, generating as GRPO does (shared prefill, completions ended after
    their code block)."""

    def __init__(self, curve: SftCurveSettings, settings, tokenizer, splits: dict[str, list[dict]], out: Path):
        self.curve, self.settings, self.tokenizer, self.splits, self.out = curve, settings, tokenizer, splits, out
        self.sampling = held_out_sampling(curve.sampling, settings)
        self.eps = 1 - settings.rubric.fidelity.correct_threshold

    def __call__(self, model, examples: int, epoch: float) -> list[dict]:
        import torch

        from rubriq.evaluation.sampling import generate, save_records, score
        from rubriq.models.generation import GenerationFlags, install_prefix_generate

        flags = GenerationFlags.of_generate(self.settings.generation.end_after_code_block)
        install_prefix_generate(model, self.tokenizer, flags)
        rows_out = []
        state, training = torch.random.get_rng_state(), model.training
        try:
            for split, rows in self.splits.items():
                start = time.perf_counter()
                records = generate(
                    model,
                    self.tokenizer,
                    rows,
                    self.sampling,
                    batch_size=self.curve.batch_size,
                    progress=False,
                    sampler="generate",  # transformers' generate, as the committed curves were drawn
                )
                sampled = time.perf_counter() - start
                scored = score(records, self.settings.rubric, progress=False)
                save_records(scored, self.out / "records" / f"{split}_examples{examples}.jsonl")
                row = {
                    "examples": examples,
                    "epoch": round(epoch, 4),
                    "split": split,
                    **point_metrics(scored, self.eps),
                    "sample_seconds": round(sampled, 1),
                    "eval_seconds": round(time.perf_counter() - start, 1),
                }
                rows_out.append(row)
                log.info(
                    "sft curve: %d examples, %s: correct reduction %.3f, copy %.3f, wrong %.3f",
                    examples,
                    split,
                    row["correct_reduction_rate"] or 0.0,
                    row["copy_rate"] or 0.0,
                    row["wrong_rate"] or 0.0,
                )
        finally:
            torch.random.set_rng_state(state)
            model.train(training)
        return rows_out


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def curve_callback(evaluate: CurveEvaluator, points: list[int], done: set[int], path: Path, started: float):
    """A ``transformers.TrainerCallback`` that evaluates (and checkpoints) at each of ``points``
    (training examples seen) not in ``done``, and at the end of training."""
    from transformers import TrainerCallback

    from rubriq.training.callbacks import append_jsonl

    class CurveCallback(TrainerCallback):
        def _examples(self, args, state) -> int:
            return (
                state.global_step
                * args.per_device_train_batch_size
                * args.gradient_accumulation_steps
                * max(1, args.world_size)
            )

        def _evaluate(self, args, state, model) -> None:
            examples = self._examples(args, state)
            if examples in done:
                return
            for row in evaluate(model, examples, float(state.epoch or 0.0)):
                append_jsonl(path, {**row, "train_seconds": round(time.perf_counter() - started, 1)})
            done.add(examples)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            examples = self._examples(args, state)
            pending = [p for p in points if p <= examples and p not in done]
            if pending:  # the first step at or past a point evaluates it
                self._evaluate(args, state, model)
                done.update(pending)
                control.should_save = True  # a resumed run starts from this point
            return control

        def on_train_end(self, args, state, control, model=None, **kwargs):
            self._evaluate(args, state, model)
            return control

    return CurveCallback()


def run(config: str | Path, out: str | Path | None = None, progress=None) -> Path:
    """Train the warm-start with its curve (resumable) and write the curve's table and plot;
    returns ``OUT/curve.md``."""
    from rubriq.models import EMBEDDED, load_tokenizer, prepare_embedded, to_policy_precision
    from rubriq.studies.convergence import warm_start_fingerprint
    from rubriq.training.callbacks import trainer_callbacks
    from rubriq.training.config import EarlyStoppingSettings
    from rubriq.training.sft import run_sft
    from rubriq.training.train_rubriq import last_checkpoint, load_base, load_rows, sft_lora_kwargs

    curve = SftCurveSettings.from_yaml(config)
    folder = Path(out or curve.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    settings = training_settings(curve, folder)
    if settings.model.name_or_path == EMBEDDED and not settings.model.tiny:
        prepare_embedded()
    train_rows = load_rows(settings, settings.sft.split or None)
    splits = {}
    for name in curve.eval_splits:
        rows = load_rows(settings, name)
        splits[name] = rows[: curve.max_prompts] if curve.max_prompts else rows
        if not splits[name]:
            raise ConfigError(f"split {name!r} of {folder / 'data'} is empty: nothing to evaluate on")
    path = folder / "curve.jsonl"
    sft_model = folder / "sft" / "model"
    if not (sft_model / "config.json").is_file():
        tokenizer, model = load_base(settings)
        model = to_policy_precision(model, settings.model.precision, trained=not settings.sft.lora)
        done = {int(r["examples"]) for r in _read_jsonl(path)}
        resume = last_checkpoint(folder / "sft")
        if progress:
            progress(
                f"SFT on {len(train_rows)} rows of split {settings.sft.split or settings.data.split!r}"
                + (f", resuming from {resume}" if resume else "")
            )
        lora = sft_lora_kwargs(settings)
        evaluate = CurveEvaluator(curve, settings, tokenizer, splits, folder)
        callbacks = [
            *trainer_callbacks(folder, EarlyStoppingSettings(), phase="sft"),
            curve_callback(evaluate, sorted(int(p) for p in curve.eval_at), done, path, time.perf_counter()),
        ]
        args = {"save_total_limit": 1, **settings.sft.args}
        model = run_sft(
            model,
            tokenizer,
            train_rows,
            folder / "sft",
            args,
            lora,
            callbacks=callbacks,
            resume=resume,
            adapter_dir=folder / "sft" / "adapter",
        )
        model.save_pretrained(sft_model)
        tokenizer.save_pretrained(sft_model)
        warm_start_fingerprint(folder, trained_here=True)
    load_tokenizer(str(sft_model))  # a saved warm-start is complete (raises otherwise)
    return write_curve(folder, curve)


def write_curve(folder: Path, curve: SftCurveSettings) -> Path:
    """``curve.md`` (a table per split, the goal's verdict) and ``curve.png`` from ``curve.jsonl``."""
    from rubriq.tables import fmt, markdown_table

    rows = _read_jsonl(folder / "curve.jsonl")
    if not rows:
        raise ConfigError(f"{folder / 'curve.jsonl'} has no evaluated point yet")

    lines = ["# SFT curve", ""]
    for split in curve.eval_splits:
        mine = sorted((r for r in rows if r["split"] == split), key=lambda r: r["examples"])
        if not mine:
            continue
        lines += [f"## {split} ({mine[-1]['samples']} samples per point)", ""]
        lines += markdown_table(
            ["examples seen", "epoch", *CURVE_METRICS, "train s (cumulative)"],
            [
                [
                    str(r["examples"]),
                    fmt(r["epoch"]),
                    *(fmt(r.get(k)) for k in CURVE_METRICS),
                    fmt(r.get("train_seconds")),
                ]
                for r in mine
            ],
        )
        lines.append("")
    first = sorted((r for r in rows if r["split"] == curve.eval_splits[0]), key=lambda r: r["examples"])
    if first:
        last = first[-1]
        ok = (last["correct_reduction_rate"] or 0) >= curve.goal_reduction and (
            last["wrong_rate"] or 1
        ) <= curve.goal_wrong
        lines.append(
            f"Goal (named before the run) on {curve.eval_splits[0]}: correct reduction >= {curve.goal_reduction}, "
            f"wrong <= {curve.goal_wrong}; at {last['examples']} examples: {fmt(last['correct_reduction_rate'])}, "
            f"{fmt(last['wrong_rate'])}: **{'met' if ok else 'not met'}**."
        )
    md = folder / "curve.md"
    md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    plot_curve(rows, curve.eval_splits, folder / "curve.png")
    return md


def plot_curve(rows: list[dict], splits: tuple[str, ...], path: Path) -> Path:
    """The three outcome rates against examples seen, one panel per split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(splits), figsize=(5 * len(splits), 3.6), squeeze=False)
    for ax, split in zip(axes[0], splits, strict=True):
        mine = sorted((r for r in rows if r["split"] == split), key=lambda r: r["examples"])
        xs = [r["examples"] for r in mine]
        for key, label in (
            ("correct_reduction_rate", "correct, T < T0"),
            ("copy_rate", "copy"),
            ("wrong_rate", "wrong"),
        ):
            ax.plot(xs, [r.get(key) or 0.0 for r in mine], marker="o", label=label)
        ax.set_title(f"held-out split {split}")
        ax.set_xlabel("SFT examples seen")
        ax.set_ylabel("fraction of samples")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


__all__ = ["CURVE_METRICS", "SftCurveSettings", "point_metrics", "run", "write_curve"]
