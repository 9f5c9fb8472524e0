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

``--keep DIR`` (:func:`keep`) copies what a results folder keeps of a finished run, the curve,
every point's records and the trained LoRA adapter with a model card, into ``DIR`` (``--commit``:
and commits it), so that a study on another machine starts from the committed adapter
(``warm_start_model: DIR/warm_start``) instead of training it again::

    DIR/curve.jsonl  DIR/curve.md  DIR/curve.png  DIR/records/  DIR/sft_metrics.jsonl
    DIR/warm_start_fingerprint.json   the merged model's SHA-256 (OUT/sft/fingerprint.json)
    DIR/warm_start/                   the adapter (base renamed to ``embedded`` where it is the
                                      embedded model), rubriq_policy.json, README.md, SHA256SUMS
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
    (training examples seen) not passed yet, and at the end of training. ``done``: the examples
    seen at the evaluations already recorded (a resumed run's); a point at or below one of them
    was evaluated there (the first step at or past a point evaluates it: point 100 at 104
    examples with batches of 8), so it is not evaluated again."""
    from transformers import TrainerCallback

    from rubriq.training.callbacks import append_jsonl

    done = set(done) | {p for p in points if any(e >= p for e in done)}

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
        ok = goal_met(last, curve)
        lines.append(
            f"Goal (named before the run) on {curve.eval_splits[0]}: correct reduction >= {curve.goal_reduction}, "
            f"wrong <= {curve.goal_wrong}; at {last['examples']} examples: {fmt(last['correct_reduction_rate'])}, "
            f"{fmt(last['wrong_rate'])}: **{'met' if ok else 'not met'}**."
        )
    md = folder / "curve.md"
    md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    plot_curve(rows, curve.eval_splits, folder / "curve.png")
    return md


def goal_met(point: dict, curve: SftCurveSettings) -> bool:
    """Whether an evaluated point meets the named goal (an undefined rate does not).

    >>> c = SftCurveSettings(train_config="t.yaml", goal_reduction=0.25, goal_wrong=0.4)
    >>> goal_met({"correct_reduction_rate": 0.3, "wrong_rate": 0.0}, c), goal_met({"correct_reduction_rate": 0.3, "wrong_rate": None}, c)
    (True, False)
    """
    reduction, wrong = point.get("correct_reduction_rate"), point.get("wrong_rate")
    return (
        reduction is not None and wrong is not None and reduction >= curve.goal_reduction and wrong <= curve.goal_wrong
    )


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


def keep(folder: Path, curve: SftCurveSettings, results: Path, config: str, commit: bool = False) -> Path:
    """Copy the finished SFT curve of ``folder`` into ``results`` (the layout in the module
    docstring) with a model card for its adapter; ``config``: the YAML it ran with, as the card
    names it. A ``results/warm_start`` holding other weights is refused (remove it first), and
    everything is checked before anything is written. With ``commit``, commit the files kept
    (those alone). Returns ``results/warm_start``."""
    import os
    import shutil

    from rubriq.data.prompts import prompt_style_of_rows
    from rubriq.models import EMBEDDED, POLICY_INFO, TOKENIZER_FILES, embedded_dir
    from rubriq.studies.units import adapter_fingerprint, git_commit, repo_relative
    from rubriq.training.train_rubriq import load_rows

    adapter = folder / "sft" / "adapter"
    if not (adapter / "adapter_config.json").is_file() or not (folder / "sft" / "model" / "config.json").is_file():
        raise ConfigError(f"{folder}: no finished LoRA warm-start here (sft/adapter, sft/model): run the curve first")
    split = curve.eval_splits[0]
    points = sorted(
        (r for r in _read_jsonl(folder / "curve.jsonl") if r["split"] == split), key=lambda r: r["examples"]
    )
    if not points or not (folder / "records" / f"{split}_examples{points[-1]['examples']}.jsonl").is_file():
        raise ConfigError(f"{folder}: no evaluated point with its records on split {split!r}: nothing to report")
    weights = sorted(adapter.glob("*.safetensors"))
    dst = results / "warm_start"
    if dst.exists() and any(
        not (dst / w.name).is_file() or (dst / w.name).read_bytes() != w.read_bytes() for w in weights
    ):
        raise ConfigError(f"{dst} holds other weights than {adapter}: remove it first (or keep elsewhere)")
    settings = training_settings(curve, folder)
    named = json.loads((adapter / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if settings.model.name_or_path == EMBEDDED and not settings.model.tiny:
        base = EMBEDDED
    elif named and Path(named).exists():  # a local folder: named relative to the kept adapter
        base = os.path.relpath(Path(named).resolve(), dst.resolve())
    else:
        base = named or settings.model.name_or_path  # a hub id (or what the training config names)
    if named and base != EMBEDDED and Path(named).resolve() == embedded_dir().resolve():
        base = EMBEDDED
    train_rows = load_rows(settings, settings.sft.split or None)

    write_curve(folder, curve)
    results.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name in ("curve.jsonl", "curve.md", "curve.png"):
        shutil.copy2(folder / name, results / name)
        written.append(results / name)
    for file in sorted((folder / "records").glob("*.jsonl")):
        (results / "records").mkdir(exist_ok=True)
        shutil.copy2(file, results / "records" / file.name)
        written.append(results / "records" / file.name)
    # the trainer's log (trainer_callbacks writes OUT/metrics.jsonl), the SFT phase's rows
    log_rows = [r for r in _read_jsonl(folder / "metrics.jsonl") if r.get("phase", "sft") == "sft"]
    if log_rows:
        (results / "sft_metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log_rows))
        written.append(results / "sft_metrics.jsonl")
    if (folder / "sft" / "fingerprint.json").is_file():
        shutil.copy2(folder / "sft" / "fingerprint.json", results / "warm_start_fingerprint.json")
        written.append(results / "warm_start_fingerprint.json")
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir()
    for file in sorted(adapter.iterdir()):
        # the tokenizer is the base's; PEFT's own README names this machine's paths
        if file.is_file() and file.name not in (*TOKENIZER_FILES, "README.md", "SHA256SUMS", "training_args.bin"):
            shutil.copy2(file, dst / file.name)
    config_path = dst / "adapter_config.json"
    adapter_config = json.loads(config_path.read_text())
    adapter_config["base_model_name_or_path"] = base
    config_path.write_text(json.dumps(adapter_config, indent=2))
    info = {
        "prompt_style": prompt_style_of_rows(train_rows),
        "formats": sorted({r.get("format", "qasm2") for r in train_rows}),
        "base_model": base,
        "tiny": settings.model.tiny,
        "adapter_base": base,
        "sft_warm_start": True,
        "algorithm": "sft",
        "reward": None,
        "trained_by": f"rubriq study sft-curve {config} ({points[-1]['examples']} examples, "
        f"LoRA r={adapter_config.get('r')})",
    }
    (dst / POLICY_INFO).write_text(json.dumps(info, indent=2))
    (dst / "README.md").write_text(model_card(results, curve, config, repo_relative(results)), encoding="utf-8")
    sums = adapter_fingerprint(dst)
    (dst / "SHA256SUMS").write_text("".join(f"{sha}  {name}\n" for name, sha in sums.items()))
    log.info("sft-curve: kept in %s", results)
    if commit and not git_commit(
        dst,
        f"sft-curve: the warm-start's curve, records and adapter with its model card ({results})",
        also=tuple(written),
    ):
        raise ConfigError(f"{results}: kept but not committed (not in a git repository, or nothing changed)")
    return dst


def model_card(results: Path, curve: SftCurveSettings, config: str, shown: str | None = None) -> str:
    """``results/warm_start/README.md`` (the Hugging Face model-card convention): front matter
    (base model, library, the final point's metrics on the first of ``eval_splits``) and what the
    adapter is, how it was trained, its curve, the named goal's verdict, its limits, how to load
    it; every number from ``results/curve.jsonl`` and the final point's records (95% intervals
    over prompts, :func:`rubriq.studies.weights.held_out_outcomes`)."""
    import yaml

    from rubriq.models import EMBEDDED, EMBEDDED_HUB_ID
    from rubriq.studies.weights import card_front_matter, held_out_outcomes
    from rubriq.tables import fmt, markdown_table

    split = curve.eval_splits[0]
    rows = sorted((r for r in _read_jsonl(results / "curve.jsonl") if r["split"] == split), key=lambda r: r["examples"])
    if not rows:
        raise ConfigError(f"{results / 'curve.jsonl'}: no evaluated point on split {split!r}")
    last = rows[-1]
    outcomes = held_out_outcomes(_read_jsonl(results / "records" / f"{split}_examples{last['examples']}.jsonl"))
    adapter_config = json.loads((results / "warm_start" / "adapter_config.json").read_text())
    base = adapter_config.get("base_model_name_or_path") or "unnamed (a model built in memory)"
    where = shown or results.as_posix()
    per_prompt = outcomes["samples"] // max(outcomes["prompts"], 1)

    def interval(values) -> str:
        return "-" if values[1] is None else f"{fmt(values[1])}-{fmt(values[2])}"

    met = goal_met(last, curve)
    metrics = [
        {
            "type": "correct_reduction_rate",
            "value": _round(last["correct_reduction_rate"]),
            "name": f"correct with T < T0 (95% CI over prompts {interval(outcomes['reduction'])})",
        },
        {
            "type": "copy_rate",
            "value": _round(last["copy_rate"]),
            "name": f"correct copy of the input (95% CI {interval(outcomes['copy'])})",
        },
        {
            "type": "wrong_rate",
            "value": _round(last["wrong_rate"]),
            "name": f"not equivalent or unparsed (95% CI {interval(outcomes['wrong'])})",
        },
        {"type": "gap_closed", "value": _round(last["gap_closed"]), "name": "fraction of the T gap to PyZX closed"},
    ]
    meta = card_front_matter(
        f"rubriq-{Path(config).stem.replace('_', '-')}",
        EMBEDDED_HUB_ID if base == EMBEDDED else base,
        ["sft"],
        f"{outcomes['prompts']} generated rewrite circuits of split {split}, {per_prompt} samples each",
        metrics,
    )
    table = markdown_table(
        ["examples seen", "correct, T < T0", "copy", "wrong", "gap closed", "parsed"],
        [
            [
                r["examples"],
                fmt(r["correct_reduction_rate"]),
                fmt(r["copy_rate"]),
                fmt(r["wrong_rate"]),
                fmt(r["gap_closed"]),
                fmt(r["parse_rate"]),
            ]
            for r in rows
        ],
    )
    return f"""---
{yaml.safe_dump(meta, sort_keys=False)}---

# RubriQ rewriting warm-start: `{Path(config).name}` (LoRA)

A LoRA adapter that rewrites small OpenQASM 2.0 Clifford+T circuits with fewer T gates, trained
by `rubriq study sft-curve {config}`. It **{"met" if met else "did not meet"}** the goal named before
training (correct reductions on >= {curve.goal_reduction} of the samples of split `{split}`, wrong
on <= {curve.goal_wrong}). A research artifact, not a usable optimizer.

## Model

- **Base:** `{base}` (`base_model_name_or_path` in `adapter_config.json`; `embedded` is RubriQ's
  embedded SmolLM2-135M-Instruct, resolved to its local copy).
- **Adapter:** LoRA r = {adapter_config.get("r")} on {", ".join(sorted(adapter_config.get("target_modules") or []))}.
- **Prompt:** `rubriq_policy.json` (prompt style {json.loads((results / "warm_start" / "rubriq_policy.json").read_text()).get("prompt_style")!r}); answers in OpenQASM 2.0.
- **Files:** `adapter_config.json`, the weights, `rubriq_policy.json`, this card; `SHA256SUMS`
  lists each file's hash.

## Training data and recipe

Supervised fine-tuning (TRL SFTTrainer) on the `sft` split of the training config's generated
corpus (`rubriq/data/rewrites.py`), as the YAML and its `train_config` say; CPU. Its training
log is `{where}/sft_metrics.jsonl`.

## Evaluation

Split `{split}`, {per_prompt} samples per circuit at the training temperature with the same
sampling seed at every point, checked by RubriQ's fidelity engine (correct: F_avg >= 0.99; the
records of each point in `{where}/records/`):

{chr(10).join(table)}

At {last["examples"]} examples, 95% intervals over the {outcomes["prompts"]} prompts: correct reductions
{interval(outcomes["reduction"])}, copies {interval(outcomes["copy"])}, wrong {interval(outcomes["wrong"])}.

## Intended use and limits

- For: reproducing RubriQ's rewriting study, and as the warm-start of further training (a
  study's `warm_start_model: {where}/warm_start`).
- Not for: optimizing circuits you depend on without verification. Trained on 2-3 qubit circuits
  of a few dozen gates; most samples are wrong. `rubriq optimize` verifies every sample against
  the input and returns only verified ones.

## How to load

```bash
rubriq optimize my_circuit.qasm --model {where}/warm_start -n 8
```

```python
from rubriq.models import load_model

model = load_model("{where}/warm_start")  # the base with this adapter merged
```
"""


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


__all__ = ["CURVE_METRICS", "SftCurveSettings", "keep", "model_card", "point_metrics", "run", "write_curve"]
