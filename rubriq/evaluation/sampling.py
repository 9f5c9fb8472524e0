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
from pathlib import Path
from typing import Any

from rubriq.config import RubricConfig
from rubriq.evaluation.records import Record, ScoredRecord, dataset_of
from rubriq.evaluation.settings import EvalSettings
from rubriq.extract.files import open_record


def generate(
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    samples: int = 1,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    batch_size: int = 8,
    seed: int = 0,
    progress: bool = True,
    description: str = "sampling",
    on_batch=None,
    fast_decoding: bool = False,
) -> list[Record]:
    """``samples`` completions per row (greedy when ``temperature`` is 0), batched, left-padded;
    ``on_batch(done, total)`` is called after each batch (the app's progress bar).  The console
    progress (``rubriq.progress``) advances with every generated token, so it moves within a
    batch; without a terminal it logs a line per batch.

    With ``fast_decoding``, each batch is decoded by RubriQ's own loop
    (:func:`rubriq.models.generation.decode`: each distinct prompt pre-filled once, finished
    rows dropped from the batch, tokens drawn from the top-p nucleus by the Gumbel-max trick)
    wherever it does what ``model.generate`` would (plain sampling or greedy decoding of a
    full-attention causal LM), and by ``model.generate`` otherwise: greedy completions are the
    same tokens, sampled ones have the same distribution but other random draws (so it is off by
    default: the committed studies' evaluations are reruns of ``model.generate``). A
    ``model.generate`` installed by ``install_prefix_generate`` keeps its other options (ending
    completions after their code block)."""
    import torch
    from transformers import LogitsProcessor, LogitsProcessorList

    from rubriq.models.generation import ObserveToken, generate_with_options
    from rubriq.progress import progress as progress_bar

    if samples < 1:
        raise ValueError("samples must be >= 1")
    if temperature == 0 and samples > 1:
        raise ValueError("greedy decoding (temperature 0) gives one distinct sample; set a temperature > 0")
    torch.manual_seed(seed)
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
        generate_with_options(model, fast_sampling=True, fast_decoding=True) if fast_decoding else model.generate
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
                    "do_sample": temperature > 0,
                    "max_new_tokens": max_new_tokens,
                    "pad_token_id": tokenizer.pad_token_id,
                    "logits_processor": LogitsProcessorList([TokenTick(bar, 0.999 * len(chunk) / max_new_tokens)]),
                }
                if temperature > 0:
                    kwargs.update(temperature=temperature, top_p=top_p)
                out = sample_batch(**enc, **kwargs)
                decoded = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
                for (row, k), text in zip(chunk, decoded, strict=True):
                    records.append(
                        Record(
                            prompt_id=row.get("id"),
                            text=text,
                            target=row.get("target"),
                            family=row.get("family"),
                            format=row.get("format"),
                            bucket=row.get("bucket"),
                            t0=row.get("t0"),
                            dataset=dataset_of(row),
                            sample=k,
                        )
                    )
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
    """:func:`generate` with an ``evaluation:`` section's settings (samples, tokens, temperature,
    top_p, batch size): how ``rubriq evaluate``, the quickstart and the studies sample a policy."""
    return generate(
        model,
        tokenizer,
        rows,
        samples=settings.samples,
        max_new_tokens=settings.max_new_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        batch_size=settings.batch_size,
        seed=seed,
        description=description,
    )


def generate_with(policy: Any, rows: list[dict], **kwargs: Any) -> list[Record]:
    """:func:`generate` for a local policy, a ``(tokenizer, model)`` pair, or
    :meth:`EndpointPolicy.generate <rubriq.evaluation.endpoint.EndpointPolicy.generate>` for a
    model behind an OpenAI-compatible endpoint: the same records either way (``kwargs``: those
    of :func:`generate`)."""
    from rubriq.evaluation.endpoint import is_endpoint_policy

    if is_endpoint_policy(policy):
        return policy.generate(rows, **kwargs)
    tokenizer, model = policy
    return generate(model, tokenizer, rows, **kwargs)


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
