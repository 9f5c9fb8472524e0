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
