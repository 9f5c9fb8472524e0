"""Remedy 1 of issue 52, rejection-sampling fine-tuning (RFT): the warm-start trained further on
its own verified reductions.

    rubriq study rft configs/studies/rewriting_rft.yaml [--commit]

1. **Pool.** The warm-start (``warm_start_model``, a PEFT adapter folder, merged into its base)
   samples ``samples`` completions of every prompt of ``pool_split`` (the rewriting study's
   ``sft`` corpus: disjoint from the training prompts, the validation, test and hard splits) at
   the training temperature (:func:`rubriq.studies.settings.held_out_sampling`), and every
   completion is scored with the training config's rubric.  The pool is sampled in chunks of
   ``chunk_prompts`` prompts, chunk ``k`` with seed ``seed + k``, each written when it is done, so
   a stopped run goes on where it stopped and draws what an unstopped one would.
2. **Selection** (:func:`select_reductions`).  A completion is kept when it is a correct
   reduction, :func:`rubriq.studies.analysis.rewrite_outcome` ``== "reduction"``: correct
   (F_avg >= the rubric's ``fidelity.correct_threshold``, exact simulation for these circuits)
   with fewer T gates than the input (T < T0); at most ``per_prompt`` per prompt, the fewest T
   first (ties: the first drawn).  A copy, a wrong circuit (a "broken deletion" with fewer T
   included) and a correct circuit without fewer T are never kept.  The kept completions, verbatim
   (one fenced block, as the SFT corpus writes answers; :func:`trained_answer`), are the SFT
   dataset, with ``mix_gold`` rows of the original SFT corpus beside them.
3. **Training.**  The same adapter, loaded trainable (PEFT ``is_trainable=True``), is trained
   further on them with the training config's ``sft.args`` (``sft_args`` overriding some), so the
   result is again a LoRA adapter on the same base, a few MB, usable as ``warm_start_model`` of a
   study.
4. **Evaluation.**  The new adapter and the warm-start are sampled on ``eval_split`` x
   ``eval_samples`` with the same seed, the one a study's step 0 of GRPO seed
   ``eval_study_seed`` draws its held-out split with (:func:`rubriq.studies.evaluate.eval_seed`
   ``(seed, 0, "test")``: a study names its held-out split ``test`` whatever the split is; the
   rewriting pilots' validation split at seed 0: 1000003), with the study's evaluator
   (:class:`rubriq.studies.evaluate.Evaluator`): common random numbers, and the warm-start's row
   is the pilots' step 0.  With ``reuse_step0`` (a study folder that holds that step 0, e.g. a
   committed pilot), the warm-start's samples are read from there instead of drawn again.
   Reported: correct reductions, copies and wrong samples of each, and the per-prompt paired
   change with its 95% interval over prompts.

Every stage is written as it goes and skipped when its output is there::

    OUT/data/                        the training config's dataset (built on first use)
    OUT/rft/warm_start_model/        the warm-start adapter merged into its base
    OUT/rft/pool/chunkK.jsonl        the pool's scored samples, a chunk of prompts per file
    OUT/rft/dataset.jsonl            the SFT rows trained on (the kept completions, the gold rows)
    OUT/rft/stats.json               the pool: prompts, samples, outcomes, reductions kept, T saved
    OUT/rft/metrics.jsonl            the training log
    OUT/rft/adapter/                 the new adapter (with the tokenizer, rubriq_policy.json and
                                     rft.json: what it was trained on, the SHA-256 of its weights)
    OUT/rft/model/                   the new adapter merged (what is evaluated)
    OUT/rft/eval/POLICY/step0/       each policy's evaluation (seedS.json, records_seedS.jsonl;
                                     POLICY warm_start or rft: a study's step-0 layout)
    OUT/rft/summary.md  OUT/rft/summary.json

With ``--commit`` each pool chunk is committed to ``results_dir/pool`` as soon as it is scored
(a run stopped on one machine resumes on another from what was committed), and at the end the
small files (summary, stats, dataset, training log, the evaluations drawn here, the adapter
without the base's tokenizer, with a model card (:func:`model_card`) and its ``SHA256SUMS``) are
copied into ``results_dir`` and committed (``git commit -- RESULTS_DIR``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubriq.config import ConfigError, load_yaml_mapping
from rubriq.models import TOKENIZER_FILES
from rubriq.models.generation import Sampler
from rubriq.models.sampling import SamplingSpec, read_section
from rubriq.studies import layout
from rubriq.studies.settings import STUDY_SAMPLING_KEYS, held_out_sampling

log = logging.getLogger(__name__)

RFT_SAMPLING_KEYS = {**STUDY_SAMPLING_KEYS, "seed": "seed"}
"""An RFT YAML's keys that are :class:`SamplingSpec` fields (how the pool is sampled)."""
RFT_SAMPLING = SamplingSpec(samples=4, temperature=0.0, top_p=0.0, max_new_tokens=0, seed=20261207)
"""The pool's sampling unless the YAML says otherwise: 4 samples per prompt, the training's
temperature, top-p and completion length, a seed of its own."""
POLICIES = ("warm_start", "rft")
"""The two policies evaluated, in report order."""


