"""GRPO with the rubric reward: TRL's GRPOTrainer, PEFT LoRA, rows from ``rubriq data build``.

This is the glue the training entry point builds on: dataset rows (``prompt`` chat messages and
the ``target`` JSON spec) become a ``datasets.Dataset`` whose ``target`` column TRL hands to the
reward functions; the rubric enters as R itself with weight 1 and each dimension with weight 0
(``rubriq.reward``), so TRL's logged ``reward`` is the engine's R and each dimension is logged
as ``rewards/<dim>/mean``.

:class:`RubriQGRPOTrainer` is TRL's trainer plus the step-time breakdown the issue asks for:
``timing/generation_s``, ``timing/reward_s`` (from the reward functions),
``timing/update_s`` (the rest of TRL's ``step_time``: log-probabilities, backward, optimizer)
and ``tokens_per_s`` (completion tokens per second of generation); on a CPU it computes the
policy's log-probabilities with one float32 LM-head product per micro-batch instead of TRL's
chunked kernel (:func:`completion_logps_and_entropy`; it halved the update in
benchmarks/bench_grpo_step.py), running each distinct prompt of a micro-batch through the decoder
once and its completions from its key/value cache (``shared_prompt_update``); without vLLM, it
pre-fills each prompt once for its N completions, ends each completion after its code block and
samples with the sampler its :class:`GenerationFlags` name (``generation.py``); and it drops groups whose rewards are all equal from the update (DAPO's
dynamic sampling, without the resampling: such a group has zero advantage, so it adds no
gradient, only compute and tokens to the loss's normalizer), logged as
``dynamic_sampling/skipped_groups`` (the fraction of groups dropped) next to TRL's
``frac_reward_zero_std``.  TRL's entropy is then logged over the groups that stay.
"""

from __future__ import annotations

import time
from typing import Any

from rubriq.models.generation import GenerationFlags, install_prefix_generate
from rubriq.models.sampling import SamplingSpec
from rubriq.reward import RubricRewards
from rubriq.training.callbacks import quiet_progress


def rows_to_dataset(rows: list[dict]):
    """Keep what GRPO and the reward need: the chat prompt and the target spec."""
    from datasets import Dataset

    missing = [k for k in ("prompt", "target") if rows and k not in rows[0]]
    if missing:
        raise ValueError(f"dataset rows lack {missing}: build them with `rubriq data build`")
    return Dataset.from_list([{"prompt": r["prompt"], "target": r["target"]} for r in rows])


_MULTIMODAL = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)


def completion_logps_and_entropy(
    model: Any,
    input_ids,
    attention_mask,
    logits_to_keep: int,
    temperature: float = 1.0,
    entropy_requires_grad: bool = False,
    share_prompts: bool = False,
):
    """Per-token log-probabilities of the last ``logits_to_keep`` tokens of each row of ``input_ids``
    under the causal LM ``model`` (a transformers model, or a PEFT model around one), and the
    entropy of each of those next-token distributions, both at ``temperature``.

    The decoder runs in the model's dtype; the LM head is applied in float32 to the completion
    positions only (one ``(tokens, hidden) x (hidden, vocab)`` product), so no logit is rounded to
    bfloat16. Written here because TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``),
    built to avoid materializing the logits on a GPU, runs its tiles as many small float32 torch
    operations without Triton: on the 2-core CPU, in a cProfile of 3 GRPO steps of 8 completions,
    its backward took 41 of the 48 s of backward (2.5 s with this function). Here the logits of a micro-batch are
    materialized (8 x 128 x 49,152 float32 = 200 MB for SmolLM2), which a CPU's memory holds.

    >>> import torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> torch.manual_seed(0) and None
    >>> m = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
    ...     num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)).eval()
    >>> ids = torch.randint(0, 32, (2, 6))
    >>> logps, ent = completion_logps_and_entropy(m, ids, torch.ones_like(ids), 3)
    >>> ref = m(ids).logits[:, -4:-1].float().log_softmax(-1).gather(-1, ids[:, -3:, None])[..., 0]
    >>> bool(torch.allclose(logps, ref, atol=1e-5)), tuple(ent.shape)
    (True, (2, 3))
    """
    import torch

    lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder, head = lm.get_decoder(), lm.get_output_embeddings()
    shared = _shared_prompts(input_ids, attention_mask, input_ids.shape[1] - logits_to_keep) if share_prompts else None
    if shared is None:
        hidden = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        hidden = hidden[:, -logits_to_keep - 1 : -1]
    else:
        hidden = _shared_prompt_hidden(lm, decoder, input_ids, attention_mask, logits_to_keep, *shared)
    bias = head.bias.float() if getattr(head, "bias", None) is not None else None
    logits = torch.nn.functional.linear(hidden.float(), head.weight.float(), bias)
    if temperature != 1.0:
        logits = logits / temperature
    logp_all = logits.log_softmax(-1)
    targets = input_ids[:, -logits_to_keep:]
    logps = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    with torch.set_grad_enabled(entropy_requires_grad and torch.is_grad_enabled()):
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logps, entropy


