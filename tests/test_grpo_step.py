"""A real GRPO step with the rubric reward on a tiny model (real SmolLM2 tokenizer)."""

import pytest

pytest.importorskip("trl")


def test_one_grpo_step_logs_every_dimension_and_scores_each_completion_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.models import load_tokenizer, tiny_model
    from rubriq.reward import RubricRewards
    from rubriq.training.grpo import build_grpo_trainer

    rows = synthesis_rows(
        PromptSpec(
            qft_sizes=(2,),
            qpe_sizes=(),
            hamiltonian_sizes=(),
            encoding_sizes=(2,),
            encoding_seeds=(0,),
            formats=("qasm2",),
        )
    )
    tokenizer = load_tokenizer("embedded")
    model = tiny_model(tokenizer)
    rewards = RubricRewards()
    trainer = build_grpo_trainer(
        model,
        tokenizer,
        rows,
        rewards,
        grpo_args=dict(
            output_dir=str(tmp_path / "out"),
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=12,
            max_steps=1,
            logging_steps=1,
            use_cpu=True,
            save_strategy="no",
            bf16=False,
            gradient_checkpointing=False,
            temperature=0.8,
            top_p=0.95,
            seed=42,
            learning_rate=5e-6,
        ),
        lora=dict(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["q_proj", "v_proj"]),
    )
    trainer.train()
    logged = trainer.state.log_history[0]
    for name in ("total", "clifford", "tcount", "hardware", "fidelity", "efficiency"):
        assert f"rewards/{name}/mean" in logged
    # a random tiny model writes no circuit: R and every dimension 0, and each completion scored once
    assert logged["reward"] == logged["rewards/total/mean"] == 0.0
    assert rewards.stats["requests"] == 6 * 4 and rewards.stats["evaluated"] <= 4
    assert trainer.args.reward_weights == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # TRL's reward is the engine's R


def _tiny_trainer(
    tmp_path, monkeypatch, dtype: str, batch: int, generations: int, lora_modules: list[str], generation=None, **grpo
):
    """A one-step GRPO trainer of the tiny random model (in ``dtype``) with a LoRA adapter on
    ``lora_modules``, and its tokenizer; ``generation``: its GenerationFlags, ``grpo``: GRPOConfig
    fields over the defaults here."""
    import torch

    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.models import load_tokenizer, tiny_model
    from rubriq.training.grpo import build_grpo_trainer

    rows = synthesis_rows(
        PromptSpec(qft_sizes=(2,), qpe_sizes=(), hamiltonian_sizes=(), encoding_sizes=(), formats=("qasm2",))
    )
    tokenizer = load_tokenizer("embedded")
    trainer = build_grpo_trainer(
        tiny_model(tokenizer).to(getattr(torch, dtype)),
        tokenizer,
        rows,
        grpo_args=dict(
            output_dir=str(tmp_path / "out"),
            per_device_train_batch_size=batch,
            num_generations=generations,
            max_steps=1,
            use_cpu=True,
            bf16=False,
            gradient_checkpointing=False,
            temperature=0.7,
            save_strategy="no",
            **grpo,
        ),
        lora=dict(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=lora_modules, init_lora_weights=False),
        generation=generation,
    )
    return trainer, tokenizer


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cpu_log_probabilities_agree_with_trls_fused_lm_head(tmp_path, monkeypatch, dtype):
    """The trainer's CPU path (one float32 LM-head product, grpo.completion_logps_and_entropy) gives
    TRL's own chunked-kernel log-probabilities, entropies and LoRA gradients on the same batch."""
    import torch
    from trl import GRPOTrainer

    trainer, tokenizer = _tiny_trainer(tmp_path, monkeypatch, dtype, 4, 4, ["q_proj", "v_proj"])
    policy = trainer.model
    torch.manual_seed(0)
    ids = torch.randint(10, tokenizer.vocab_size, (4, 20))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # a left-padded prompt
    lora = [p for n, p in policy.named_parameters() if p.requires_grad]
    assert lora and all(p.dtype == torch.float32 for p in lora)

    import rubriq.training.grpo as grpo

    calls = []
    real = grpo.completion_logps_and_entropy
    monkeypatch.setattr(grpo, "completion_logps_and_entropy", lambda *a, **k: calls.append(1) or real(*a, **k))

    def run(method):
        policy.zero_grad()
        logps, ent, _ = method(trainer, policy, ids, mask, 9, batch_size=2, compute_entropy=True)
        (logps.sum() + 0 * ent.sum()).backward()
        return logps.detach(), ent.detach(), [p.grad.clone() for p in lora]

    ours, theirs = (
        run(type(trainer)._get_per_token_logps_and_entropies),
        run(GRPOTrainer._get_per_token_logps_and_entropies),
    )
    assert len(calls) == 2  # the trainer's own method took the CPU path (2 micro-batches), TRL's did not
    tol = 1e-4 if dtype == "float32" else 2e-2  # bf16 decoder in both; the heads both accumulate in float32
    assert ours[0].shape == theirs[0].shape == (4, 9)
    assert torch.allclose(ours[0], theirs[0], atol=tol), (ours[0] - theirs[0]).abs().max()
    assert torch.allclose(ours[1], theirs[1], atol=tol), (ours[1] - theirs[1]).abs().max()
    assert float(ours[0].abs().mean()) > 1.0  # real log-probabilities of random tokens, not zeros
    for a, b in zip(ours[2], theirs[2], strict=True):
        assert torch.allclose(a, b, atol=tol * max(1.0, float(b.abs().max()))), (a - b).abs().max()
    assert any(float(g.abs().max()) > 0 for g in ours[2])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_update_runs_each_shared_prompt_once_and_gets_the_full_forwards_values(tmp_path, monkeypatch, dtype):
    """With rows that share prompts (GRPO's groups, shuffled as TRL shuffles them, one prompt
    left-padded), the trainer's CPU path runs each distinct prompt through the decoder once and its
    completions from the gathered key/value cache; log-probabilities, entropies and the LoRA
    gradients (k/v adapters: the prompt's cache carries gradient) equal TRL's forward of the whole
    rows."""
    import torch
    from trl import GRPOTrainer

    import rubriq.training.grpo as grpo

    trainer, tokenizer = _tiny_trainer(tmp_path, monkeypatch, dtype, 6, 3, ["q_proj", "k_proj", "v_proj"])
    assert trainer.shared_prompt_update  # the default
    policy = trainer.model
    torch.manual_seed(0)
    prompts = torch.randint(10, tokenizer.vocab_size, (2, 12))
    prompt_mask = torch.ones_like(prompts)
    prompt_mask[1, :4] = 0  # a left-padded prompt
    order = torch.tensor([3, 0, 5, 1, 4, 2])  # rows 0-2 of prompt 0, 3-5 of prompt 1, shuffled
    group = order // 3
    completions = torch.randint(10, tokenizer.vocab_size, (6, 8))
    completion_mask = torch.ones_like(completions)
    completion_mask[2, 5:] = 0  # a completion that ended early (right padding)
    ids = torch.cat([prompts[group], completions], dim=1)
    mask = torch.cat([prompt_mask[group], completion_mask], dim=1)
    names = [n for n, p in policy.named_parameters() if p.requires_grad]
    lora = [p for n, p in policy.named_parameters() if p.requires_grad]

    shared = []
    real = grpo._shared_prompt_hidden
    monkeypatch.setattr(grpo, "_shared_prompt_hidden", lambda *a, **k: shared.append(len(a[-2])) or real(*a, **k))

    def run(method):
        policy.zero_grad()
        logps, ent, _ = method(trainer, policy, ids, mask, 8, batch_size=6, compute_entropy=True)
        (logps * completion_mask).sum().backward()
        return logps.detach(), ent.detach(), [p.grad.clone() for p in lora]

    ours, theirs = (
        run(type(trainer)._get_per_token_logps_and_entropies),
        run(GRPOTrainer._get_per_token_logps_and_entropies),
    )
    assert shared == [2]  # one decoder pass over 2 distinct prompts, not 6
    tol = 1e-4 if dtype == "float32" else 3e-2
    keep = completion_mask.bool()
    assert torch.allclose(ours[0][keep], theirs[0][keep], atol=tol), (ours[0] - theirs[0]).abs().max()
    assert torch.allclose(ours[1][keep], theirs[1][keep], atol=tol), (ours[1] - theirs[1]).abs().max()
    assert float(ours[0].abs().mean()) > 1.0
    k_grads = [g for n, g in zip(names, ours[2], strict=True) if "k_proj" in n]
    assert k_grads and any(float(g.abs().max()) > 0 for g in k_grads)  # gradient through the prompt's cache
    for a, b in zip(ours[2], theirs[2], strict=True):
        assert torch.allclose(a, b, atol=tol * max(1.0, float(b.abs().max()))), (a - b).abs().max()


