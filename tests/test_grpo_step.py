"""A real GRPO step with the rubric reward on a tiny model (real SmolLM2 tokenizer)."""

import pytest

pytest.importorskip("trl")


def test_one_grpo_step_logs_every_dimension_and_scores_each_completion_once(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.training.grpo import build_grpo_trainer
    from rubriq.training.models import load_tokenizer, tiny_model
    from rubriq.training.rewards import RubricRewards

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
    for dim in ("clifford", "tcount", "hardware", "fidelity", "efficiency"):
        assert f"rewards/{dim}/mean" in logged
    # a random tiny model writes no circuit: every dimension 0, and each completion scored once
    assert logged["reward"] == 0.0
    assert rewards.stats["requests"] == 5 * 4 and rewards.stats["evaluated"] <= 4
    assert trainer.args.reward_weights == [0.20, 0.15, 0.15, 0.40, 0.10]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cpu_log_probabilities_agree_with_trls_fused_lm_head(tmp_path, monkeypatch, dtype):
    """The trainer's CPU path (one float32 LM-head product, grpo.completion_logps_and_entropy) gives
    TRL's own chunked-kernel log-probabilities, entropies and LoRA gradients on the same batch."""
    import torch
    from trl import GRPOTrainer

    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.training.grpo import build_grpo_trainer
    from rubriq.training.models import load_tokenizer, tiny_model

    rows = synthesis_rows(
        PromptSpec(qft_sizes=(2,), qpe_sizes=(), hamiltonian_sizes=(), encoding_sizes=(), formats=("qasm2",))
    )
    tokenizer = load_tokenizer("embedded")
    model = tiny_model(tokenizer).to(getattr(torch, dtype))
    trainer = build_grpo_trainer(
        model,
        tokenizer,
        rows,
        grpo_args=dict(
            output_dir=str(tmp_path / "out"),
            per_device_train_batch_size=4,
            num_generations=4,
            max_steps=1,
            use_cpu=True,
            bf16=False,
            gradient_checkpointing=False,
            temperature=0.7,
            save_strategy="no",
        ),
        lora=dict(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"], init_lora_weights=False),
    )
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
