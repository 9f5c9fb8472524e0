"""RubriQ's decoding loop: how each token is drawn and the loop that calls the model per token.

Moved out of ``generation.py`` (which wraps ``generate`` for TRL) so that the sampler reads in one
place. :func:`decode` runs a call that :func:`decode_plan` accepts (plain temperature / top-k /
top-p sampling or greedy decoding of a full-attention causal LM, as transformers itself resolves
the call's generation config) instead of ``generate``: a loop that calls the model once per token,
pre-fills each distinct prompt once, counts fences and end-of-sequence tokens incrementally, and
with ``drop_finished_rows`` drops finished rows (or, on the static path, finished groups) from the
batch. Two ways to run the model's step:

* ``static=False``: the transformers model's own forward, keys and values written into buffers
  sized for the whole decoding (transformers' ``DynamicLayer`` concatenates, copying the layer's
  whole cache every step);
* ``static=True`` (the default sampler, ``sampler: static``): :class:`~rubriq.models.static_decoding.StaticDecoder`
  where it supports the model (Llama-like layers): the current LoRA weights merged into fused
  copies, a static cache, each shared prompt's keys and values read once per group; the
  transformers forward otherwise.

Greedy decoding gives ``generate``'s tokens; sampling has transformers' distribution (tested by
frequencies against the exact probabilities) and, with ``return_logprobs``, each token's
log-probability equals the whole-row forward's (tests/test_generation_decode.py,
tests/test_sampler_distribution.py). Tokens are drawn by :class:`SampleFromNucleus` (the top-p
nucleus among the 256 most likely tokens, Gumbel-max) or, with ``fast_sampling`` off, by
transformers' warpers and ``torch.multinomial``.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rubriq.models.sampling import SamplingSpec

log = logging.getLogger(__name__)


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


def _inverse_cdf(scores):
    """One draw per row from the softmax of ``scores`` by inverse transform sampling: a uniform
    number against the row's cumulative sum of ``exp(scores - max)`` (accumulated in float64).
    Exact as ``torch.multinomial`` of the softmax is, at a fraction of its time on a CPU (16 x
    49,152 scores: ~5 ms against ~18 ms, one core); a token of score -inf is never drawn."""
    import torch

    cdf = (scores - scores.amax(-1, keepdim=True)).exp_().cumsum(-1, dtype=torch.float64)
    u = torch.rand(scores.shape[0], 1, dtype=torch.float64, device=scores.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True)[:, 0].clamp_(max=scores.shape[-1] - 1)


class SampleFromNucleus:
    """A ``transformers`` logits processor that draws the next token itself, for a ``generate``
    run greedily: it returns scores that are 0 at the drawn token and -inf elsewhere.

    The draw is from the tokens that transformers' ``TopKLogitsWarper`` (``top_k``; 0: off)
    and ``TopPLogitsWarper`` (``top_p``) would keep, with probabilities proportional to
    ``exp(scores)``, as transformers samples (apply the temperature before it). When the
    ``candidates`` most likely tokens hold a row's nucleus, it is found among them and sampled
    by the Gumbel-max trick (float64 noise); other rows go through transformers' warpers and
    ``torch.multinomial`` over the whole vocabulary. Without top-k or top-p (``top_p`` 1 and
    ``top_k`` 0) nothing is cut and each row is drawn from its whole softmax by inverse transform
    sampling (:func:`_inverse_cdf`).

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

    def draw(self, scores):
        """One token id per row of ``scores`` (a ``LongTensor``), drawn as described above."""
        import torch

        vocab = scores.shape[-1]
        if self.top_p >= 1.0 and (not self.top_k or self.top_k >= vocab):
            return _inverse_cdf(scores)  # nothing is cut: the softmax of the whole vocabulary
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
        elif self.top_p >= 1.0:  # top-k beyond the candidates, no nucleus
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
        return drawn

    def __call__(self, input_ids, scores):
        import torch

        drawn = self.draw(scores)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(-1, drawn[:, None], 0.0)