@dataclass(frozen=True)
class RftSettings:
    """A rejection-sampling fine-tuning run; YAML maps onto it one to one (``configs/studies/``)."""

    train_config: str
    """Training YAML (model, data with its build, rubric, ``sft`` section), relative to this file."""
    warm_start_model: str
    """The warm-start: a PEFT adapter folder (``adapter_config.json``), relative to this file or
    absolute. It is merged into its base for sampling and trained further (the same adapter)."""
    output_dir: str = "runs/studies/rft"
    results_dir: str = ""
    """Where ``--commit`` copies the small files and commits them (relative to the working
    directory, like ``output_dir``); "": nowhere."""
    pool_split: str = "sft"
    """The split of the training config's dataset whose prompts are sampled (the prompt pool);
    it may share no target with ``eval_split``."""
    max_prompts: int = 0
    """At most this many pool prompts, the first ones (0: all)."""
    sampling: SamplingSpec = field(default_factory=lambda: RFT_SAMPLING)
    """How the pool is sampled: ``samples`` completions per prompt; ``temperature``, ``top_p`` and
    ``max_new_tokens`` 0: the training's (:func:`rubriq.studies.settings.held_out_sampling`);
    ``seed``: chunk ``k`` of the pool draws with ``seed + k``. In YAML the keys ``samples``,
    ``temperature``, ``top_p``, ``top_k``, ``max_new_tokens``, ``seed``."""
    pool_sampler: Sampler = "static"
    """How the pool is decoded (``rubriq.models.generation.GenerationFlags.sampler``): ``static``
    (RubriQ's static decoder, about 3x transformers' ``generate`` on a CPU: docs/performance.md),
    ``loop`` or ``generate``; the same distribution, other random draws. The evaluations always
    use ``generate``, as the studies' evaluations (and the pilots' step 0) were drawn."""
    chunk_prompts: int = 32
    """Pool prompts per chunk (what a stopped run loses at most; the draws depend on it)."""
    batch_size: int = 32
    """Completions decoded at a time, in the pool and in the evaluations (the pilots': 32)."""
    per_prompt: int = 1
    """At most this many verified reductions kept per prompt, the fewest T first (distinct texts)."""
    mix_gold: int = 0
    """Rows of the original SFT corpus (the training config's ``sft.split``, its reference
    answers) trained on beside the kept completions, drawn with a fixed seed (0: none)."""
    sft_args: dict = field(default_factory=dict)
    """SFTConfig arguments over the training config's ``sft.args`` (e.g. ``num_train_epochs``,
    ``learning_rate``)."""
    eval_split: str = "validation"
    """The split both policies are evaluated on (the pilots': validation; never the test split
    while settings are being chosen)."""
    eval_samples: int = 8
    """Completions per evaluated prompt (the pilots': 8), at the training's temperature, top-p
    and completion length."""
    eval_study_seed: int = 0
    """Both evaluations draw with the seed of step 0 of this GRPO seed of a study on
    ``eval_split`` (:func:`rubriq.studies.evaluate.eval_seed`; the pilots ran seed 0)."""
    reuse_step0: str = ""
    """A study folder (relative to this file) holding the warm-start's step-0 evaluation of
    ``eval_study_seed`` on ``eval_split`` (``step0/seedS.json`` and ``step0/records_seedS.jsonl``,
    e.g. a committed pilot): the warm-start's row is read from it instead of sampled again,
    after checking that it sampled the same prompts the same way from the same adapter. "": sample it."""

    def __post_init__(self) -> None:
        checks = (
            ("samples", self.sampling.samples >= 1, "must be >= 1"),
            ("max_prompts", self.max_prompts >= 0, "must be >= 0 (0: every pool prompt)"),
            ("chunk_prompts", self.chunk_prompts >= 1, "must be >= 1"),
            ("batch_size", self.batch_size >= 1, "must be >= 1"),
            ("per_prompt", self.per_prompt >= 1, "must be >= 1"),
            ("mix_gold", self.mix_gold >= 0, "must be >= 0"),
            ("eval_samples", self.eval_samples >= 2, "must be >= 2 (the evaluation samples, as the studies do)"),
            ("eval_study_seed", self.eval_study_seed >= 0, "must be >= 0"),
            ("pool_split", self.pool_split != self.eval_split, "must not be eval_split (the pool is trained on)"),
            ("sft_args", "output_dir" not in self.sft_args, "may not set output_dir (it is OUT/rft/train)"),
        )
        for key, ok, why in checks:
            if not ok:
                raise ConfigError(f"{key} {why}")

    @classmethod
    def from_yaml(cls, path: str | Path) -> RftSettings:
        path = Path(path)
        data = load_yaml_mapping(path)
        for key in ("train_config", "warm_start_model"):
            if not data.get(key):
                raise ConfigError(f"{path}: {key} is required")
        for key in ("train_config", "warm_start_model", "reuse_step0"):
            if data.get(key):
                data[key] = str((path.parent / str(data[key])).resolve())
        return read_section(cls, data, RFT_SAMPLING, RFT_SAMPLING_KEYS, str(path))

    def to_record(self) -> dict[str, Any]:
        """The settings as ``summary.json`` records them (paths relative to the working folder
        where they lie in it)."""
        from rubriq.models.sampling import write_section
        from rubriq.studies.settings import _portable

        record = write_section(self, RFT_SAMPLING_KEYS, deep=True)
        for key in ("train_config", "warm_start_model", "reuse_step0"):
            if record.get(key):
                record[key] = _portable(record[key])
        return record

    def evaluation_study(self):
        """The study whose step-0 evaluation of seed ``eval_study_seed`` both policies get: its
        held-out split ``eval_split``, all of it, ``eval_samples`` per prompt at the training's
        sampling, ``batch_size`` at a time, the same seed at every step (as the pilots)."""
        from rubriq.studies.settings import StudySettings

        spec = SamplingSpec(samples=self.eval_samples, temperature=0.0, top_p=0.0, max_new_tokens=0)
        return StudySettings(
            train_config=self.train_config,
            split=self.eval_split,
            sampling=spec,
            batch_size=self.batch_size,
            seeds=(self.eval_study_seed,),
            same_eval_seed=True,
        )


