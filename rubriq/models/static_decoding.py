"""The decoding step of a Llama-family policy written for CPU sampling: the current LoRA weights
merged into fused copies while sampling, a static key/value cache, and each shared prompt's keys
and values kept (and read) once per group.

Why it exists (benchmarks/results/generation.md): a decoding step of SmolLM2-135M at batch 16-64
is a few small matrix products per layer; transformers' forward around them (seven ``nn.Linear``
calls and a PEFT LoRA detour per projection, rotary and mask construction, a ``DynamicCache``
that concatenates, ``scaled_dot_product_attention``'s CPU kernel, which spends ~0.9 ms per call on
a single query at batch 16) costs as much as the products themselves. :class:`StaticDecoder`
runs the same arithmetic as the model's eager forward with:

* **the adapter merged while sampling, the model untouched**: each projection's weight is
  ``W + scaling * B @ A`` (PEFT's own ``get_delta_weight``, float32 then the model's dtype, as
  ``merge_adapter`` computes it), written into *copies* (q/k/v fused into one matrix, gate/up into
  one), built again from the current weights at every :meth:`StaticDecoder.from_model`: the
  policy's parameters are never modified, so nothing has to be "unmerged" (bit for bit: they were
  never written);
* **a static cache**: each row's completion keys/values go to a buffer sized for the whole
  decoding (no concatenation, no reallocation);
* **shared prompts**: GRPO samples N completions of each prompt; the prompt's keys and values are
  stored once per distinct prompt and its N rows' queries attend to them together (one
  ``(N * heads) x prompt`` product per group instead of N), the completion part per row; the
  two parts of the softmax are taken jointly (one softmax over their concatenated scores), so
  the result is the ordinary attention over prompt + completion.

It supports the architectures whose decoder layer is Llama's (pre-norm RMSNorm, rotary
embeddings of the ``default`` type, grouped-query attention, SiLU-gated MLP, optional q/k/v bias:
Llama, SmolLM2, Qwen2, Mistral without a sliding window); :func:`supported` says why not for
anything else, and the caller falls back to RubriQ's decoding loop over the model's own forward
(``decoding.py``). Correctness is tested against transformers (tests/test_sampler_distribution.py):
greedy tokens equal ``generate``'s, sampled frequencies against the exact probabilities, and
log-probabilities against the training forward.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

_LLAMA_LIKE = {"llama", "qwen2", "mistral"}


def supported(lm: Any) -> str | None:
    """None when :class:`StaticDecoder` can run the transformers causal LM ``lm`` (the base model
    of a PEFT model, adapters in place), else the reason it cannot."""
    config = getattr(lm, "config", None)
    if config is None:
        return "no config"
    if getattr(config, "model_type", None) not in _LLAMA_LIKE:
        return f"model type {getattr(config, 'model_type', None)!r} is not Llama-like"
    rope = getattr(config, "rope_parameters", None) or {}
    if (rope.get("rope_type") or "default") != "default":
        return f"rope type {rope.get('rope_type')!r}"
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        if getattr(config, "model_type", None) == "mistral":
            return "sliding-window attention"
    if getattr(config, "hidden_act", "silu") != "silu" or getattr(config, "mlp_bias", False):
        return "MLP other than SiLU-gated without bias"
    if getattr(config, "pretraining_tp", 1) not in (None, 1):
        return "pretraining_tp > 1"
    try:
        layers = lm.model.layers
        lm.model.embed_tokens, lm.model.norm, lm.model.rotary_emb, lm.lm_head  # noqa: B018
    except AttributeError as exc:
        return f"not a Llama-like module tree ({exc})"
    for layer in layers:
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            why = _linear_support(getattr(layer.self_attn, name))
            if why:
                return f"{name}: {why}"
        for name in ("gate_proj", "up_proj", "down_proj"):
            why = _linear_support(getattr(layer.mlp, name))
            if why:
                return f"{name}: {why}"
    return None


def _linear_support(module: Any) -> str | None:
    import torch

    if isinstance(module, torch.nn.Linear):
        return None
    base = getattr(module, "base_layer", None)
    if not isinstance(base, torch.nn.Linear) or not hasattr(module, "get_delta_weight"):
        return f"{type(module).__name__} is neither nn.Linear nor a PEFT LoRA linear"
    if getattr(module, "fan_in_fan_out", False):
        return "fan_in_fan_out"
    for adapter in _active(module):
        if adapter in getattr(module, "lora_variant", {}) or getattr(module, "lora_bias", {}).get(adapter):
            return "DoRA / LoRA bias adapters"
    return None


def _active(module: Any) -> list[str]:
    if getattr(module, "disable_adapters", False) or getattr(module, "merged", False):
        return []
    return [a for a in module.active_adapters if a in module.lora_A.keys()]


def effective_weight(module: Any):
    """``(weight, bias)`` that the (PEFT LoRA) linear ``module`` applies in eval mode: the base
    weight plus each active adapter's ``get_delta_weight`` (PEFT's merge arithmetic). New tensors
    when an adapter is active; the module's own (not to be written) otherwise."""
    import torch

    if isinstance(module, torch.nn.Linear):
        return module.weight, module.bias
    base = module.base_layer
    weight = base.weight
    adapters = _active(module)
    if adapters:
        weight = weight.clone()
        for adapter in adapters:
            weight += module.get_delta_weight(adapter).to(weight.dtype)
    return weight, base.bias


