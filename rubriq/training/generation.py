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
import logging
import os
from typing import Any

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


def prefix_generate(generate, model: Any, input_ids=None, attention_mask=None, **kwargs):
    """``generate(input_ids, attention_mask, **kwargs)`` with each distinct prompt pre-filled once
    (and, when :func:`install_prefix_generate` was given fence ids, every completion ended after
    its code block)."""
    import torch
    from transformers import DynamicCache, LogitsProcessorList

    pool = getattr(generate, "_rubriq_pool", None)
    if pool is not None and not _IN_WORKER:
        out = pool.generate(model, input_ids, attention_mask, kwargs)
        if out is not None:
            return out
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
    model: Any,
    tokenizer: Any = None,
    end_after_code_block: bool = False,
    sample_without_dropout: bool = False,
    generation_workers: int = 0,
) -> Any:
    """Make ``model.generate`` pre-fill shared prompts once (instance attribute; idempotent) and,
    with ``end_after_code_block`` (needs ``tokenizer``), end each completion after its code block;
    with ``sample_without_dropout``, sample in eval mode; with ``generation_workers >= 2``, sample
    in that many forked processes (:class:`GenerationPool`; module docstring)."""
    if getattr(model.generate, "_rubriq_prefix", False):
        return model
    inner = functools.partial(model.generate)
    inner._rubriq_eval = bool(sample_without_dropout)  # type: ignore[attr-defined]
    if generation_workers >= 2:
        inner._rubriq_pool = GenerationPool(generation_workers)  # type: ignore[attr-defined]
    elif generation_workers not in (0, 1):
        raise ValueError(f"generation_workers must be 0 (in this process) or >= 2, got {generation_workers}")
    if end_after_code_block:
        if tokenizer is None or tokenizer.eos_token_id is None:
            raise ValueError("end_after_code_block needs the tokenizer (and its eos token)")
        inner._rubriq_end_after_block = (fence_token_ids(tokenizer), tokenizer.eos_token_id)  # type: ignore[attr-defined]
    wrapped = functools.partial(prefix_generate, inner, model)
    wrapped._rubriq_prefix = True  # type: ignore[attr-defined]
    model.generate = wrapped
    return model


# -- sampling in forked processes -----------------------------------------------------------------
_IN_WORKER = False  # True in a GenerationPool process: its generate runs here, never re-dispatched


def close_generation_pool(model: Any) -> None:
    """Stop the sampling processes of ``model.generate`` (if it has a pool; a later call forks again)."""
    inner = getattr(getattr(model, "generate", None), "args", (None,))[0]
    pool = getattr(inner, "_rubriq_pool", None)
    if pool is not None:
        pool.close()