# -- selection --------------------------------------------------------------------------------
def select_reductions(records: list[dict], eps: float, per_prompt: int = 1) -> list[dict]:
    r"""The verified correct reductions among scored ``records`` to train on: per prompt, at most
    ``per_prompt`` distinct completions whose :func:`rubriq.studies.analysis.rewrite_outcome` is
    ``reduction`` (correct at ``eps``, T < T0), the fewest T first, ties by the order drawn;
    prompts in the order they first appear.

    >>> spec = '{"algorithm": "circuit", "qasm": "qreg q[1];\\nt q[0];\\nt q[0];\\nt q[0];\\n"}'
    >>> rec = lambda text, f, t: {"prompt_id": "a", "target": spec, "t0": 3, "text": text,
    ...                           "result": {"parsed": True, "average_fidelity": f, "t_count": t}}
    >>> [r["text"] for r in select_reductions([rec("qreg q[1];\ns q[0];\nt q[0];", 1.0, 1),
    ...     rec("qreg q[1];\nt q[0];", 0.5, 1), rec("qreg q[1];\nz q[0];\nt q[0];", 1.0, 1)], 0.01)]
    ['qreg q[1];\ns q[0];\nt q[0];']
    """
    from rubriq.studies.analysis import rewrite_outcome

    found: dict[str, list[tuple[int, int, dict]]] = {}
    for i, r in enumerate(records):
        if rewrite_outcome(r, eps) == "reduction":
            found.setdefault(str(r.get("prompt_id")), []).append((int(r["result"]["t_count"]), i, r))
    kept = []
    for candidates in found.values():
        texts: set[str] = set()
        for _t, _i, r in sorted(candidates, key=lambda c: (c[0], c[1])):
            text = str(r.get("text") or "").strip()
            if text in texts:
                continue
            texts.add(text)
            kept.append(r)
            if len(texts) == per_prompt:
                break
    return kept


FENCED = re.compile(r"```[A-Za-z0-9]*\n(.*)\n```", re.S)


def trained_answer(row: dict, text: str) -> str | None:
    """The answer of ``row`` that makes the SFT target (``rubriq.training.sft.reference_completion``)
    exactly the completion ``text`` (stripped), or None when ``text`` is not one fenced block in
    the row's format (then it is not trained on: SFT would teach another text than was verified).

    >>> row = {"format": "qasm2"}
    >>> trained_answer(row, "```qasm\\nqreg q[1];\\ns q[0];\\n```\\n"), trained_answer(row, "Here:\\nqreg q[1];")
    ('qreg q[1];\\ns q[0];', None)
    """
    from rubriq.training.sft import reference_completion

    match = FENCED.fullmatch(text.strip())
    if match is None or "```" in match.group(1):
        return None
    try:
        same = reference_completion(row, match.group(1)) == text.strip()
    except Exception:  # noqa: BLE001 - an answer that does not convert to the row's format
        same = False
    return match.group(1) if same else None


def build_dataset(
    records: list[dict], pool: list[dict], gold: list[dict], rft: RftSettings, eps: float
) -> tuple[list[dict], dict[str, Any]]:
    """The SFT rows (each kept completion as its prompt row's one answer, ``rft_sample`` saying
    which sample it was; then ``mix_gold`` rows of ``gold`` drawn with a fixed seed) and the
    pool's statistics."""
    import numpy as np

    from rubriq.studies.aggregate import reductions_by_prompt
    from rubriq.studies.demo import outcome_counts

    rows = {str(r["id"]): r for r in pool}
    selected = select_reductions(records, eps, rft.per_prompt)
    own, unfenced = [], 0
    for r in selected:
        row = rows[str(r["prompt_id"])]
        answer = trained_answer(row, str(r.get("text") or ""))
        if answer is None:
            unfenced += 1
            continue
        t, t0 = int(r["result"]["t_count"]), int(r["t0"])
        sample = {"sample": r.get("sample"), "t": t, "t0": t0, "average_fidelity": r["result"]["average_fidelity"]}
        own.append({**row, "sft_answers": [answer], "rft_source": "own", "rft_sample": sample})
    order = np.random.default_rng(20261207).permutation(len(gold))[: rft.mix_gold]
    mixed = [{**gold[i], "rft_source": "gold"} for i in sorted(order)]
    outcomes = outcome_counts(records, eps)
    stats = {
        "pool_split": rft.pool_split,
        "pool_prompts": len(pool),
        "samples_per_prompt": rft.sampling.samples,
        "samples": len(records),
        "outcomes": outcomes,
        "reductions": outcomes["reduction"],
        "prompts_with_reduction": sum(1 for v in reductions_by_prompt(records, eps).values() if any(v)),
        "kept": len(own),
        "kept_dropped_not_one_fenced_block": unfenced,
        "t_saved": sum(r["rft_sample"]["t0"] - r["rft_sample"]["t"] for r in own),
        "t0_of_kept": sum(r["rft_sample"]["t0"] for r in own),
        "mix_gold": len(mixed),
        "rows": len(own) + len(mixed),
    }
    return own + mixed, stats