class ObserveToken:
    """Base class of logits processors that only watch decoding (a progress bar): called once per
    decoding step with the scores, they return them unchanged, so :func:`decode` may call them
    with the rows still running only (and ``input_ids=None``)."""

    def __call__(self, input_ids, scores):
        return scores


@dataclass(frozen=True)
class DecodePlan:
    """What a ``generate`` call asks for, as :func:`decode` runs it (:func:`decode_plan` reads it
    from transformers' own resolution of the call's generation config)."""

    max_new_tokens: int
    eos_token_ids: tuple[int, ...]
    pad_token_id: int
    do_sample: bool = True
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    warpers: tuple = ()
    """transformers' top-k / top-p warpers, applied after the temperature as ``generate`` applies
    them when the draw is transformers' ``multinomial`` (``fast_sampling`` off)."""
    observers: tuple = ()
    end_after_block: EndAfterCodeBlock | None = None


def causal_lm(model: Any):
    """The transformers model :func:`decode` runs (the base model of a PEFT LoRA model, its
    adapters in place), or None when it cannot: an encoder-decoder, a PEFT prompt-learning
    adapter, a forward without ``position_ids`` / ``cache``, or layers other than full attention
    (sliding windows, linear attention, state-space layers: their caches are not a list of
    key/value tensors)."""
    import inspect

    lm = model
    if hasattr(model, "get_base_model"):
        peft = getattr(model, "active_peft_config", None)
        if peft is None or getattr(peft, "is_prompt_learning", False):
            return None
        lm = model.get_base_model()
    config = getattr(lm, "config", None)
    if config is None or getattr(config, "is_encoder_decoder", False) or not hasattr(lm, "_prepare_generation_config"):
        return None
    try:
        from transformers.cache_utils import get_layer_types_and_kwargs

        layer_types = get_layer_types_and_kwargs(config.get_text_config(decoder=True))[0]
        parameters = inspect.signature(lm.forward).parameters
    except (AttributeError, TypeError, ValueError, ImportError):
        return None
    if any(t != "full_attention" for t in layer_types) or not {"position_ids", "cache", "use_cache"} <= set(parameters):
        return None
    return lm