def _shared_prompts(input_ids, attention_mask, prompt_length: int):
    """``(first, inverse)`` when rows of the batch share their prompt (the first ``prompt_length``
    tokens and their mask): ``first`` indexes one row per distinct prompt and ``inverse`` maps each
    row to its prompt's position in ``first``; None when no two rows share one."""
    import torch

    if prompt_length < 1 or input_ids.shape[1] <= prompt_length:
        return None
    key = torch.cat([input_ids[:, :prompt_length], attention_mask[:, :prompt_length].to(input_ids.dtype)], dim=1)
    _, inverse = torch.unique(key, dim=0, return_inverse=True)
    distinct = int(inverse.max()) + 1
    if distinct == input_ids.shape[0]:
        return None
    rows = torch.arange(input_ids.shape[0], device=input_ids.device)
    first = torch.full((distinct,), input_ids.shape[0], dtype=torch.long, device=input_ids.device)
    first = first.scatter_reduce(0, inverse, rows, reduce="amin")
    return first, inverse


def _shared_prompt_hidden(lm, decoder, input_ids, attention_mask, logits_to_keep: int, first, inverse):
    """The decoder's last hidden states at the positions that predict the last ``logits_to_keep``
    tokens, with each distinct prompt run once: its key/value cache (with its autograd graph) is
    gathered to every row that shares it, and the completions run from there. The same positions,
    mask and causal attention as one forward of the whole rows, so the same values up to rounding
    (tests/test_grpo_step.py), and the prompt's gradient is the sum over its completions, as there."""
    import torch
    from transformers import DynamicCache

    prompt_length = input_ids.shape[1] - logits_to_keep
    cache = DynamicCache(config=lm.config)
    prompt_hidden = decoder(
        input_ids=input_ids[first, :prompt_length],
        attention_mask=attention_mask[first, :prompt_length],
        cache=cache,
        use_cache=True,
    ).last_hidden_state[:, -1:]
    cache.batch_select_indices(inverse)
    completion_hidden = decoder(
        input_ids=input_ids[:, prompt_length:], attention_mask=attention_mask, cache=cache, use_cache=True
    ).last_hidden_state
    return torch.cat([prompt_hidden[inverse], completion_hidden[:, :-1]], dim=1)


def _training_sampling(args) -> SamplingSpec | None:
    """The sampling of the trainer's ``generate`` calls, from its typed ``GRPOConfig`` (the
    temperature, top-p and top-k the YAML's ``grpo`` settings gave it): the ``loop`` / ``static``
    samplers take it as it is instead of reading it back from transformers' logits warpers. None
    when ``generation_kwargs`` overrides any of them (then the call's resolved generation config
    is what samples)."""
    if set(args.generation_kwargs or {}) & {"temperature", "top_p", "top_k", "do_sample"}:
        return None
    return SamplingSpec(
        temperature=float(args.temperature),
        top_p=float(args.top_p),
        top_k=None if args.top_k is None else int(args.top_k),
        samples=int(args.num_generations),
        max_new_tokens=int(args.max_completion_length),
    )