# -- the stages -------------------------------------------------------------------------------
def sample_pool(
    rft: RftSettings, settings, warm, rows: list[dict], folder: Path, progress=None, keep: Path | None = None
) -> list[dict]:
    """The pool's scored samples, chunk by chunk (``folder/chunkK.jsonl``, each written whole
    once sampled and scored; chunks already there are read, not drawn again).

    With ``keep`` (``results_dir/pool`` under ``--commit``) each chunk is also copied there and
    committed as soon as it is scored, and a chunk committed there by an earlier run (on this
    machine or another, its run folder gone) is read instead of drawn: the rewriting pool took ~37
    minutes on 2 cores, longer than is safe to leave uncommitted.  The committed ``plan.json``
    must equal this run's (same warm-start weights, prompts, chunking, sampler and sampling)."""
    from rubriq.evaluation.sampling import generate, save_records, score
    from rubriq.models.generation import GenerationFlags, install_prefix_generate
    from rubriq.studies.warm_start import _sha256

    spec = held_out_sampling(rft.sampling, settings)
    plan = {
        "warm_start_sha256": _sha256(sorted(Path(rft.warm_start_model).glob("*.safetensors"))),
        "prompts": [r["id"] for r in rows],
        "chunk_prompts": rft.chunk_prompts,
        "batch_size": rft.batch_size,
        "sampler": rft.pool_sampler,
        "sampling": dataclasses.asdict(spec),
    }
    folder.mkdir(parents=True, exist_ok=True)
    recorded = folder / "plan.json"
    if recorded.is_file() and json.loads(recorded.read_text()) != plan:
        raise ConfigError(
            f"{folder} was sampled with other settings (warm-start, pool prompts, chunk_prompts, batch_size, "
            "pool_sampler or sampling; "
            f"{recorded}): delete the folder to sample the pool again"
        )
    recorded.write_text(json.dumps(plan, indent=2))
    if keep is not None:
        kept_plan = keep / "plan.json"
        if kept_plan.is_file() and json.loads(kept_plan.read_text()) != plan:
            raise ConfigError(
                f"the committed pool {keep} was sampled with other settings ({kept_plan}): "
                "remove it (git rm -r) to sample the pool again, or restore the settings it names"
            )
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy2(recorded, kept_plan)
    model = None
    records: list[dict] = []
    chunks = [rows[i : i + rft.chunk_prompts] for i in range(0, len(rows), rft.chunk_prompts)]
    for k, chunk in enumerate(chunks):
        path = folder / f"chunk{k:04d}.jsonl"
        kept = keep / path.name if keep is not None else None
        if not path.is_file() and kept is not None and kept.is_file():
            shutil.copy2(kept, path)  # committed by an earlier run
        if not path.is_file():
            if model is None:
                flags = GenerationFlags.of_generate(settings.generation.end_after_code_block)
                model = install_prefix_generate(warm.load(), warm.tokenizer, flags)
            start = time.perf_counter()
            drawn = generate(
                model,
                warm.tokenizer,
                chunk,
                spec.replace(seed=spec.seed + k),
                batch_size=rft.batch_size,
                progress=False,
                sampler=rft.pool_sampler,
            )
            scored = score(drawn, settings.rubric, progress=False)
            partial = path.with_suffix(".partial")
            save_records(scored, partial)
            partial.replace(path)  # a chunk is there whole or not at all
            log.info("rft pool: chunk %d of %d sampled (%.0f s)", k + 1, len(chunks), time.perf_counter() - start)
            if progress:
                progress(f"pool chunk {k + 1} of {len(chunks)} sampled and scored")
        if kept is not None and not kept.is_file():
            from rubriq.studies.units import git_commit

            shutil.copy2(path, kept)
            git_commit(kept.parent, f"rft pool: chunk {k + 1} of {len(chunks)} sampled and scored ({kept.parent})")
        records += layout.read_jsonl(path)
    return records


