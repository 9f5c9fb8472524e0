"""Cheaper GRPO generation on CPUs: the generation flags as one group, shared-prompt prefill,
completions that end with the circuit, and the choice of sampler.

:class:`GenerationFlags` is the one declaration of the GRPO step's generation settings (YAML:
``generation:`` in the training settings; ``training/config.py`` embeds it and the trainer hands
it to :func:`install_prefix_generate` as one object). ``sampler`` chooses the path every
``model.generate`` call of a policy takes:

* ``static`` (default): RubriQ's decoding loop (``decoding.py``) over
  :class:`~rubriq.models.static_decoding.StaticDecoder` (the adapter merged into fused copies
  while sampling, a static cache, shared prompts read once per group) where it supports the model,
  the model's own forward otherwise; measured fastest (benchmarks/results/generation.md);
* ``loop``: the same loop over the transformers model's forward;
* ``generate``: transformers' ``generate`` (with the options below), as the committed studies ran.

GRPO samples N completions of the same prompt, so a generation batch holds each prompt N
times and ``model.generate`` pre-fills it N times.  :func:`prefix_generate` pre-fills each
distinct prompt once, repeats its key/value cache N times and lets ``generate`` continue from it:
the same tokens are generated (greedy decoding is identical, tested). Written here because
transformers' ``generate`` has no "shared prefix" option; it falls back to a plain ``generate``
whenever the batch is not made of equal-size groups of identical prompts.

:class:`~rubriq.models.decoding.EndAfterCodeBlock` ends a completion once its fenced code block is
closed (only the end-of-sequence token may follow), so a completion never spends tokens on prose
after its circuit. With ``sample_without_dropout``, :func:`prefix_generate` samples with the model
in eval mode (the adapter's dropout off, as vLLM samples a policy; the static sampler always
does) and restores its training mode afterwards. With ``fast_sampling``, a sampling ``generate``
given a ``generation_config`` (as TRL gives it) draws each token with
:class:`~rubriq.models.decoding.SampleFromNucleus` instead of transformers' full-vocabulary sort
and ``torch.multinomial``: the same distribution (tested by frequencies), other random draws.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Literal

from rubriq.models.decoding import (
    COMPACT_FRACTION,
    DecodePlan,
    EndAfterCodeBlock,
    ObserveToken,
    SampleFromNucleus,
    _groups,
    causal_lm,
    decode,
    decode_plan,
    fence_token_ids,
)
from rubriq.models.sampling import SamplingSpec

__all__ = [
    "COMPACT_FRACTION",
    "DecodePlan",
    "EndAfterCodeBlock",
    "GenerateOptions",
    "GenerationFlags",
    "ObserveToken",
    "SampleFromNucleus",
    "causal_lm",
    "decode",
    "decode_plan",
    "fence_token_ids",
    "generate_with_options",
    "install_prefix_generate",
    "prefix_generate",
]

Sampler = Literal["static", "loop", "generate"]
SAMPLERS: tuple[str, ...] = ("static", "loop", "generate")


@dataclass(frozen=True)
class GenerationFlags:
    """The GRPO step's generation settings, declared once (YAML: the ``generation:`` section of the
    training settings; the old top-level keys are read into it, ``fast_decoding: true / false`` as
    ``sampler: loop / generate``)."""

    sampler: Sampler = "static"
    """Which path samples (module docstring): ``static`` (default, fastest measured; the adapter
    merged into copies, no dropout while sampling), ``loop`` (RubriQ's decoding loop over the
    transformers forward) or ``generate`` (transformers' generate). Used by the GRPO step and,
    with the same names, by evaluate / synthesize / optimize."""
    shared_prompt_prefill: bool = True
    """GRPO without vLLM: pre-fill each prompt once for its N completions and apply these flags
    (False: TRL's plain generate)."""
    end_after_code_block: bool = True
    """End each completion after its fenced code block (no tokens spent on prose after it)."""
    skip_zero_variance_groups: bool = True
    """Leave groups whose rewards are all equal out of the loss (DAPO's dynamic sampling without
    resampling; logged as dynamic_sampling/skipped_groups)."""
    cpu_logprobs: bool = True
    """On a CPU: the policy's log-probabilities from one float32 LM-head product per micro-batch
    instead of TRL's chunked kernel, which is slow without Triton (same values)."""
    sample_without_dropout: bool = False
    """Sample with the adapter's dropout off (eval mode, as vLLM samples); the update keeps it.
    The static sampler always samples without dropout."""
    shared_prompt_update: bool = True
    """With cpu_logprobs: in the update, run each distinct prompt of a micro-batch through the
    decoder once and its N completions from its key/value cache (same values up to rounding)."""
    fast_sampling: bool = True
    """Draw each token from the top-p nucleus found among the 256 most likely tokens (Gumbel-max)
    instead of transformers' full sort and multinomial: the same distribution, other draws."""
    drop_finished_rows: bool = True
    """With the loop / static sampler: completions (static: whole groups) that ended leave the
    decoding batch, so the rest decode in a smaller batch."""

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {', '.join(SAMPLERS)}, got {self.sampler!r}")

    @classmethod
    def of_generate(cls, end_after_code_block: bool = True) -> GenerationFlags:
        """The flags that sample exactly as transformers' ``generate`` does (plus the shared
        pre-fill and, optionally, the end after the code block): how the committed studies
        sampled their evaluations."""
        return cls(sampler="generate", end_after_code_block=end_after_code_block, fast_sampling=False)


_OTHER_WARPERS = {"top_h": None, "min_p": None, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0}


def _fast_sampling(kwargs: dict) -> dict | None:
    """``generate`` keywords that sample through :class:`SampleFromNucleus` (greedy decoding of
    its scores), or None when the call is not plain temperature / top-k / top-p sampling of one
    beam given as a ``generation_config``."""
    import copy

    from transformers import LogitsProcessorList
    from transformers.generation.logits_process import TemperatureLogitsWarper

    config = kwargs.get("generation_config")
    if config is None or not config.do_sample or (config.num_beams or 1) != 1:
        return None
    if any(k in kwargs for k in ("do_sample", "temperature", "top_p", "top_k", "min_p", "num_beams")):
        return None
    if any(getattr(config, k, None) not in (None, default) for k, default in _OTHER_WARPERS.items()):
        return None
    if getattr(config, "watermarking_config", None) is not None:
        return None
    temperature, top_p, top_k = config.temperature, config.top_p, config.top_k
    greedy = copy.deepcopy(config)
    greedy.do_sample, greedy.temperature, greedy.top_p, greedy.top_k = False, None, None, None
    processors = LogitsProcessorList(kwargs.get("logits_processor") or [])
    if temperature is not None and temperature != 1.0:
        processors.append(TemperatureLogitsWarper(temperature))
    processors.append(SampleFromNucleus(top_p=1.0 if top_p is None else top_p, top_k=top_k or 0))
    return {**kwargs, "generation_config": greedy, "logits_processor": processors}


@dataclass(frozen=True)
class GenerateOptions:
    """How :func:`prefix_generate` runs a ``generate`` call (module docstring)."""

    end_after_block: tuple[tuple[int, ...], int] | None = None
    """(fence token ids, eos id): end each completion after its code block."""
    sample_without_dropout: bool = False
    fast_sampling: bool = False
    sampler: Sampler = "generate"
    drop_finished_rows: bool = True
    """With the ``loop`` or ``static`` sampler: the rows that ended leave the batch (:func:`decode`)."""
    sampling: SamplingSpec | None = None
    """The sampling of the calls that name none (``sampling=``): what the GRPO trainer's ``generate``
    calls sample (its temperature, top-p and top-k from the typed training settings), handed to the
    ``loop`` and ``static`` samplers as it is, not read back from transformers' warpers."""

    @classmethod
    def from_flags(cls, flags: GenerationFlags, tokenizer: Any = None) -> GenerateOptions:
        """The options of ``flags`` (``end_after_code_block`` needs ``tokenizer`` and its eos)."""
        if flags.end_after_code_block and (tokenizer is None or tokenizer.eos_token_id is None):
            raise ValueError("end_after_code_block needs the tokenizer (and its eos token)")
        return cls(
            end_after_block=(
                (tuple(fence_token_ids(tokenizer)), tokenizer.eos_token_id) if flags.end_after_code_block else None
            ),
            sample_without_dropout=flags.sample_without_dropout,
            fast_sampling=flags.fast_sampling,
            sampler=flags.sampler,
            drop_finished_rows=flags.drop_finished_rows,
        )


def prefix_generate(generate, model: Any, input_ids=None, attention_mask=None, **kwargs):
    """``generate(input_ids, attention_mask, **kwargs)`` with each distinct prompt pre-filled once,
    and the :class:`GenerateOptions` that :func:`install_prefix_generate` gave ``generate`` (none
    for a plain ``generate``). ``sampling`` (a :class:`~rubriq.models.sampling.SamplingSpec`, not
    passed on to ``generate``): the sampling the call's keywords say, handed to the ``loop`` and
    ``static`` samplers as it is (:func:`decode_plan`)."""
    import torch
    from transformers import DynamicCache, LogitsProcessorList

    options = getattr(generate, "_rubriq_options", None) or GenerateOptions()
    if options.sample_without_dropout and getattr(model, "training", False):
        model.eval()
        try:
            return prefix_generate(generate, model, input_ids, attention_mask, **kwargs)
        finally:
            model.train()
    spec = kwargs.pop("sampling", None) or options.sampling
    if options.end_after_block is not None and input_ids is not None:
        fence_ids, eos = options.end_after_block
        processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        processors.append(EndAfterCodeBlock(list(fence_ids), eos, input_ids.shape[1]))
        kwargs["logits_processor"] = processors
    if options.sampler != "generate" and "cache" not in kwargs and "past_key_values" not in kwargs:
        plan = decode_plan(model, input_ids, kwargs, spec)
        if plan is not None:
            return decode(
                model,
                input_ids,
                attention_mask,
                plan,
                fast_sampling=options.fast_sampling,
                drop_finished_rows=options.drop_finished_rows,
                static=options.sampler == "static",
            )
    if options.fast_sampling:
        kwargs = _fast_sampling(kwargs) or kwargs

    config = kwargs.get("generation_config")
    expands = any(  # beams and num_return_sequences expand the batch inside generate
        max(int(kwargs.get(k) or 1), int(getattr(config, k, None) or 1)) > 1
        for k in ("num_beams", "num_return_sequences")
    )
    size = (
        None
        if input_ids is None or expands or "past_key_values" in kwargs or "cache" in kwargs or input_ids.shape[1] < 2
        else _groups(input_ids)
    )
    if size is None:
        return generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    unique = input_ids[::size, :-1]
    mask = attention_mask[::size, :-1] if attention_mask is not None else torch.ones_like(unique)
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache()
    with torch.no_grad():
        model(input_ids=unique, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True)
    cache.batch_repeat_interleave(size)
    return generate(input_ids=input_ids, attention_mask=attention_mask, cache=cache, **kwargs)


def install_prefix_generate(
    model: Any, tokenizer: Any = None, flags: GenerationFlags | None = None, sampling: SamplingSpec | None = None
) -> Any:
    """Make ``model.generate`` pre-fill shared prompts once (instance attribute; idempotent) and
    sample as ``flags`` say (:class:`GenerationFlags`; None: transformers' ``generate`` with
    nothing else changed); ``end_after_code_block`` needs ``tokenizer``. ``sampling``: the
    :class:`~rubriq.models.sampling.SamplingSpec` of calls that pass none (the GRPO trainer's)."""
    if getattr(model.generate, "_rubriq_prefix", False):
        return model
    options = GenerateOptions.from_flags(flags or GenerationFlags.of_generate(False), tokenizer)
    if sampling is not None:
        options = dataclasses.replace(options, sampling=sampling)
    model.generate = _wrap(model, model.generate, options)
    return model


def generate_with_options(model: Any, **changes: Any):
    """``model.generate`` with these :class:`GenerateOptions` fields changed, as a new function
    (``model`` is left as it is): the options :func:`install_prefix_generate` gave it, or the
    defaults for a plain ``generate``."""
    current = model.generate
    if getattr(current, "_rubriq_prefix", False):
        inner = current.args[0]
        return _wrap(model, inner.func, dataclasses.replace(inner._rubriq_options, **changes))
    return _wrap(model, current, GenerateOptions(**changes))


def _wrap(model: Any, generate, options: GenerateOptions):
    inner = functools.partial(generate)
    inner._rubriq_options = options  # type: ignore[attr-defined]
    wrapped = functools.partial(prefix_generate, inner, model)
    wrapped._rubriq_prefix = True  # type: ignore[attr-defined]
    return wrapped