def decode_plan(model: Any, input_ids, kwargs: dict, spec: SamplingSpec | None = None) -> DecodePlan | None:
    """The :class:`DecodePlan` of ``generate(input_ids=input_ids, **kwargs)``, or None when the call
    asks for anything :func:`decode` does not do the way ``generate`` does: beams, assisted or
    contrastive decoding, logits processors other than temperature / top-k / top-p (a repetition
    penalty, a minimum length, ...), stop strings or a time limit, returned scores or caches,
    extra model inputs, or a model :func:`causal_lm` cannot run. The generation config is resolved
    by transformers itself (the model's defaults, then the call's), so the plan samples what
    ``generate`` would. With ``spec`` (the :class:`~rubriq.models.sampling.SamplingSpec` the call's
    keywords come from), the plan's temperature, top-k and top-p are the spec's (top-k unset: the
    resolved generation config's), not read back from transformers' warpers."""
    import copy

    from transformers import LogitsProcessorList
    from transformers.generation.configuration_utils import GenerationMode
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    lm = causal_lm(model)
    if lm is None or input_ids is None or input_ids.dim() != 2 or input_ids.shape[1] < 1:
        return None
    kwargs = dict(kwargs)
    observers, end = [], None
    for processor in kwargs.pop("logits_processor", None) or []:
        if isinstance(processor, ObserveToken):
            observers.append(processor)
        elif type(processor) is EndAfterCodeBlock and end is None:
            end = processor
        else:
            return None
    try:
        config, rest = lm._prepare_generation_config(copy.deepcopy(kwargs.pop("generation_config", None)), **kwargs)
        if rest or config.get_generation_mode() not in (GenerationMode.SAMPLE, GenerationMode.GREEDY_SEARCH):
            return None
        if (config.num_return_sequences or 1) != 1 or config.return_dict_in_generate or config.is_assistant:
            return None
        if config.max_time is not None or config.stop_strings is not None or config.compile_config is not None:
            return None
        lm._prepare_special_tokens(config, True, device=input_ids.device, batch_size=input_ids.shape[0])
        processors = lm._get_logits_processor(
            generation_config=config,
            input_ids_seq_length=input_ids.shape[1],
            encoder_input_ids=input_ids,
            logits_processor=LogitsProcessorList(),
            device=input_ids.device,
            model_kwargs={},
        )
    except (AttributeError, TypeError, ValueError):
        return None
    temperature, top_k, top_p = 1.0, 0, 1.0
    for processor in processors:
        if type(processor) is TemperatureLogitsWarper:
            temperature = float(processor.temperature)
        elif type(processor) is TopKLogitsWarper and processor.filter_value == float("-inf"):
            top_k = int(processor.top_k)
        elif type(processor) is TopPLogitsWarper and processor.min_tokens_to_keep == 1:
            top_p = float(processor.top_p)
        else:
            return None
    if spec is not None and bool(config.do_sample) != (not spec.greedy):
        return None  # the keywords are not the spec's
    if spec is not None and not spec.greedy:
        temperature, top_p = spec.temperature, spec.top_p
        top_k = spec.top_k if spec.top_k is not None else int(config.top_k or 0)
    eos = config.eos_token_id
    eos_ids = tuple(int(e) for e in (eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos]))
    pad = config.pad_token_id if config.pad_token_id is not None else (eos_ids[0] if eos_ids else None)
    new = config.max_new_tokens if config.max_new_tokens is not None else (config.max_length or 0) - input_ids.shape[1]
    if pad is None or new is None or new < 1:
        return None
    return DecodePlan(
        max_new_tokens=int(new),
        eos_token_ids=eos_ids,
        pad_token_id=int(pad),
        do_sample=bool(config.do_sample),
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        warpers=tuple(p for p in processors if type(p) is not TemperatureLogitsWarper),
        observers=tuple(observers),
        end_after_block=end,
    )