def train_adapter(
    rft: RftSettings, settings, rows: list[dict], folder: Path, dataset_sha256: str, progress=None
) -> Path:
    """``folder/adapter``: the warm-start adapter trained further on ``rows`` (kept when its
    ``rft.json`` names this dataset and these arguments)."""
    from peft import PeftModel

    from rubriq.models import EMBEDDED, adapter_base, embedded_dir, load_model, load_tokenizer, to_policy_precision
    from rubriq.studies.warm_start import _cpu_name, _sha256
    from rubriq.training.callbacks import trainer_callbacks
    from rubriq.training.config import EarlyStoppingSettings
    from rubriq.training.sft import run_sft

    source = Path(rft.warm_start_model)
    out = folder / "adapter"
    args = {**settings.sft.args, **rft.sft_args}
    source_sha = _sha256(sorted(source.glob("*.safetensors")))
    wanted = {"dataset_sha256": dataset_sha256, "sft_args": args, "warm_start_sha256": source_sha}
    info_path = out / "rft.json"
    if info_path.is_file() and (out / "adapter_model.safetensors").is_file():
        info = json.loads(info_path.read_text())
        if all(info.get(k) == v for k, v in wanted.items()):
            return out
        log.warning("%s was trained on other data or settings: training again", out)
    base_name = adapter_base(source)
    tokenizer = load_tokenizer(str(source))
    base = to_policy_precision(load_model(base_name), settings.model.precision)
    model = PeftModel.from_pretrained(base, str(source), is_trainable=True)
    if progress:
        progress(f"training the warm-start adapter further on {len(rows)} rows")
    if (folder / "metrics.jsonl").is_file():
        (folder / "metrics.jsonl").unlink()  # the log of this training only
    trained = run_sft(
        model,
        tokenizer,
        rows,
        folder / "train",
        args,
        None,  # the adapter is the model's own: PEFT's, loaded trainable
        callbacks=trainer_callbacks(folder, EarlyStoppingSettings(), phase="rft"),
    )
    if out.exists():
        shutil.rmtree(out)
    # PEFT reads its base's config.json on saving (did the vocabulary change?): the local copy, not
    # a Hub lookup of the name "embedded"; the adapter names its base as the warm-start did (below)
    for peft_config in trained.peft_config.values():
        peft_config.base_model_name_or_path = str(embedded_dir()) if base_name == EMBEDDED else base_name
    trained.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    config = json.loads((out / "adapter_config.json").read_text())
    # the base as the warm-start names it ("embedded", a hub id), or, for a folder, where it is
    config["base_model_name_or_path"] = base_name
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2))
    (out / "README.md").unlink(missing_ok=True)  # PEFT's empty card, naming this machine's base path
    own = sum(1 for r in rows if r.get("rft_source") == "own")
    trained_on = (
        f"dataset.jsonl: {len(rows)} rows, {own} of them completions the warm-start sampled on split "
        f"{rft.pool_split!r} and the rubric verified as correct reductions (T < T0), {len(rows) - own} "
        f"gold rows of split {settings.sft.split or settings.data.split!r}"
    )
    policy = source / "rubriq_policy.json"
    info = json.loads(policy.read_text()) if policy.is_file() else _policy_info(rows)
    info.update(
        algorithm="sft",
        reward=None,
        trained_by=f"rubriq study rft: the warm-start adapter {_portable_path(source)} trained further on "
        f"{trained_on} (rft.json)",
    )
    (out / "rubriq_policy.json").write_text(json.dumps(info, indent=2))
    record = {
        "trained_by": "rubriq study rft (rejection-sampling fine-tuning, remedy 1 of issue 52)",
        "warm_start_model": _portable_path(source),
        "base_model": base_name
        if base_name == EMBEDDED or not Path(base_name).exists()
        else _portable_path(Path(base_name)),
        "trained_on": trained_on,
        **wanted,
        "sha256": _sha256(sorted(out.glob("*.safetensors"))),
        "own_rows": own,
        "gold_rows": len(rows) - own,
        "trained_on_cpu": _cpu_name(),
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    info_path.write_text(json.dumps(record, indent=2))
    return out


def _policy_info(rows: list[dict]) -> dict[str, Any]:
    from rubriq.data.prompts import prompt_style_of_rows

    return {"prompt_style": prompt_style_of_rows(rows), "formats": sorted({r.get("format", "qasm2") for r in rows})}


def warm_start_evaluation(rft: RftSettings, evaluate, warm, folder: Path) -> dict:
    """The warm-start's evaluation (``folder/step0``): copied from ``reuse_step0`` when that
    holds it (checked: the same prompts, samples, batching and warm-start), else drawn."""
    from rubriq.studies.evaluate import step0_evaluation

    seed, study = rft.eval_study_seed, evaluate.study
    mine, records = layout.step0_path(folder, "test", seed), layout.step0_records(folder, "test", seed)
    source = Path(rft.reuse_step0) if rft.reuse_step0 else None
    if source is not None and not mine.is_file():
        found = layout.step0_path(source, "test", seed), layout.step0_records(source, "test", seed)
        if not all(p.is_file() for p in found):
            raise ConfigError(f"reuse_step0 {source}: no step-0 evaluation of seed {seed} ({found[0]}, {found[1]})")
        check_reusable(source, layout.read_jsonl(found[1]), evaluate, study, Path(rft.warm_start_model))
        records.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(found[1], records)
        shutil.copy2(found[0], mine)
        log.info("rft: the warm-start's evaluation reused from %s", source)
    return step0_evaluation(evaluate, warm, folder, seed)


def check_reusable(source: Path, records: list[dict], evaluate, study, adapter: Path) -> None:
    """A ConfigError unless the step-0 records in ``source`` are what this evaluation would draw:
    every prompt of the split ``samples`` times, sampled as configured (``study.json``), from
    this warm-start (``sft/fingerprint.json``'s adapter hash, where recorded)."""
    from rubriq.studies.warm_start import _sha256

    where = f"reuse_step0 {source}"
    ids = [r["id"] for r in evaluate.rows]
    counts = {i: sum(1 for r in records if r.get("prompt_id") == i) for i in ids}
    if len(records) != len(ids) * evaluate.sampling.samples or set(counts.values()) != {evaluate.sampling.samples}:
        raise ConfigError(
            f"{where}: its records are not the {len(ids)} prompts of split {study.split!r} x "
            f"{evaluate.sampling.samples} samples ({len(records)} records)"
        )
    targets = {r["id"]: r.get("target") for r in evaluate.rows}
    if any(r.get("target") != targets[r.get("prompt_id")] for r in records):
        raise ConfigError(
            f"{where}: its prompts have other targets than split {study.split!r} here (a dataset built otherwise)"
        )
    recorded = source / "study.json"
    if recorded.is_file():
        ran = json.loads(recorded.read_text())
        mine = study.to_record()
        keys = ("split", "samples", "temperature", "top_p", "top_k", "max_new_tokens", "batch_size", "max_prompts")
        differ = [k for k in keys if ran.get(k) != mine.get(k)]
        if not ran.get("same_eval_seed"):
            differ.append("same_eval_seed")
        if differ:
            raise ConfigError(f"{where}: sampled otherwise ({', '.join(differ)} differ from this evaluation's)")
    fingerprint = source / "sft" / "fingerprint.json"
    merged = json.loads(fingerprint.read_text()).get("merged_from") if fingerprint.is_file() else None
    if merged and merged.get("sha256") != _sha256(sorted(adapter.glob("*.safetensors"))):
        raise ConfigError(f"{where}: its warm-start is another adapter ({fingerprint}) than warm_start_model {adapter}")


def evaluations(rft: RftSettings, settings, warm, rft_model: Path, rows: list[dict], folder: Path) -> dict:
    """Both policies' evaluation rows and scored samples (``folder/eval/POLICY/step0``)."""
    from rubriq.models import load_tokenizer
    from rubriq.studies.evaluate import Evaluator, step0_evaluation
    from rubriq.studies.warm_start import WarmStart, _sha256

    evaluate = Evaluator(rft.evaluation_study(), settings, warm.tokenizer, rows)
    tuned = WarmStart(rft_model, load_tokenizer(str(rft_model)), settings.model.precision)
    out = {}
    for name in POLICIES:
        where = folder / "eval" / name
        policy = {
            "weights_sha256": _sha256(sorted((warm if name == "warm_start" else tuned).model_dir.glob("*.safetensors")))
        }
        marker = where / "policy.json"
        if marker.is_file() and json.loads(marker.read_text()) != policy:
            log.warning("%s evaluated other weights: evaluating again", where)
            shutil.rmtree(where)
        where.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(policy, indent=2))
        if name == "warm_start":
            row = warm_start_evaluation(rft, evaluate, warm, where)
        else:
            row = step0_evaluation(evaluate, tuned, where, rft.eval_study_seed)
        out[name] = {"row": row, "records": layout.read_jsonl(layout.step0_records(where, "test", rft.eval_study_seed))}
    return out