@dataclass
class _Layer:
    qkv: Any
    qkv_bias: Any
    o: Any
    gate_up: Any
    down: Any
    norm1: Any
    norm2: Any


class StaticDecoder:
    """One decoding batch of a Llama-like model (module docstring): ``prefill`` the distinct
    prompts, then ``step`` one token per row; rows ``r`` of the batch belong to prompt
    ``r // group`` (equal groups of consecutive rows, as TRL lays a GRPO batch out)."""

    def __init__(self, lm: Any) -> None:
        import torch

        why = supported(lm)
        if why:
            raise ValueError(f"StaticDecoder cannot run this model: {why}")
        config = lm.config
        self.lm = lm
        self.heads = config.num_attention_heads
        self.kv_heads = getattr(config, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.scale = self.head_dim**-0.5
        self.embed = lm.model.embed_tokens.weight
        self.norm = lm.model.norm
        self.rotary = lm.model.rotary_emb
        self.head_weight, self.head_bias = effective_weight(lm.lm_head)
        with torch.no_grad():
            self.layers = [self._fuse(layer) for layer in lm.model.layers]

    @classmethod
    def from_model(cls, model: Any) -> StaticDecoder:
        """The decoder of ``model`` (a transformers causal LM or a PEFT model around one) with its
        current weights (the adapter merged into copies)."""
        lm = model.get_base_model() if hasattr(model, "get_base_model") else model
        return cls(lm)

    @staticmethod
    def _fuse(layer: Any) -> _Layer:
        import torch

        attn, mlp = layer.self_attn, layer.mlp
        q, k, v = (effective_weight(getattr(attn, n)) for n in ("q_proj", "k_proj", "v_proj"))
        biases = [b for _, b in (q, k, v)]
        qkv_bias = None
        if any(b is not None for b in biases):
            qkv_bias = torch.cat(
                [b if b is not None else w.new_zeros(w.shape[0]) for (w, _), b in zip((q, k, v), biases, strict=True)]
            )
        gate, _ = effective_weight(mlp.gate_proj)
        up, _ = effective_weight(mlp.up_proj)
        return _Layer(
            qkv=torch.cat([q[0], k[0], v[0]]),
            qkv_bias=qkv_bias,
            o=effective_weight(attn.o_proj)[0],
            gate_up=torch.cat([gate, up]),
            down=effective_weight(mlp.down_proj)[0],
            norm1=layer.input_layernorm,
            norm2=layer.post_attention_layernorm,
        )

    # -- one batch ------------------------------------------------------------------------------
    def prefill(self, input_ids, attention_mask, group: int, max_new_tokens: int):
        """Run the distinct prompts (rows ``0, group, 2 group, ...`` of ``input_ids``, left-padded,
        ``attention_mask`` 0 on padding) through the model's own forward and keep their keys and
        values; returns the float32 logits of each row's next token, ``(batch, vocab)``."""
        import torch
        from transformers import DynamicCache

        batch, prompt = input_ids.shape
        if batch % group:
            raise ValueError(f"batch {batch} is not a multiple of the group size {group}")
        self.batch, self.group, self.prompts = batch, group, batch // group
        first = torch.arange(0, batch, group, device=input_ids.device)
        mask = attention_mask.to(torch.long)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.lm.config)
        out = self.lm(
            input_ids=input_ids[first],
            attention_mask=mask[first],
            position_ids=positions[first],
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        layers: list[Any] = list(cache.layers)  # full-attention layers (supported() checked the model type)
        self.prompt_keys: list[Any] = [layer.keys for layer in layers]  # (prompts, kv heads, prompt, dim)
        self.prompt_values: list[Any] = [layer.values for layer in layers]
        dtype = self.prompt_keys[0].dtype
        self.dtype = dtype
        # additive mask of the prompt part, per distinct prompt: 0 where attended, -inf on padding
        self.prompt_bias = torch.zeros((self.prompts, 1, 1, prompt), dtype=torch.float32)
        self.prompt_bias.masked_fill_(mask[first][:, None, None, :] == 0, float("-inf"))
        self.lengths = mask.sum(-1)  # each row's next position
        shape = (batch, self.kv_heads, max_new_tokens, self.head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype) for _ in self.layers]
        self.values = [torch.zeros(shape, dtype=dtype) for _ in self.layers]
        return out.logits[:, -1].float().repeat_interleave(group, dim=0)

    def step(self, tokens, t: int, active=None):
        """Logits (float32, ``(rows, vocab)``) after feeding ``tokens`` as the ``t``-th completion
        token (0-based) of the batch rows ``active`` (a sorted index tensor; None: every row), one
        token per active row. The projections and the MLP run on the active rows only; attention
        keeps the group layout (a finished row's query is zero there, its output dropped)."""
        import torch
        import torch.nn.functional as F
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        b, p, n = self.batch, self.prompts, self.group
        h, kv, d = self.heads, self.kv_heads, self.head_dim
        g = h // kv
        if active is not None and active.numel() == b:
            active = None
        a = b if active is None else active.numel()
        x = F.embedding(tokens, self.embed)[:, None]  # (a, 1, hidden)
        lengths = self.lengths if active is None else self.lengths[active]
        cos, sin = self.rotary(x, (lengths + t)[:, None])
        for i, layer in enumerate(self.layers):
            hidden = layer.norm1(x)
            qkv = F.linear(hidden, layer.qkv, layer.qkv_bias)
            q = qkv[..., : h * d].view(a, 1, h, d).transpose(1, 2)
            k = qkv[..., h * d : (h + kv) * d].view(a, 1, kv, d).transpose(1, 2)
            v = qkv[..., (h + kv) * d :].view(a, 1, kv, d).transpose(1, 2)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            keys, values = self.keys[i], self.values[i]
            # queries grouped by key/value head: (b, kv, g, d), zero for rows not running
            if active is None:
                keys[:, :, t] = k[:, :, 0]
                values[:, :, t] = v[:, :, 0]
                q = q[:, :, 0].reshape(b, kv, g, d)
            else:
                keys[active, :, t] = k[:, :, 0]
                values[active, :, t] = v[:, :, 0]
                q = q.new_zeros((b, kv, g, d)).index_copy_(0, active, q[:, :, 0].reshape(a, kv, g, d))
            # prompt part, once per distinct prompt: (p, kv, n * g, prompt)
            qp = q.view(p, n, kv, g, d).transpose(1, 2).reshape(p, kv, n * g, d)
            sp = torch.matmul(qp, self.prompt_keys[i].transpose(-1, -2)).float() * self.scale + self.prompt_bias
            sc = torch.matmul(q, keys[:, :, : t + 1].transpose(-1, -2)).float() * self.scale  # (b, kv, g, t+1)
            sp = sp.view(p, kv, n, g, -1).transpose(1, 2).reshape(b, kv, g, -1)
            probs = torch.cat([sp, sc], dim=-1).softmax(-1).to(self.dtype)
            width = sp.shape[-1]
            pp = probs[..., :width].reshape(p, n, kv, g, width).transpose(1, 2).reshape(p, kv, n * g, width)
            out = torch.matmul(pp, self.prompt_values[i]).view(p, kv, n, g, d).transpose(1, 2).reshape(b, kv, g, d)
            out = out + torch.matmul(probs[..., width:], values[:, :, : t + 1])
            if active is not None:
                out = out[active]
            x = x + F.linear(out.reshape(a, 1, h * d), layer.o)
            hidden = layer.norm2(x)
            gate, up = F.linear(hidden, layer.gate_up).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer.down)
        x = self.norm(x)
        return F.linear(x[:, 0], self.head_weight, self.head_bias).float()

    def keep_groups(self, groups):
        """Keep only the prompt groups ``groups`` (sorted indices) of the batch; returns the batch
        rows kept (to index the caller's per-row state with)."""
        import torch

        rows = (groups[:, None] * self.group + torch.arange(self.group, device=groups.device)).flatten()
        self.prompt_keys = [k[groups] for k in self.prompt_keys]
        self.prompt_values = [v[groups] for v in self.prompt_values]
        self.prompt_bias = self.prompt_bias[groups]
        self.keys = [k[rows] for k in self.keys]
        self.values = [v[rows] for v in self.values]
        self.lengths = self.lengths[rows]
        self.prompts, self.batch = int(groups.numel()), int(rows.numel())
        return rows
