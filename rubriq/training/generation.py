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

With ``fast_sampling``, a sampling ``generate`` given a ``generation_config`` (as TRL gives it)
draws each token with :class:`SampleFromNucleus` instead of transformers' full-vocabulary sort
(top-p) and ``torch.multinomial``, which took 3.5 of 19.8 s of a 16-completion batch of SmolLM2
on 2 cores (cProfile): it finds the top-p nucleus among the 256 most likely tokens and samples
in it by the Gumbel-max trick, so each token has the distribution transformers' sampling gives
it (tested by frequencies); a row whose nucleus is larger falls back to transformers' own
top-p and ``multinomial``. Written here because transformers has no faster sampling path on a
CPU (vLLM and FlashInfer sample this way on GPUs). The random draws differ, so the completions
of a seed differ from transformers' sampling.
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


class SampleFromNucleus:
    """A ``transformers`` logits processor that draws the next token itself, for a ``generate``
    run greedily: it returns scores that are 0 at the drawn token and -inf elsewhere.

    The draw is from the tokens that transformers' ``TopKLogitsWarper`` (``top_k``; 0: off)
    and ``TopPLogitsWarper`` (``top_p``) would keep, with probabilities proportional to
    ``exp(scores)``, as transformers samples (apply the temperature before it). When the
    ``candidates`` most likely tokens hold a row's nucleus, it is found among them and sampled
    by the Gumbel-max trick (float64 noise); other rows go through transformers' warpers and
    ``torch.multinomial`` over the whole vocabulary.

    >>> import torch
    >>> torch.manual_seed(0) and None
    >>> scores = torch.tensor([[2.0, 1.0, 0.5, -9.0]] * 20000)  # top-p 0.9 keeps tokens 0, 1, 2
    >>> drawn = SampleFromNucleus(top_p=0.9, candidates=3)(None, scores).argmax(-1)
    >>> exact = scores[0, :3].softmax(-1)  # 0.629, 0.231, 0.140
    >>> sorted(set(drawn.tolist())), bool((torch.bincount(drawn, minlength=3)[:3] / 20000 - exact).abs().max() < 0.02)
    ([0, 1, 2], True)
    """

    def __init__(self, top_p: float = 1.0, top_k: int = 0, candidates: int = 256) -> None:
        if not 0.0 < top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.top_p, self.top_k, self.candidates = float(top_p), int(top_k or 0), int(candidates)

    def __call__(self, input_ids, scores):
        import torch

        vocab = scores.shape[-1]
        k = min(self.candidates, vocab) if not self.top_k else min(self.top_k, self.candidates, vocab)
        top, index = scores.topk(k, dim=-1)
        within_top_k = bool(self.top_k) and self.top_k <= k
        if within_top_k:
            log_z = top.logsumexp(-1, keepdim=True)
        elif self.top_k and self.top_k < vocab:  # top-k beyond the candidates: renormalize over its k
            log_z = scores.topk(self.top_k, dim=-1).values.logsumexp(-1, keepdim=True)
        else:
            log_z = scores.logsumexp(-1, keepdim=True)
        p = (top.double() - log_z.double()).exp()
        keep = (p.cumsum(-1) - p) < self.top_p  # transformers keeps a token when the mass above it is < top_p
        keep[:, 0] = True
        if within_top_k or k == vocab:
            covered = torch.ones_like(keep[:, 0])
        elif self.top_p >= 1.0:  # no nucleus: every token may be drawn
            covered = torch.zeros_like(keep[:, 0])
        else:
            covered = ~keep[:, -1]
        drawn = torch.empty(scores.shape[0], dtype=torch.long, device=scores.device)
        if bool(covered.any()):
            noise = torch.empty(top.shape, dtype=torch.float64, device=scores.device).exponential_().log()
            race = (top.double() - noise).masked_fill(~keep, float("-inf"))
            drawn[covered] = index.gather(-1, race.argmax(-1, keepdim=True))[covered, 0]
        if not bool(covered.all()):
            from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

            rest = scores[~covered]
            if self.top_k:
                rest = TopKLogitsWarper(self.top_k)(None, rest)
            if self.top_p < 1.0:
                rest = TopPLogitsWarper(self.top_p)(None, rest)
            drawn[~covered] = torch.multinomial(rest.softmax(-1), num_samples=1)[:, 0]
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(-1, drawn[:, None], 0.0)


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
    if getattr(generate, "_rubriq_fast_sampling", False):
        kwargs = _fast_sampling(kwargs) or kwargs

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
    model: Any,
    tokenizer: Any = None,
    end_after_code_block: bool = False,
    sample_without_dropout: bool = False,
    fast_sampling: bool = False,
) -> Any:
    """Make ``model.generate`` pre-fill shared prompts once (instance attribute; idempotent) and,
    with ``end_after_code_block`` (needs ``tokenizer``), end each completion after its code block;
    with ``sample_without_dropout``, sample in eval mode; with ``fast_sampling``, draw tokens with
    :class:`SampleFromNucleus` (module docstring)."""
    if getattr(model.generate, "_rubriq_prefix", False):
        return model
    inner = functools.partial(model.generate)
    inner._rubriq_eval = bool(sample_without_dropout)  # type: ignore[attr-defined]
    inner._rubriq_fast_sampling = bool(fast_sampling)  # type: ignore[attr-defined]
    if end_after_code_block:
        if tokenizer is None or tokenizer.eos_token_id is None:
            raise ValueError("end_after_code_block needs the tokenizer (and its eos token)")
        inner._rubriq_end_after_block = (fence_token_ids(tokenizer), tokenizer.eos_token_id)  # type: ignore[attr-defined]
    wrapped = functools.partial(prefix_generate, inner, model)
    wrapped._rubriq_prefix = True  # type: ignore[attr-defined]
    model.generate = wrapped
    return model