def compare(evaluated: dict, rows: list[dict], eps: float) -> dict[str, Any]:
    """Per policy the outcome counts of its samples (with the reduction rate's Wilson interval),
    and the paired per-prompt changes from the warm-start to the new adapter (correct reductions,
    correct, gap to PyZX closed; mean over prompts with its 95% t-interval)."""
    from rubriq.studies.aggregate import reduction_change, reductions_by_prompt, wilson
    from rubriq.studies.analysis import paired_change
    from rubriq.studies.demo import outcome_counts

    t_pyzx = {str(r["id"]): int(r["t_pyzx"]) for r in rows if r.get("t_pyzx") is not None}
    policies = {}
    for name, found in evaluated.items():
        counts, n = outcome_counts(found["records"], eps), len(found["records"])
        by_prompt = reductions_by_prompt(found["records"], eps)
        policies[name] = {
            "samples": n,
            "prompts": len(by_prompt),
            **counts,
            "reduction_rate": wilson(counts["reduction"], n),
            "prompts_with_reduction": sum(1 for v in by_prompt.values() if any(v)),
            "gap_closed": found["row"].get("gap_closed"),
        }
    before, after = evaluated["warm_start"]["records"], evaluated["rft"]["records"]
    change = paired_change(before, after, t_pyzx, eps)
    return {
        "policies": policies,
        "paired": {
            "reduction": reduction_change(reductions_by_prompt(before, eps), reductions_by_prompt(after, eps)),
            "correct": change["correct"],
            "gap_closed": change["gap_closed"],
        },
    }


