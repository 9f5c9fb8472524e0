"""Cheaper GRPO generation on CPUs: shared-prompt prefill, and completions that end with the circuit.

GRPO samples N completions of the same prompt, so a generation batch holds each prompt N
times and ``model.generate`` pre-fills it N times.  On a CPU the pre-fill of N copies of a
few hundred prompt tokens costs about as much as the decoding itself.  :func:`prefix_generate`
pre-fills each distinct prompt once, repeats its key/value cache N times and lets
``generate`` continue from it: the same tokens are generated (greedy decoding is identical,
tested), for a fraction of the pre-fill time.

Written here because transformers' ``generate`` has no "shared prefix" option
(``num_return_sequences`` expands the prompt before the pre-fill); it falls back to a plain
``generate`` whenever the batch is not made of equal-size groups of identical prompts, or the
model's cache cannot be repeated.

:class:`EndAfterCodeBlock` ends a completion once its fenced code block is closed: from then on
the only token it may sample is the end-of-sequence token, so a completion never spends tokens
on prose after its circuit (TRL's completion mask ends at that EOS as usual).  Written here
because ``generate``'s ``stop_strings`` needs the tokenizer inside ``generate``, which TRL does
not pass, and it stops without an EOS token, which TRL would read as a truncated completion.

With ``sample_without_dropout``, :func:`prefix_generate` samples with the model in eval mode (the
adapter's dropout off, as vLLM samples a policy) and restores its training mode afterwards, so
the update still sees dropout; it also skips dropout's random masks on every decoding step.
"""

from __future__ import annotations

import functools
from typing import Any


def _groups(input_ids) -> int | None:
    """Size of the runs of identical consecutive rows when they are all equal, else None."""
    n = input_ids.shape[0]
    size = 1
    while size < n and bool((input_ids[size] == input_ids[0]).all()):
        size += 1
    if size == 1 or n % size:
        return None
    for start in range(0, n, size):
        if not bool((input_ids[start : start + size] == input_ids[start]).all()):
            return None
    return size


def fence_token_ids(tokenizer) -> list[int]:
    """Ids of the vocabulary's tokens whose text contains a code fence (three backticks)."""
    vocab = tokenizer.get_vocab()
    return sorted(i for token, i in vocab.items() if "```" in tokenizer.convert_tokens_to_string([token]))


class EndAfterCodeBlock:
    """A ``transformers`` logits processor: once the generated part of a row holds two fence
    tokens (the block's opening and closing fence), only ``eos_token_id`` may follow.

    >>> import torch
    >>> end = EndAfterCodeBlock(fence_ids=[7], eos_token_id=0, prompt_length=1)
    >>> scores = end(torch.tensor([[5, 7, 3, 7], [5, 7, 3, 3]]), torch.zeros(2, 9))
    >>> scores[0].argmax().item(), bool(torch.isinf(scores[0, 1:]).all()), bool(torch.isfinite(scores[1]).all())
    (0, True, True)
    """

    def __init__(self, fence_ids: list[int], eos_token_id: int, prompt_length: int) -> None:
        import torch

        self.fence_ids = torch.tensor(fence_ids, dtype=torch.long)
        self.eos_token_id, self.prompt_length = int(eos_token_id), int(prompt_length)

    def __call__(self, input_ids, scores):
        import torch

        generated = input_ids[:, self.prompt_length :]
        closed = torch.isin(generated, self.fence_ids.to(generated.device)).sum(dim=1) >= 2
        if bool(closed.any()):
            eos = scores[:, self.eos_token_id].clone()
            scores[closed] = float("-inf")
            scores[closed, self.eos_token_id] = eos[closed].clamp(min=0.0)
        return scores


def prefix_generate(generate, model: Any, input_ids=None, attention_mask=None, **kwargs):
    """``generate(input_ids, attention_mask, **kwargs)`` with each distinct prompt pre-filled once
    (and, when :func:`install_prefix_generate` was given fence ids, every completion ended after
    its code block)."""
    import torch
    from transformers import DynamicCache, LogitsProcessorList

    if getattr(generate, "_rubriq_eval", False) and getattr(model, "training", False):
        model.eval()
        try:
            return prefix_generate(generate, model, input_ids, attention_mask, **kwargs)
        finally:
            model.train()
    end = getattr(generate, "_rubriq_end_after_block", None)
    if end is not None and input_ids is not None:
        fence_ids, eos = end
        processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        processors.append(EndAfterCodeBlock(fence_ids, eos, input_ids.shape[1]))
        kwargs["logits_processor"] = processors

    size = (
        None
        if input_ids is None or "past_key_values" in kwargs or "cache" in kwargs or input_ids.shape[1] < 2
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
    model: Any, tokenizer: Any = None, end_after_code_block: bool = False, sample_without_dropout: bool = False
) -> Any:
    """Make ``model.generate`` pre-fill shared prompts once (instance attribute; idempotent) and,
    with ``end_after_code_block`` (needs ``tokenizer``), end each completion after its code block;
    with ``sample_without_dropout``, sample in eval mode (module docstring)."""
    if getattr(model.generate, "_rubriq_prefix", False):
        return model
    inner = functools.partial(model.generate)
    inner._rubriq_eval = bool(sample_without_dropout)  # type: ignore[attr-defined]
    if end_after_code_block:
        if tokenizer is None or tokenizer.eos_token_id is None:
            raise ValueError("end_after_code_block needs the tokenizer (and its eos token)")
        inner._rubriq_end_after_block = (fence_token_ids(tokenizer), tokenizer.eos_token_id)  # type: ignore[attr-defined]
    wrapped = functools.partial(prefix_generate, inner, model)
    wrapped._rubriq_prefix = True  # type: ignore[attr-defined]
    model.generate = wrapped
    return model