def _trainer_class():
    from trl import GRPOTrainer

    class RubriQGRPOTrainer(GRPOTrainer):
        """GRPOTrainer that also logs the generation time and throughput (see module doc).

        It overrides TRL's ``_generate`` and ``log`` (private in TRL 1.x): if a TRL release
        renames them, only these timing metrics are lost, training is unchanged."""

        def __init__(self, *args, generation: GenerationFlags | None = None, **kwargs):
            super().__init__(*args, **kwargs)
            flags = generation or GenerationFlags()
            self.generation_flags = flags
            self.skip_zero_variance_groups = flags.skip_zero_variance_groups
            self.cpu_logprobs = flags.cpu_logprobs
            self.shared_prompt_update = flags.shared_prompt_update
            if flags.shared_prompt_prefill and not getattr(self.args, "use_vllm", False):
                install_prefix_generate(self.model, self.processing_class, flags, _training_sampling(self.args))

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if not self.skip_zero_variance_groups or not self.model.training:
                return out
            return self._drop_flat_groups(out)

        def _drop_flat_groups(self, out: dict) -> dict:
            """The batch without its all-equal-reward groups (zero advantage: no gradient), so the
            loss's forward and backward skip them; at least one group stays (a batch of only flat
            groups gives a zero gradient, as before)."""
            import torch

            advantages, size = out["advantages"], int(self.num_generations or 0)
            batch = advantages.shape[0] if advantages.dim() else 0
            if advantages.dim() != 1 or size < 1 or batch % size or batch == 0:
                return out  # groups not aligned with this process's batch: leave TRL's batch as it is
            flat = advantages.view(-1, size).abs().amax(dim=1) == 0
            counts = self.accelerator.gather(torch.stack([flat.sum(), torch.tensor(flat.numel())]).view(1, 2)).sum(0)
            self._metrics["train"]["dynamic_sampling/skipped_groups"].append(float(counts[0]) / float(counts[1]))
            keep_groups = (~flat).nonzero().flatten()
            if keep_groups.numel() == 0:
                keep_groups = torch.zeros(1, dtype=torch.long, device=flat.device)
            rows = (keep_groups[:, None] * size + torch.arange(size, device=flat.device)).flatten()
            if rows.numel() == batch:
                return out
            kept = {
                k: v.index_select(0, rows.to(v.device)) if torch.is_tensor(v) and v.dim() and v.shape[0] == batch else v
                for k, v in out.items()
            }
            mask = kept["completion_mask"] if "tool_mask" not in kept else kept["completion_mask"] * kept["tool_mask"]
            kept["num_items_in_batch"] = self.accelerator.gather(mask.sum()).sum()
            return kept

        def _get_per_token_logps_and_entropies(
            self,
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size=None,
            compute_entropy=False,
            compute_aux_loss=False,
            **multimodal,
        ):
            """TRL's method, with :func:`completion_logps_and_entropy` on a CPU for a text-only model
            that is not wrapped for distributed training (DDP's gradient hooks need its own forward);
            TRL's own everywhere else."""
            if (
                not self.cpu_logprobs
                or input_ids.device.type != "cpu"
                or compute_aux_loss
                or any(multimodal.get(k) is not None for k in _MULTIMODAL)
                or self.accelerator.unwrap_model(model) is not model
            ):
                return super()._get_per_token_logps_and_entropies(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size=batch_size,
                    compute_entropy=compute_entropy,
                    compute_aux_loss=compute_aux_loss,
                    **multimodal,
                )
            import torch

            entropy_grad = bool(getattr(self.args, "entropy_coef", 0.0)) or bool(
                getattr(self.args, "use_adaptive_entropy", False)
            )
            size = batch_size or input_ids.size(0)
            logps, entropies = [], []
            for start in range(0, input_ids.size(0), size):
                with self.accelerator.autocast():
                    lp, ent = completion_logps_and_entropy(
                        model,
                        input_ids[start : start + size],
                        attention_mask[start : start + size],
                        logits_to_keep,
                        temperature=self.temperature,
                        entropy_requires_grad=entropy_grad,
                        share_prompts=self.shared_prompt_update,
                    )
                logps.append(lp)
                entropies.append(ent)
            return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None

        def _generate(self, prompts: list):
            start = time.perf_counter()
            out = super()._generate(prompts)
            seconds = time.perf_counter() - start
            mode = "train" if self.model is not None and self.model.training else "eval"
            tokens = sum(len(ids) for ids in out[1])
            self._metrics[mode]["timing/generation_s"].append(seconds)
            self._metrics[mode]["tokens_per_s"].append(tokens / seconds if seconds > 0 else float("nan"))
            return out

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            m = self._metrics["train"]
            steps = m.get("step_time") or []
            if steps:
                spent = sum(m.get("timing/generation_s", [])) + sum(m.get("timing/reward_s", []))
                m["timing/update_s"] = [sum(steps) / len(steps) - spent / len(steps)]
            super().log(logs, start_time)

    return RubriQGRPOTrainer


def build_grpo_trainer(
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    rewards: RubricRewards | None = None,
    grpo_args: dict | None = None,
    lora: dict | None = None,
    reward_funcs=None,
    reward_weights=None,
    callbacks: list | None = None,
    generation: GenerationFlags | None = None,
):
    """A GRPO trainer on ``rows`` with the rubric rewards (or ``reward_funcs``, e.g. a sparse
    reward) and, when ``lora`` is given, a PEFT LoRA adapter (keys of ``peft.LoraConfig``).
    ``generation``: the generation flags and sampler (:class:`GenerationFlags`; None: its
    defaults), handed to the sampler as one object."""
    from peft import LoraConfig
    from trl import GRPOConfig

    rewards = rewards or RubricRewards()
    funcs = reward_funcs or rewards.functions()
    weights = reward_weights or (rewards.weights() if reward_funcs is None else [1.0] * len(funcs))
    args = GRPOConfig(**{"report_to": [], **(grpo_args or {}), "reward_weights": weights})
    if args.use_vllm:
        _require("vllm", "grpo.use_vllm")
    peft_config = LoraConfig(task_type="CAUSAL_LM", **lora) if lora else None
    trainer = _trainer_class()(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=rows_to_dataset(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
        generation=generation,
    )
    quiet_progress(trainer)
    return trainer


def _require(module: str, setting: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise RuntimeError(
            f"{setting} needs the package {module!r}, which is not installed: "
            "pip install 'rubriq[gpu]' on a CUDA machine (vLLM and DeepSpeed need GPUs)"
        )