def write_summary(folder: Path, rft: RftSettings, stats: dict, result: dict, sources: dict) -> Path:
    """``folder/summary.md`` and ``folder/summary.json``."""
    from rubriq.studies.evaluate import eval_seed
    from rubriq.tables import fmt, format_ci, markdown_table

    seed = eval_seed(rft.eval_study_seed, 0, "test")
    summary = {
        "settings": rft.to_record(),
        "pool": stats,
        "eval_seed": seed,
        **result,
        "sources": sources,
    }
    (folder / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    p = result["policies"]
    table = [
        [
            name,
            str(info["samples"]),
            f"{info['reduction']} ({format_ci(info['reduction_rate'])})",
            str(info["copy"]),
            str(info["other_correct"]),
            str(info["wrong"]),
            f"{info['prompts_with_reduction']} of {info['prompts']}",
            fmt(info["gap_closed"]),
        ]
        for name, info in p.items()
    ]
    paired = result["paired"]
    lines = [
        "# Remedy 1: rejection-sampling fine-tuning (RFT)",
        "",
        f"The warm-start (`{sources['warm_start_model']}`) sampled {stats['samples_per_prompt']} completions of "
        f"each of the {stats['pool_prompts']} prompts of split `{stats['pool_split']}` ({stats['samples']} samples): "
        f"{stats['reductions']} correct reductions (correct, T < T0) on {stats['prompts_with_reduction']} prompts, "
        f"{stats['outcomes']['copy']} copies, {stats['outcomes']['wrong']} wrong. Kept (at most {rft.per_prompt} per "
        f"prompt, the fewest T): {stats['kept']} completions ({stats['kept_dropped_not_one_fenced_block']} dropped: "
        f"not one fenced block), {stats['t_saved']} T gates saved of {stats['t0_of_kept']}; with {stats['mix_gold']} "
        f"gold rows of the SFT corpus, {stats['rows']} rows trained on: the same adapter trained further "
        f"(`{sources['adapter']}`, SHA-256 {sources['adapter_sha256'][:16]}...).",
        "",
        f"Both policies on split `{rft.eval_split}` x {rft.eval_samples} samples, with the same sampling seed "
        f"({seed}: step 0 of GRPO seed {rft.eval_study_seed} of a study on that split; common random numbers). "
        f"The warm-start's samples: {sources['warm_start_records']}. Correct reductions with 95% Wilson intervals:",
        "",
        *markdown_table(
            [
                "policy",
                "samples",
                "correct reductions",
                "copies",
                "other correct",
                "wrong",
                "prompts with a reduction",
                "gap closed",
            ],
            table,
        ),
        "",
        f"Paired change from the warm-start to RFT, mean over the {p['rft']['prompts']} prompts of the per-prompt "
        "change (95% t-interval over prompts):",
        "",
        *markdown_table(
            ["metric", "change"],
            [
                ["correct-reduction rate", format_ci(paired["reduction"])],
                ["correct rate", format_ci(paired["correct"])],
                ["gap to PyZX closed", format_ci(paired["gap_closed"])],
            ],
        ),
        "",
    ]
    md = folder / "summary.md"
    md.write_text("\n".join(lines), encoding="utf-8")
    return md


COMMITTED = ("summary.md", "summary.json", "stats.json", "dataset.jsonl", "metrics.jsonl")
"""The files of ``OUT/rft`` that ``--commit`` keeps (with the adapter and the evaluations)."""


def model_card(results: Path, shown: str | None = None) -> str:
    """The kept adapter's ``README.md`` (the Hugging Face model-card convention, as
    :func:`rubriq.studies.weights.model_card` writes for a study's kept GRPO policies): front
    matter (base model, library, the RFT adapter's metrics on the evaluation split) and what it
    is, what it was trained on, how it did against the warm-start, its limits, how to load it; every
    number read from ``results/summary.json`` and ``results/adapter/rft.json``. ``shown``: how the
    card names ``results`` (default: as given; the commands it prints run from the repository)."""
    import yaml

    from rubriq.models import EMBEDDED, EMBEDDED_HUB_ID
    from rubriq.studies.weights import card_front_matter
    from rubriq.tables import fmt, format_ci, markdown_table

    summary = json.loads((results / "summary.json").read_text())
    adapter = results / "adapter"
    info = json.loads((adapter / "rft.json").read_text())
    base = json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
    settings, stats, policies, paired = summary["settings"], summary["pool"], summary["policies"], summary["paired"]
    rft, warm = policies["rft"], policies["warm_start"]
    split, per_prompt = settings["eval_split"], rft["samples"] // max(rft["prompts"], 1)
    where = shown or results.as_posix()

    def rate(info: dict, key: str) -> float:
        return round(info[key] / max(info["samples"], 1), 3)

    _, low, high = rft["reduction_rate"]
    metrics = [
        {
            "type": "correct_reduction_rate",
            "value": rate(rft, "reduction"),
            "name": f"correct with T < T0 (95% Wilson interval {low:.3f}-{high:.3f})",
        },
        {"type": "copy_rate", "value": rate(rft, "copy"), "name": "correct copy of the input"},
        {"type": "wrong_rate", "value": rate(rft, "wrong"), "name": "not equivalent or unparsed"},
        {"type": "gap_closed", "value": round(rft["gap_closed"], 3), "name": "fraction of the T gap to PyZX closed"},
    ]
    meta = card_front_matter(
        "rubriq-rewriting-rft",
        EMBEDDED_HUB_ID if base == EMBEDDED else base,
        ["sft", "rft"],
        f"{rft['prompts']} generated rewrite circuits of split {split}, {per_prompt} samples each",
        metrics,
    )
    table = markdown_table(
        ["policy", "samples", "correct reductions", "copies", "wrong", "prompts with a reduction", "gap closed"],
        [
            [
                name,
                p["samples"],
                f"{p['reduction']} ({format_ci(p['reduction_rate'])})",
                p["copy"],
                p["wrong"],
                f"{p['prompts_with_reduction']} of {p['prompts']}",
                fmt(p["gap_closed"]),
            ]
            for name, p in (("warm-start", warm), ("this adapter", rft))
        ],
    )
    folder = where + "/adapter"
    args = ", ".join(f"{k} {v}" for k, v in info["sft_args"].items())
    return f"""---
{yaml.safe_dump(meta, sort_keys=False)}---

# RubriQ rewriting warm-start after rejection-sampling fine-tuning (LoRA on SmolLM2-135M-Instruct)

RubriQ's rewriting warm-start adapter (`{settings["warm_start_model"]}`) trained further on its own
verified correct reductions: remedy 1 of the rewriting study (docs/studies.md, "Rewriting";
`{where}/summary.md`). It rewrites small OpenQASM 2.0 Clifford+T circuits. A research
artifact, not a usable optimizer.

## Model

- **Base:** `{base}` (`base_model_name_or_path` in `adapter_config.json`; `embedded` is
  RubriQ's embedded SmolLM2-135M-Instruct): the warm-start's own LoRA adapter, the same rank and
  modules, trained further, so loading this folder gives the model that was evaluated.
- **Prompt:** the warm-start's (`rubriq_policy.json`), answers in OpenQASM 2.0.
- **Files:** `adapter_config.json`, the weights (SHA-256 `{info["sha256"][:16]}...`),
  `rubriq_policy.json`, `rft.json` (what it was trained on and how), this card; `SHA256SUMS` lists
  each file's hash.

## Training data and recipe

`rubriq study rft` (its settings: `settings` in `{where}/summary.json`): the warm-start sampled
{stats["samples_per_prompt"]} completions of each of the {stats["pool_prompts"]} prompts of split
`{stats["pool_split"]}` ({stats["samples"]} samples); RubriQ's fidelity engine verified
{stats["reductions"]} correct reductions (F_avg >= 0.99 and fewer T gates than the input) on
{stats["prompts_with_reduction"]} prompts. At most {settings["per_prompt"]} of each prompt, the fewest T first,
verbatim, are the training rows: {stats["rows"]} rows (`{where}/dataset.jsonl`, SHA-256
`{info["dataset_sha256"][:16]}...`), {stats["mix_gold"]} of them gold answers of the SFT corpus.
Supervised fine-tuning (TRL) of the same adapter, trained on {info.get("trained_on_cpu", "?")}: {args}.

## Evaluation

On split `{split}` ({rft["prompts"]} generated circuits of the training distribution, disjoint
from the pool), {per_prompt} samples each at the training temperature, with the same sampling
seed for both policies ({summary["eval_seed"]}; common random numbers), checked by RubriQ's
fidelity engine (correct: F_avg >= 0.99). 95% Wilson intervals:

{chr(10).join(table)}

Paired change from the warm-start, mean of the per-prompt change over the {rft["prompts"]} prompts
(95% t-interval): correct-reduction rate {format_ci(paired["reduction"])}, correct rate
{format_ci(paired["correct"])}, gap to PyZX closed {format_ci(paired["gap_closed"])}.

## Intended use and limits

- For: reproducing RubriQ's rewriting study and as the warm-start of further training (a study's
  `warm_start_model`, as `configs/studies/rewriting_pilot_rft.yaml` uses it).
- Not for: optimizing circuits you depend on without verification. Trained on 2-3 qubit circuits
  of a few dozen gates; most samples are wrong. `rubriq optimize` verifies every sample against
  the input and returns only verified ones.

## How to load

```bash
rubriq optimize my_circuit.qasm --model {folder} -n 8
```

```python
from rubriq.models import load_model

model = load_model("{folder}")  # the base with this adapter merged
```
"""


def publish(folder: Path, results: Path, reused: bool, commit: bool) -> list[Path]:
    """Copy the small files of ``folder`` (``OUT/rft``) into ``results``: :data:`COMMITTED`, the
    evaluations (the warm-start's records only when drawn here, not reused), the adapter without
    the base's tokenizer files and its ``SHA256SUMS``; with ``commit``, commit ``results``."""
    from rubriq.studies.units import adapter_fingerprint, git_commit, repo_relative

    written = []
    results.mkdir(parents=True, exist_ok=True)
    for name in COMMITTED:
        if (folder / name).is_file():
            shutil.copy2(folder / name, results / name)
            written.append(results / name)
    for name in POLICIES:
        for file in sorted((folder / "eval" / name / "step0").glob("*")):
            if name == "warm_start" and reused and file.suffix == ".jsonl":
                continue  # committed where it was reused from
            dst = results / "eval" / name / "step0" / file.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, dst)
            written.append(dst)
    adapter = results / "adapter"
    if adapter.exists():
        shutil.rmtree(adapter)
    adapter.mkdir(parents=True)
    for file in sorted((folder / "adapter").iterdir()):
        if file.is_file() and file.name not in TOKENIZER_FILES and file.name != "SHA256SUMS":
            shutil.copy2(file, adapter / file.name)
    (adapter / "README.md").write_text(model_card(results, repo_relative(results)), encoding="utf-8")
    sums = adapter_fingerprint(adapter)
    (adapter / "SHA256SUMS").write_text("".join(f"{sha}  {name}\n" for name, sha in sums.items()))
    written += sorted(adapter.iterdir())
    log.info("rft: %d files kept in %s", len(written), results)
    if commit:
        git_commit(results, f"rft (remedy 1 of issue 52): summary, pool statistics, dataset and adapter ({results})")
    return written