def _hf_model(model: Any) -> Any:
    """The transformers model under a PEFT wrapper (the one whose ``generation_config`` is used)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _serve(conn, model: Any, threads: int) -> None:
    """A GenerationPool process: generate for each request on the forked copy of the policy."""
    global _IN_WORKER
    import traceback

    import torch

    _IN_WORKER = True
    torch.set_num_threads(threads)
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        input_ids, attention_mask, kwargs, seed, training, config = request
        try:
            torch.manual_seed(seed)
            model.train(training)
            if config is not None:
                _hf_model(model).generation_config = config
            with torch.no_grad():
                out = model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
            conn.send(("ok", out))
        except BaseException as exc:  # noqa: BLE001 (reported to the parent, which raises it)
            conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))


class GenerationPool:
    """Sample one policy's completions in ``workers`` forked processes, each a share of the
    batch (whole prompt groups, so the shared pre-fill still applies) with CPUs // ``workers``
    threads; the parent pads their sequences to one length and concatenates them in order.

    Why: on a small CPU, sampling a 135M model does not use the cores well: SmolLM2-135M in
    bf16 sampled 16 x 96 tokens in 12.1 s with 2 threads, two 1-thread processes 8 x 96 each in
    7.3 s at once (1.66x), two Python threads in one process 9.7 s (the GIL); docs/training.md.
    Nothing in transformers or TRL splits ``generate`` over processes on a CPU (TRL's
    ``use_vllm`` server is the GPU answer), hence this class.

    The policy is shared, not copied: the processes are forked from the parent at the first
    call, after the trainable parameters (the LoRA weights) were moved to shared memory, so
    every optimizer step (in place) is seen by the next sample; the frozen weights are shared
    copy-on-write.  If a parameter's storage moved since the fork (a cast, a reload), the
    processes are forked again.  Each request carries a seed drawn from the parent's torch RNG,
    so a seeded run is reproducible (its samples differ from in-process sampling).  The
    processes run ``generate`` with everything the parent passed (logits processors, the
    ``generation_config`` and the model's own one, its training mode); a request that cannot be
    split (fewer than two prompt groups, ``return_dict_in_generate``, kwargs that do not pickle)
    is generated in the parent.  A process that fails raises in the parent with its traceback.
    CPU only: the processes are forked.
    """

    def __init__(self, workers: int) -> None:
        if workers < 2:
            raise ValueError(f"a GenerationPool needs >= 2 workers, got {workers}")
        self.workers = workers
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._pointers: tuple[int, ...] | None = None
        self._warned: set[str] = set()

    # -- lifecycle
    def _start(self, model: Any) -> None:
        import multiprocessing

        self.close()
        for p in model.parameters():
            if p.requires_grad and not p.is_shared():
                p.data.share_memory_()
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        threads = max(1, cpus // self.workers)
        ctx = multiprocessing.get_context("fork")
        for _ in range(self.workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(child, model, threads), daemon=True)
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
        self._pointers = self._fingerprint(model)
        log.info("sampling in %d forked processes of %d thread(s) each", self.workers, threads)

    @staticmethod
    def _fingerprint(model: Any) -> tuple[int, ...]:
        return tuple(p.data_ptr() for p in model.parameters())

    def close(self) -> None:
        """Stop the processes (they also end with the parent: daemonic)."""
        for conn in self._conns:
            try:
                conn.send(None)
                conn.close()
            except (OSError, BrokenPipeError):
                pass
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
        self._procs, self._conns, self._pointers = [], [], None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    # -- one call
    def _fallback(self, why: str) -> None:
        if why not in self._warned:
            self._warned.add(why)
            log.warning("sampling in this process, not in the pool: %s", why)

    def generate(self, model: Any, input_ids, attention_mask, kwargs: dict):
        """The batch's sequences from the pool, or None when it must be generated here."""
        import pickle

        import torch

        config = kwargs.get("generation_config")
        if input_ids is None or input_ids.dim() != 2:
            return None
        if kwargs.get("return_dict_in_generate") or getattr(config, "return_dict_in_generate", False):
            self._fallback("return_dict_in_generate")
            return None
        if input_ids.device.type != "cpu":
            raise RuntimeError(
                "generation_workers samples in forked CPU processes; the policy is on " + str(input_ids.device)
            )
        size = _groups(input_ids) or 1
        groups = input_ids.shape[0] // size
        if groups < 2:
            return None
        try:
            pickle.dumps(kwargs)
        except Exception as exc:  # noqa: BLE001
            self._fallback(f"generate kwargs do not pickle ({type(exc).__name__})")
            return None
        if self._pointers != self._fingerprint(model) or any(not p.is_alive() for p in self._procs):
            self._start(model)
        n = min(self.workers, groups)
        bounds = [round(i * groups / n) * size for i in range(n + 1)]
        own = getattr(_hf_model(model), "generation_config", None)
        seeds = torch.randint(0, 2**62, (n,)).tolist()
        for i in range(n):
            a, b = bounds[i], bounds[i + 1]
            mask = attention_mask[a:b] if attention_mask is not None else None
            self._conns[i].send((input_ids[a:b], mask, kwargs, int(seeds[i]), bool(model.training), own))
        outs, errors = [], []
        for i in range(n):
            try:
                status, value = self._conns[i].recv()
            except EOFError:
                status, value = "error", f"the process exited (code {self._procs[i].exitcode})"
            if status == "ok":
                outs.append(value)
            else:
                errors.append(f"worker {i}: {value}")
        if errors:
            self.close()
            raise RuntimeError("sampling in the generation pool failed: " + "; ".join(errors))
        width = max(o.shape[1] for o in outs)
        pad = getattr(config, "pad_token_id", None)
        if pad is None:
            pad = getattr(own, "pad_token_id", None)
        if pad is None:
            pad = getattr(own, "eos_token_id", None)
            pad = pad[0] if isinstance(pad, (list, tuple)) else pad
        if pad is None and any(o.shape[1] != width for o in outs):
            raise RuntimeError("generation_workers: no pad_token_id to pad the processes' sequences to one length")
        value = 0 if pad is None else int(pad)  # 0 only where no row needs padding
        padded = [
            o if o.shape[1] == width else torch.nn.functional.pad(o, (0, width - o.shape[1]), value=value) for o in outs
        ]
        return torch.cat(padded, dim=0)