def _decode_layer_class():
    from transformers.cache_utils import DynamicLayer

    class BufferedLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys and values live in buffers sized for the whole decoding:
        each step writes its position in place, where transformers' ``DynamicLayer`` concatenates
        (a copy of the layer's whole cache per step). ``keys`` / ``values`` are views of the
        filled part, so the model and the mask see a dynamic cache of the current length."""

        def __init__(self, keys, values, capacity: int) -> None:
            super().__init__()
            self.device, self.is_initialized = keys.device, True
            self._fill(keys, values, capacity)

        def _fill(self, keys, values, capacity: int) -> None:
            b, h, n = keys.shape[:3]
            self._k = keys.new_empty((b, h, max(capacity, n), keys.shape[-1]))
            self._v = values.new_empty((b, values.shape[1], max(capacity, n), values.shape[-1]))
            self._k[:, :, :n] = keys
            self._v[:, :, :n] = values
            self._n = n
            self.keys, self.values = self._k[:, :, :n], self._v[:, :, :n]

        def update(self, key_states, value_states, *args, **kwargs):
            n, m = self._n, key_states.shape[-2]
            if n + m > self._k.shape[2]:
                self._fill(self.keys, self.values, 2 * (n + m))
            self._k[:, :, n : n + m] = key_states
            self._v[:, :, n : n + m] = value_states
            self._n = n + m
            self.keys, self.values = self._k[:, :, : n + m], self._v[:, :, : n + m]
            return self.keys, self.values

        def select_rows(self, indices, capacity: int) -> None:
            """Keep the rows ``indices`` (copying their filled part only) in buffers of ``capacity``."""
            keys, values = self._filled()
            self._fill(keys[indices], values[indices], capacity)

        def _filled(self):
            if self.keys is None or self.values is None:
                raise RuntimeError("the decoding cache was used before its prompt was pre-filled")
            return self.keys, self.values

        def batch_select_indices(self, indices) -> None:
            self.select_rows(indices, self._k.shape[2])

        def batch_repeat_interleave(self, repeats: int) -> None:
            keys, values = self._filled()
            self._fill(keys.repeat_interleave(repeats, 0), values.repeat_interleave(repeats, 0), self._k.shape[2])

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove > 0:
                raise ValueError("crop takes a negative number of tokens to remove")
            self._n = max(0, self._n + tokens_to_remove)
            self.keys, self.values = self._k[:, :, : self._n], self._v[:, :, : self._n]

        def reset(self) -> None:
            self._n = 0
            self.keys, self.values = self._k[:, :, :0], self._v[:, :, :0]

    return BufferedLayer


@functools.cache
def _buffered_layer():
    return _decode_layer_class()


COMPACT_FRACTION = 8
""":func:`decode` drops finished rows from the batch once at least 1/8 of its rows (and at least
one) have finished: each drop copies the caches of the rows that stay."""


def _next_tokens(plan: DecodePlan, sampler: SampleFromNucleus | None, logits):
    """``(scores, tokens)``: the logits at the plan's temperature (shown to its observers) and one
    token per row drawn from them (``sampler``; transformers' warpers and ``multinomial``; or
    greedily)."""
    import torch

    scores = logits / plan.temperature if plan.temperature != 1.0 else logits
    for observer in plan.observers:
        observer(None, scores)
    if sampler is not None:
        return scores, sampler.draw(scores)
    if plan.do_sample:
        warped = scores
        for warper in plan.warpers:
            warped = warper(None, warped)
        return scores, torch.multinomial(warped.softmax(-1), num_samples=1)[:, 0]
    return scores, scores.argmax(-1)


def decode(
    model: Any,
    input_ids,
    attention_mask=None,
    plan: DecodePlan | None = None,
    fast_sampling: bool = True,
    drop_finished_rows: bool = True,
    return_logprobs: bool = False,
    static: bool = False,
):
    """The token ids ``generate`` returns for ``plan`` (see :func:`_decode_forward`); with
    ``static``, decoded by :class:`~rubriq.models.static_decoding.StaticDecoder` where it supports
    the model (:func:`_decode_static`), else by the model's own forward."""
    if plan is None:
        raise ValueError("decode needs a DecodePlan (decode_plan reads one from generate's arguments)")
    lm = causal_lm(model)
    if lm is None:
        raise ValueError(f"decode cannot run {type(model).__name__}: use its generate (see causal_lm)")
    if static:
        from rubriq.models.static_decoding import supported

        why = supported(lm)
        if why is None:
            return _decode_static(
                model, input_ids, attention_mask, plan, fast_sampling, drop_finished_rows, return_logprobs
            )
        log.debug("static decoding cannot run this model (%s): the model's forward decodes", why)
    return _decode_forward(lm, input_ids, attention_mask, plan, fast_sampling, drop_finished_rows, return_logprobs)


def _decode_forward(
    lm: Any,
    input_ids,
    attention_mask,
    plan: DecodePlan,
    fast_sampling: bool = True,
    drop_finished_rows: bool = True,
    return_logprobs: bool = False,
):
    """The token ids ``generate`` returns for ``plan`` (prompt + completion, each row padded with
    ``plan.pad_token_id`` after its end-of-sequence token, as long as the longest row), decoded
    by a loop that calls the model's forward itself (module docstring); with ``return_logprobs``,
    also the log-probability of each generated token under the model's distribution at the
    temperature (0 after a row's end), shape ``(batch, new tokens)``.

    Each distinct prompt (equal rows of ``input_ids`` and mask) is pre-filled once; the keys and
    values live in buffers written in place (no per-step concatenation); with
    ``drop_finished_rows`` the rows that ended leave the batch (the rest keep their own cache,
    mask and positions); with ``fast_sampling``, tokens are drawn by :class:`SampleFromNucleus`,
    else by transformers' warpers and ``torch.multinomial`` as in ``generate``."""
    import torch
    from transformers import DynamicCache

    batch, prompt = input_ids.shape
    device = input_ids.device
    mask = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).to(torch.long)
    size = _groups(torch.cat([input_ids, mask], dim=1)) or 1
    first = torch.arange(0, batch, size, device=device)
    keep_last = {"logits_to_keep": 1} if "logits_to_keep" in _forward_parameters(lm) else {}
    capacity = prompt + plan.max_new_tokens
    sampler = SampleFromNucleus(top_p=plan.top_p, top_k=plan.top_k) if plan.do_sample and fast_sampling else None
    eos = torch.tensor(plan.eos_token_ids, dtype=torch.long, device=device)
    end = plan.end_after_block
    fence_ids = end.fence_ids.to(device) if end is not None else None
    with torch.no_grad():
        cache = DynamicCache(config=lm.config)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = lm(
            input_ids=input_ids[first],
            attention_mask=mask[first],
            position_ids=positions[first],
            cache=cache,
            use_cache=True,
            **keep_last,
        )
        logits = out.logits[:, -1].float().repeat_interleave(size, dim=0)
        layer = _buffered_layer()
        prefilled: list[Any] = list(cache.layers)  # full-attention layers (decode_plan checked it)
        cache.layers = [
            layer(cached.keys.repeat_interleave(size, 0), cached.values.repeat_interleave(size, 0), capacity)
            for cached in prefilled
        ]
        buffered: list[Any] = cache.layers
        rows = torch.arange(batch, device=device)  # the row of input_ids each batch position holds
        lengths = mask.sum(-1)  # the position of each row's next token
        masks = torch.cat([mask, mask.new_ones((batch, plan.max_new_tokens))], dim=1)
        fences = torch.zeros(batch, dtype=torch.long, device=device)
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        generated = torch.full((batch, plan.max_new_tokens), plan.pad_token_id, dtype=torch.long, device=device)
        logps = torch.zeros(generated.shape, dtype=torch.float32, device=device) if return_logprobs else None
        steps = 0
        for step in range(plan.max_new_tokens):
            scores, tokens = _next_tokens(plan, sampler, logits)
            if end is not None:
                tokens = torch.where(fences >= 2, end.eos_token_id, tokens)
            tokens = torch.where(finished, plan.pad_token_id, tokens)
            generated[rows, step] = tokens
            if logps is not None:
                chosen = scores.log_softmax(-1).gather(-1, tokens[:, None])[:, 0]
                logps[rows, step] = torch.where(finished, 0.0, chosen)
            steps = step + 1
            if fence_ids is not None:
                fences += torch.isin(tokens, fence_ids)
            finished |= torch.isin(tokens, eos)
            done = int(finished.sum())
            if done == finished.numel() or steps == plan.max_new_tokens:
                break
            if drop_finished_rows and done >= max(1, finished.numel() // COMPACT_FRACTION):
                keep = (~finished).nonzero()[:, 0]
                for cached in buffered:
                    cached.select_rows(keep, capacity)
                rows, lengths, masks, fences, finished, tokens = (
                    x[keep] for x in (rows, lengths, masks, fences, finished, tokens)
                )
            out = lm(
                input_ids=tokens[:, None],
                attention_mask=masks[:, : prompt + step + 1],
                position_ids=(lengths + step)[:, None],
                cache=cache,
                use_cache=True,
                **keep_last,
            )
            logits = out.logits[:, -1].float()
    sequences = torch.cat([input_ids, generated[:, :steps]], dim=1)
    return (sequences, logps[:, :steps]) if logps is not None else sequences


def _forward_parameters(lm) -> set[str]:
    import inspect

    return set(inspect.signature(lm.forward).parameters)


def _decode_static(
    model: Any,
    input_ids,
    attention_mask,
    plan: DecodePlan,
    fast_sampling: bool = True,
    drop_finished_rows: bool = True,
    return_logprobs: bool = False,
):
    """:func:`_decode_forward`'s loop over a :class:`~rubriq.models.static_decoding.StaticDecoder`
    built from the model's current weights (the adapter merged into copies; the model is not
    modified). Each distinct prompt is one group of equal consecutive rows (:func:`_groups`;
    groups of one row when they are not equal); with ``drop_finished_rows``, rows that ended stop
    running through the projections and the MLP (the step's matrix products: most of its time),
    and groups whose rows have all ended leave the batch once at least 1/8 of the rows have."""
    import torch

    from rubriq.models.static_decoding import StaticDecoder

    batch, prompt = input_ids.shape
    device = input_ids.device
    mask = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).to(torch.long)
    size = _groups(torch.cat([input_ids, mask], dim=1)) or 1
    sampler = SampleFromNucleus(top_p=plan.top_p, top_k=plan.top_k) if plan.do_sample and fast_sampling else None
    eos = torch.tensor(plan.eos_token_ids, dtype=torch.long, device=device)
    end = plan.end_after_block
    fence_ids = end.fence_ids.to(device) if end is not None else None
    training = bool(getattr(model, "training", False))
    with torch.no_grad():
        decoder = StaticDecoder.from_model(model)
        model.eval()  # the prompt's pass without dropout, as every step of the merged weights
        try:
            logits = decoder.prefill(input_ids, mask, size, plan.max_new_tokens)
        finally:
            model.train(training)
        rows = torch.arange(batch, device=device)  # the row of input_ids each batch position holds
        fences = torch.zeros(batch, dtype=torch.long, device=device)
        finished = torch.zeros(batch, dtype=torch.bool, device=device)
        generated = torch.full((batch, plan.max_new_tokens), plan.pad_token_id, dtype=torch.long, device=device)
        logps = torch.zeros(generated.shape, dtype=torch.float32, device=device) if return_logprobs else None
        active = None  # the batch positions still decoding (None: all)
        steps = 0
        for step in range(plan.max_new_tokens):
            scores, drawn = _next_tokens(plan, sampler, logits)  # for the active rows
            if active is None:
                tokens = drawn
            else:
                tokens = torch.full_like(rows, plan.pad_token_id).index_copy_(0, active, drawn)
            if end is not None:
                tokens = torch.where(fences >= 2, end.eos_token_id, tokens)
            tokens = torch.where(finished, plan.pad_token_id, tokens)
            generated[rows, step] = tokens
            if logps is not None:
                mine = tokens if active is None else tokens[active]
                where = rows if active is None else rows[active]
                chosen = scores.log_softmax(-1).gather(-1, mine[:, None])[:, 0]
                logps[where, step] = torch.where(finished, 0.0, chosen) if active is None else chosen
            steps = step + 1
            if fence_ids is not None:
                fences += torch.isin(tokens, fence_ids)
            finished |= torch.isin(tokens, eos)
            done = int(finished.sum())
            if done == finished.numel() or steps == plan.max_new_tokens:
                break
            if drop_finished_rows and done:
                groups = ~finished.view(-1, decoder.group).all(dim=1)
                if not bool(groups.all()) and done >= max(1, finished.numel() // COMPACT_FRACTION):
                    keep = decoder.keep_groups(groups.nonzero()[:, 0])
                    rows, fences, finished, tokens = (x[keep] for x in (rows, fences, finished, tokens))
                active = (~finished).nonzero()[:, 0]
            logits = decoder.step(tokens if active is None else tokens[active], step, active)
    sequences = torch.cat([input_ids, generated[:, :steps]], dim=1)
    return (sequences, logps[:, :steps]) if logps is not None else sequences