def run(config: str | Path, out: str | Path | None = None, commit: bool = False, progress=None) -> Path:
    """The whole run (resumable, every stage kept); returns ``OUT/rft/summary.md``."""
    from rubriq.data.prompts import target_key
    from rubriq.models import EMBEDDED, load_tokenizer, prepare_embedded
    from rubriq.studies.sft_curve import training_settings
    from rubriq.studies.warm_start import WarmStart, _sha256, merge_adapter
    from rubriq.training.train_rubriq import load_rows

    rft = RftSettings.from_yaml(config)
    adapter = Path(rft.warm_start_model)
    if not (adapter / "adapter_config.json").is_file():
        raise ConfigError(f"warm_start_model {adapter}: not a PEFT adapter folder (no adapter_config.json)")
    top = Path(out or rft.output_dir)
    folder = top / "rft"
    folder.mkdir(parents=True, exist_ok=True)
    settings = training_settings(rft, top)
    if settings.model.name_or_path == EMBEDDED and not settings.model.tiny:
        prepare_embedded()
    eps = 1 - settings.rubric.fidelity.correct_threshold
    pool = load_rows(settings, rft.pool_split)
    pool = pool[: rft.max_prompts] if rft.max_prompts else pool
    eval_rows = load_rows(settings, rft.eval_split)
    if not pool or not eval_rows:
        raise ConfigError(f"pool_split {rft.pool_split!r} or eval_split {rft.eval_split!r} of {top / 'data'} is empty")
    shared = {target_key(r) for r in pool} & {target_key(r) for r in eval_rows}
    if shared:
        raise ConfigError(
            f"pool_split {rft.pool_split!r} shares {len(shared)} targets with eval_split {rft.eval_split!r}: "
            "the evaluation would test on what was trained on"
        )
    model_dir = merge_adapter(adapter, folder / "warm_start_model")
    warm = WarmStart(model_dir, load_tokenizer(str(model_dir)), settings.model.precision)

    if progress:
        progress(f"pool: {len(pool)} prompts of split {rft.pool_split!r} x {rft.sampling.samples} samples")
    if commit and not rft.results_dir:
        raise ConfigError("--commit needs results_dir in the YAML (where the kept files go)")
    keep = Path(rft.results_dir) / "pool" if commit else None
    records = sample_pool(rft, settings, warm, pool, folder / "pool", progress, keep=keep)
    gold = load_rows(settings, settings.sft.split or None) if rft.mix_gold else []
    rows, stats = build_dataset(records, pool, gold, rft, eps)
    dataset = folder / "dataset.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "stats.json").write_text(json.dumps(stats, indent=2))
    log.info(
        "rft pool: %d correct reductions of %d samples; %d kept, %d rows to train on",
        stats["reductions"],
        stats["samples"],
        stats["kept"],
        stats["rows"],
    )
    if not rows:
        raise ValueError(
            f"no verified correct reduction in the pool ({folder / 'stats.json'}) and mix_gold 0: nothing to train on"
        )
    dataset_sha = hashlib.sha256(dataset.read_bytes()).hexdigest()
    trained = train_adapter(rft, settings, rows, folder, dataset_sha, progress)
    rft_model = merge_adapter(trained, folder / "model")

    if progress:
        progress(f"evaluating the warm-start and the RFT adapter on split {rft.eval_split!r}")
    evaluated = evaluations(rft, settings, warm, rft_model, eval_rows, folder)
    result = compare(evaluated, eval_rows, eps)
    reused = bool(rft.reuse_step0)
    sources = {
        "warm_start_model": _portable_path(adapter),
        "adapter": _portable_path(trained),
        "adapter_sha256": _sha256(sorted(trained.glob("*.safetensors"))),
        "warm_start_records": (f"reused from `{_portable_path(Path(rft.reuse_step0))}`" if reused else "drawn here"),
    }
    report = write_summary(folder, rft, stats, result, sources)
    if commit:
        publish(folder, Path(rft.results_dir), reused, commit=True)
    return report


def _portable_path(path: Path) -> str:
    from rubriq.studies.settings import _portable

    return _portable(str(path.resolve()))


__all__ = [
    "RftSettings",
    "build_dataset",
    "compare",
    "publish",
    "run",
    "sample_pool",
    "select_reductions",
    "trained_answer",
    "write_summary",
]
