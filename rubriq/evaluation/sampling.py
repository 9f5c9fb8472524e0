"""Sample a model on prompt rows and score the completions with the rubric.

A *record* is one completion, typed (``records.py``): :class:`Record` (``prompt_id``,
``text``, ``target``, ``family``, ``format``, ``bucket``, ``t0``, ``dataset``, ``sample``) and,
once scored, :class:`ScoredRecord` with its ``result`` (``EvaluationResult.to_dict()``, no
circuit).  Records are saved as JSONL so that metrics and reports can be recomputed without
sampling again (``metrics.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubriq.config import RubricConfig
from rubriq.evaluation.records import Record, ScoredRecord
from rubriq.evaluation.settings import EvalSettings
from rubriq.extract.files import open_record
from rubriq.models.sampling import Policy, SamplingSpec


def generate(
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    spec: SamplingSpec | None = None,
    *,
    batch_size: int = 8,
    progress: bool = True,
    description: str = "sampling",
    on_batch=None,
    sampler: str = "static",
    **fields: Any,
) -> list[Record]:
    """``spec.samples`` completions per row as ``spec`` says (:class:`SamplingSpec`: greedy when
    its temperature is 0; ``fields``: spec fields given one by one, over ``spec``), batched,
    left-padded, seeded with ``spec.seed``;
    ``on_batch(done, total)`` is called after each batch (the app's progress bar).  The console
    progress (``rubriq.progress``) advances with every generated token, so it moves within a
    batch; without a terminal it logs a line per batch.

    ``sampler`` chooses the path (``rubriq.models.generation.GenerationFlags.sampler``): ``static``
    (default; RubriQ's decoding loop over the static decoder: the adapter merged into copies,
    static cache, shared prompts read once; the model's forward where the architecture is not
    Llama-like), ``loop`` (the loop over the model's forward) or ``generate`` (``model.generate``).
    Greedy completions are the same tokens on every path (up to rounding ties); sampled ones have
    the same distribution but other random draws. A ``model.generate`` installed by
    ``install_prefix_generate`` keeps its other options (ending completions after their code
    block)."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    from rubriq.models.generation import ObserveToken, generate_with_options
    from rubriq.progress import progress as progress_bar

    spec = (spec or SamplingSpec()).replace(**fields)
    spec.validate()
    samples, max_new_tokens = spec.samples, spec.max_new_tokens
    torch.manual_seed(spec.seed)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    jobs = [(row, k) for row in rows for k in range(samples)]
    # batch prompts of similar length together (a batch decodes until its longest completion,
    # and rewrite answers are as long as their prompt); records come back in the input order
    texts_by_row = {
        id(r): tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows
    }
    order = sorted(range(len(jobs)), key=lambda i: len(texts_by_row[id(jobs[i][0])]))
    jobs = [jobs[i] for i in order]
    records: list[Record] = []
    model.eval()

    class TokenTick(LogitsProcessor, ObserveToken):
        """Called once per generated token of a batch: moves the bar by batch/max_new_tokens."""

        def __init__(self, bar, step: float) -> None:
            self.bar, self.step = bar, step

        def __call__(self, input_ids, scores):
            self.bar.advance(self.step, log_line=False)
            return scores

    sample_batch = (
        model.generate if sampler == "generate" else generate_with_options(model, fast_sampling=True, sampler=sampler)
    )
    try:
        with (
            progress_bar(f"{description} ({len(jobs)} completions)", len(jobs), enabled=progress) as bar,
            torch.no_grad(),
        ):
            for start in range(0, len(jobs), batch_size):
                chunk = jobs[start : start + batch_size]
                texts = [texts_by_row[id(r)] for r, _ in chunk]
                enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
                kwargs = {
                    **spec.generate_kwargs(),
                    "pad_token_id": tokenizer.pad_token_id,
                    "logits_processor": LogitsProcessorList([TokenTick(bar, 0.999 * len(chunk) / max_new_tokens)]),
                }
                # RubriQ's samplers get the spec itself (their plan's temperature, top-k, top-p)
                spec_kw = {} if sampler == "generate" else {"sampling": spec}
                out = sample_batch(**enc, **kwargs, **spec_kw)
                decoded = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
                for (row, k), text in zip(chunk, decoded, strict=True):
                    records.append(Record.of_row(row, text, k))
                bar.set(len(records))
                if on_batch is not None:
                    on_batch(len(records), len(jobs))
    finally:
        tokenizer.padding_side = side
    restored: list[Record | None] = [None] * len(records)
    for position, record in zip(order, records, strict=False):
        restored[position] = record
    return [r for r in restored if r is not None]


def sample(
    model: Any, tokenizer: Any, rows: list[dict], settings: EvalSettings, seed: int = 0, description: str = "sampling"
) -> list[Record]:
    """:func:`generate` with an ``evaluation:`` section's settings (its sampling spec, with
    ``seed``, and batch size): how the quickstart samples a policy."""
    return generate(
        model,
        tokenizer,
        rows,
        settings.sampling.replace(seed=seed),
        batch_size=settings.batch_size,
        description=description,
    )


@dataclass
class LocalPolicy:
    """A transformers model on this machine as a :class:`~rubriq.models.sampling.Policy`
    (``batch_size`` completions decoded at a time; ``options``: :func:`generate`'s other
    keywords, e.g. ``sampler``)."""

    tokenizer: Any
    model: Any
    batch_size: int = 8
    options: dict[str, Any] = field(default_factory=dict)

    def generate(self, rows: list[dict], spec: SamplingSpec, **keywords: Any) -> list[Record]:
        """:meth:`Policy.generate <rubriq.models.sampling.Policy.generate>`: ``keywords``
        (``progress``, ``description``, ``on_batch``) go to :func:`generate` as they are, with
        its defaults where left out."""
        unknown = keywords.keys() - {"progress", "description", "on_batch"}
        if unknown:
            raise TypeError(f"LocalPolicy.generate() got unexpected keyword arguments {sorted(unknown)}")
        return generate(self.model, self.tokenizer, rows, spec, batch_size=self.batch_size, **keywords, **self.options)


def as_policy(policy: Policy[Record] | tuple[Any, Any], batch_size: int = 8) -> Policy[Record]:
    """``policy`` as a :class:`~rubriq.models.sampling.Policy`: a policy as it is (an
    :class:`~rubriq.evaluation.endpoint.EndpointPolicy`, a :class:`LocalPolicy`), a
    ``(tokenizer, model)`` pair (what :func:`rubriq.evaluation.evaluate.load_policy` returns) as
    a :class:`LocalPolicy`."""
    if isinstance(policy, tuple):
        tokenizer, model = policy
        return LocalPolicy(tokenizer, model, batch_size=batch_size)
    return policy


def score(
    records: list[Record], config: RubricConfig | None = None, workers: int = 1, progress: bool = True, chunk: int = 8
) -> list[ScoredRecord]:
    """Add the rubric ``result`` to each record (each distinct (target, text) scored once),
    ``chunk`` completions at a time so that the progress moves."""
    from rubriq.evaluator.batch import BatchScorer
    from rubriq.progress import progress as progress_bar

    out: list[ScoredRecord] = []
    with (
        BatchScorer(config, workers=workers) as scorer,
        progress_bar(f"scoring ({len(records)} completions)", len(records), enabled=progress) as bar,
    ):
        for start in range(0, len(records), chunk):
            part = records[start : start + chunk]
            results = scorer.results([r.text for r in part], [r.target or "" for r in part])
            out += [r.scored(res) for r, res in zip(part, results, strict=True)]
            bar.advance(len(part))
    return out


def save_records(records: Iterable[Record], path: str | Path) -> Path:
    """One JSON object per line (``Record.to_json``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_record(path, "w") as fh:  # 0600: records hold completions and their rewards
        for r in records:
            fh.write(json.dumps(r.to_json()) + "\n")
    return path


def load_records(path: str | Path) -> list[Record]:
    """The records of a JSONL file (:class:`ScoredRecord` where a line has its ``result``); a
    line that is not a record is a ``ValueError`` naming the file and the line."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}, line {number}: a record must be a JSON object, got {type(record).__name__}")
        try:
            out.append(Record.from_json(record))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}, line {number}: {exc}") from None
    return out