def test_rows_with_distinct_prompts_run_as_one_forward():
    import torch

    from rubriq.training.grpo import _shared_prompts

    ids = torch.tensor([[1, 2, 3, 9], [1, 2, 4, 9], [1, 2, 3, 8]])
    mask = torch.ones_like(ids)
    assert _shared_prompts(ids, mask, 2) is not None  # all three share [1, 2]
    first, inverse = _shared_prompts(ids, mask, 3)
    assert first.tolist() == [0, 1] and inverse.tolist() == [0, 1, 0]
    assert _shared_prompts(ids, mask, 4) is None  # no completion part
    mask[2, 0] = 0  # same tokens, another mask: another prompt
    assert _shared_prompts(ids, mask, 3) is None


def test_the_trainers_sampler_gets_the_training_settings_sampling_not_the_warpers(tmp_path, monkeypatch):
    """The GRPO trainer's ``generate`` calls carry its typed sampling (temperature, top-p, top-k
    of the ``GRPOConfig``) to the static sampler, which samples with exactly those values."""
    import rubriq.models.generation as generation
    from rubriq.models.generation import GenerationFlags
    from rubriq.models.sampling import SamplingSpec
    from rubriq.training.grpo import _training_sampling

    plans = []
    original = generation.decode_plan

    def spy(model, input_ids, kwargs, spec=None):
        plans.append((spec, original(model, input_ids, kwargs, spec)))
        return plans[-1][1]

    monkeypatch.setattr(generation, "decode_plan", spy)
    trainer, _ = _tiny_trainer(
        tmp_path,
        monkeypatch,
        "float32",
        4,
        4,
        ["q_proj"],
        generation=GenerationFlags(sampler="static"),
        max_completion_length=6,
        top_p=0.9,
        top_k=5,
    )
    trainer.train()
    expected = SamplingSpec(temperature=0.7, top_p=0.9, top_k=5, samples=4, max_new_tokens=6)
    assert plans and all(spec == expected for spec, _ in plans)
    assert all((p.temperature, p.top_p, p.top_k) == (0.7, 0.9, 5) for _, p in plans if p is not None)
    assert any(p is not None for _, p in plans)  # the static sampler ran, with the spec's values
    # generation_kwargs that change the sampling: the resolved generation config samples (no spec)
    trainer.args.generation_kwargs = {"temperature": 0.5}
    assert _training_sampling(trainer.args) is None
