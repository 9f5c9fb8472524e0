"""Real training steps on a tiny random model with the real SmolLM2 tokenizer: SFT on the
reference circuits, Sparse-PPO with its value head (+ resume), shared-prompt pre-fill, the
step-time breakdown and TensorBoard logs of GRPO."""

import json

import pytest
import yaml

from tests.tiny import CPU, TINY_GRPO, TINY_SFT, tiny_build, tiny_training

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

SMALL = tiny_build()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    import os

    os.environ.setdefault("RUBRIQ_CACHE", str(tmp_path_factory.mktemp("cache")))
    from rubriq.models import load_tokenizer

    return load_tokenizer("embedded")


def test_reference_completions_score_as_correct_in_every_format():
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.reward import RubricRewards
    from rubriq.training.sft import reference_completion

    rows = synthesis_rows(
        PromptSpec(
            qft_sizes=(3,),
            qpe_sizes=(3,),
            qpe_phases=(0.25,),
            hamiltonian_sizes=(2,),
            hamiltonian_times=(0.5,),
            encoding_sizes=(2,),
            encoding_seeds=(0,),
        )
    )
    results = RubricRewards().results([reference_completion(r) for r in rows], [r["target"] for r in rows])
    assert {r["format"] for r in rows} == {"qasm2", "qasm3", "python"}
    assert all(res.average_fidelity > 0.99 for res in results), [
        (r["id"], x.error) for r, x in zip(rows, results, strict=True)
    ]
    assert all(res.strategy is not None for res in results)


def _completion_loss(model, tokenizer, rows) -> float:
    """Mean cross-entropy of the reference completions given their prompts (completion tokens
    only): what SFT minimizes, measured outside the trainer."""
    from rubriq.training.sft import reference_completion

    model.eval()
    losses = []
    with torch.no_grad():
        for row in rows:
            prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
            full = prompt + reference_completion(row) + tokenizer.eos_token
            ids = tokenizer(full, return_tensors="pt", add_special_tokens=False)["input_ids"]
            start = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
            labels = ids.clone()
            labels[:, :start] = -100
            losses.append(float(model(input_ids=ids, labels=labels).loss))
    return sum(losses) / len(losses)


def test_sft_lowers_the_loss_on_the_references(tokenizer, tmp_path):
    """Measured outside the trainer, before and after: a few SFT steps must lower the
    completion loss of the very references they train on (and LoRA is merged back)."""
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.models import tiny_model
    from rubriq.training.sft import run_sft, sft_dataset

    rows = synthesis_rows(
        PromptSpec(
            qft_sizes=(2,),
            qpe_sizes=(),
            hamiltonian_sizes=(),
            encoding_sizes=(2,),
            encoding_seeds=(0,),
            encodings=("basis_encoding",),
            formats=("qasm2",),
        )
    )
    ds = sft_dataset(rows)
    assert ds[0]["completion"][0]["role"] == "assistant" and ds[0]["completion"][0]["content"].startswith("```qasm")
    model = tiny_model(tokenizer)
    keys = set(model.state_dict())
    before = _completion_loss(model, tokenizer, rows)
    trained = run_sft(
        model,
        tokenizer,
        rows,
        tmp_path / "sft",
        {"max_steps": 8, "per_device_train_batch_size": 2, "learning_rate": 1e-2, **CPU},
        lora={
            "r": 4,
            "lora_alpha": 8,
            "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        },
    )
    after = _completion_loss(trained, tokenizer, rows)
    assert type(trained).__name__ == "LlamaForCausalLM" and set(trained.state_dict()) == keys
    assert after < before - 0.1, (before, after)


def test_rl_adapter_after_sft_records_the_sft_model_as_its_base(tokenizer, tmp_path):
    """`rubriq evaluate --model RUN/final` loads the adapter on its recorded base: after a
    warm-start that base must be the SFT weights, not the original model."""
    import json

    from rubriq.evaluation.evaluate import load_policy
    from rubriq.training.train_rubriq import main

    config = tiny_training(
        output_dir=str(tmp_path / "run"),
        data={"dataset": str(tmp_path / "data"), "build": SMALL},
        sft=TINY_SFT,
        grpo={**TINY_GRPO, "num_generations": 4, "max_completion_length": 4, "max_steps": 1, "save_strategy": "no"},
    )
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(config))
    assert main(["--rubriq_config", str(tmp_path / "t.yaml")]) == 0
    final = tmp_path / "run" / "final"
    recorded = json.loads((final / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert recorded == "../sft/model"  # relative to the adapter folder: the run folder can move
    from rubriq.models import adapter_base, tiny_model

    base = adapter_base(final)
    assert base == str((tmp_path / "run" / "sft" / "model").resolve())

    _, model = load_policy(str(final))
    loaded = model.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight
    sft = load_policy(base)[1].state_dict()["model.layers.0.self_attn.q_proj.weight"]
    original = tiny_model(tokenizer).state_dict()["model.layers.0.self_attn.q_proj.weight"]
    assert torch.equal(loaded, sft) and not torch.equal(sft, original)


def test_shared_prompt_prefill_generates_the_same_tokens(tokenizer):
    from rubriq.models import tiny_model
    from rubriq.models.generation import install_prefix_generate, prefix_generate

    model = tiny_model(tokenizer).eval()
    tokenizer.padding_side = "left"
    texts = ["OPENQASM 2.0; qreg q[2];"] * 3 + ["a longer prompt about the QFT on three qubits"] * 3
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    kwargs = {"max_new_tokens": 6, "do_sample": False, "pad_token_id": tokenizer.eos_token_id}
    with torch.no_grad():
        plain = model.generate(**enc, **kwargs)
        shared = prefix_generate(model.generate, model, **enc, **kwargs)
        install_prefix_generate(model)
        installed = model.generate(**enc, **kwargs)
    assert torch.equal(plain, shared) and torch.equal(plain, installed)
    assert getattr(model.generate, "_rubriq_prefix", False)


def test_sampling_without_dropout_samples_the_eval_mode_policy_and_restores_training(tokenizer):
    from peft import LoraConfig, get_peft_model

    from rubriq.models import tiny_model
    from rubriq.models.generation import GenerationFlags, install_prefix_generate

    torch.manual_seed(0)
    config = LoraConfig(
        r=4, lora_alpha=64, lora_dropout=0.9, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    model = get_peft_model(tiny_model(tokenizer), config)
    tokenizer.padding_side = "left"
    enc = tokenizer(["OPENQASM 2.0; qreg q[2];"] * 4, return_tensors="pt", padding=True)
    kwargs = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": tokenizer.eos_token_id}
    with torch.no_grad():
        model.eval()
        reference = model.generate(**enc, **kwargs)
        model.train()
        noisy = [model.generate(**enc, **kwargs) for _ in range(3)]
        flags = GenerationFlags(
            sampler="generate", end_after_code_block=False, fast_sampling=False, sample_without_dropout=True
        )
        install_prefix_generate(model, flags=flags)
        assert model.training
        quiet = model.generate(**enc, **kwargs)
    assert model.training  # the update after it still trains with dropout
    assert torch.equal(quiet, reference)
    assert any(not torch.equal(n, reference) for n in noisy)  # dropout 0.9 does change greedy tokens


def _write(tmp_path, **sections):
    config = tiny_training(
        output_dir=str(tmp_path / "run"), data={"dataset": str(tmp_path / "data"), "build": SMALL}, **sections
    )
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_sparse_ppo_trains_checkpoints_and_resumes(tokenizer, tmp_path):
    from rubriq.training.train_rubriq import main

    path = _write(
        tmp_path,
        algorithm="ppo",
        reward={"kind": "sparse_inverse_t"},
        ppo={
            "batch_size": 4,
            "mini_batch_size": 2,
            "ppo_epochs": 2,
            "max_new_tokens": 6,
            "max_steps": 2,
            "save_steps": 1,
            "learning_rate": 1e-3,
        },
    )
    assert main(["--rubriq_config", str(path)]) == 0
    run = tmp_path / "run"
    logs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in logs] == [1, 2] and all(x["phase"] == "ppo" for x in logs)
    for key in ("reward", "parse_rate", "kl", "clipfrac", "value_loss", "timing/generation_s", "tokens_per_s"):
        assert key in logs[0]
    assert (run / "checkpoint-2" / "ppo_state.pt").is_file() and list((run / "runs").iterdir())
    assert main(["--rubriq_config", str(path), "--resume", "--max_steps", "3"]) == 0
    logs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in logs] == [1, 2, 3]
    assert json.loads((run / "final" / "trainer_state.json").read_text())["global_step"] == 3


def test_grpo_step_time_breakdown_puts_each_delay_in_its_own_part(tokenizer, tmp_path, monkeypatch):
    """A known delay in generation and another in scoring must land in timing/generation_s and
    timing/reward_s (each measured where it happens), not in the update part; and the logs reach
    metrics.jsonl and TensorBoard.  The clock (time.perf_counter, which RubriQ's timers and TRL's
    step_time read) is a fake one that moves only by the injected delays, so the breakdown is
    exact on any machine: 6 s of generation, 4 s of scoring, no update time."""
    import time

    import trl

    from rubriq.evaluator.batch import BatchScorer
    from rubriq.training.train_rubriq import main

    generate, score = trl.GRPOTrainer._generate, BatchScorer._score
    clock = [1000.0]

    def slow_generate(self, prompts):
        out = generate(self, prompts)
        clock[0] += 6.0
        return out

    def slow_score(self, todo):
        out = score(self, todo)
        if todo:  # once per batch: the first reward function scores, the others read the cache
            clock[0] += 4.0
        return out

    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(trl.GRPOTrainer, "_generate", slow_generate)
    monkeypatch.setattr(BatchScorer, "_score", slow_score)
    path = _write(
        tmp_path,
        grpo={
            "per_device_train_batch_size": 4,
            "num_generations": 4,
            "max_completion_length": 6,
            "max_steps": 1,
            "logging_steps": 1,
            "save_strategy": "no",
            "seed": 1,
            "report_to": ["tensorboard"],
            **CPU,
        },
    )
    assert main(["--rubriq_config", str(path)]) == 0
    run = tmp_path / "run"
    step = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    for key in (
        "timing/generation_s",
        "timing/reward_s",
        "timing/update_s",
        "step_time",
        "tokens_per_s",
        "parse_rate",
        "correct_rate",
        "rewards/fidelity/mean",
    ):
        assert key in step, key
    assert step["timing/generation_s"] == pytest.approx(6.0)
    assert step["timing/reward_s"] == pytest.approx(4.0)  # the generation delay is not counted as scoring
    assert step["step_time"] == pytest.approx(10.0)
    assert step["timing/update_s"] == pytest.approx(0.0, abs=1e-9)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = [p for p in (run / "runs").rglob("events.out.tfevents.*")]
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    assert "train/rewards/fidelity/mean" in acc.Tags()["scalars"] and "train/parse_rate" in acc.Tags()["scalars"]


def test_fast_sampling_draws_from_transformers_sampling_distribution():
    """SampleFromNucleus after the temperature gives each token the probability transformers'
    warpers (temperature, top-k, top-p) and softmax give it: frequencies over 30,000 draws, for a
    row whose nucleus lies in the candidates (Gumbel-max) and a flat row whose nucleus does not
    (transformers' own path), each within 6 standard errors (+ 2 draws) of the exact probability."""
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    from rubriq.models.generation import SampleFromNucleus

    torch.manual_seed(0)
    peaked = torch.randn(1000) * 3.0
    flat = torch.randn(1000) * 0.01
    # one token of 0.88, 63 of 0.0015, a tail of 936 sharing 0.0255 (of a temperature-0.8 softmax):
    # top-k 100 renormalizes the head to 0.90, so top-p 0.9 keeps that token alone, though the
    # 0.9 of the whole vocabulary needs about 14 tokens
    head = torch.tensor([0.88] + [0.0015] * 63 + [0.0255 / 936] * 936) * (1 + 0.01 * torch.rand(1000))
    head = head.log() * 0.8  # (jittered: no ties for transformers' sort to order its own way)
    temperature = TemperatureLogitsWarper(0.8)
    for top_k, top_p in [(0, 0.95), (0, 0.5), (20, 0.9), (100, 0.9), (0, 1.0)]:
        for row in (peaked, flat, head):
            scores = temperature(None, row[None].clone())
            exact = scores
            if top_k:
                exact = TopKLogitsWarper(top_k)(None, exact)
            if top_p < 1.0:
                exact = TopPLogitsWarper(top_p)(None, exact.clone())
            exact = exact.softmax(-1)[0]
            sampler = SampleFromNucleus(top_p=top_p, top_k=top_k, candidates=64)
            draws = sampler(None, scores.repeat(30000, 1)).argmax(-1)
            freq = torch.bincount(draws, minlength=1000).double() / 30000
            assert float(freq[exact == 0].sum()) == 0.0  # nothing outside the nucleus
            sigma = (exact.double() * (1 - exact.double()) / 30000).sqrt()
            assert bool(((freq - exact.double()).abs() <= 6 * sigma + 2 / 30000).all()), (top_k, top_p)
    drawn = SampleFromNucleus(top_p=0.9)(None, torch.tensor([[0.0, float("-inf"), 5.0]]))
    assert drawn.tolist() == [[float("-inf"), float("-inf"), 0.0]]  # token 0 (p 0.007) is outside the 0.9 nucleus


def test_fast_sampling_replaces_transformers_draw_in_trl_style_generate(tokenizer, monkeypatch):
    """With fast_sampling, a generate given a sampling GenerationConfig (as TRL calls it) draws
    every token through SampleFromNucleus; a greedy one, or one without it, is left as it was."""
    from transformers import GenerationConfig

    import rubriq.models.generation as generation
    from rubriq.models import tiny_model

    calls = []
    real = generation.SampleFromNucleus.__call__
    monkeypatch.setattr(
        generation.SampleFromNucleus, "__call__", lambda self, i, s: calls.append(1) or real(self, i, s)
    )
    model = tiny_model(tokenizer).eval()
    tokenizer.padding_side = "left"
    enc = tokenizer(["OPENQASM 2.0; qreg q[2];"] * 4, return_tensors="pt", padding=True)
    sampling = GenerationConfig(
        max_new_tokens=5,
        min_new_tokens=5,
        do_sample=True,
        temperature=0.8,
        top_p=0.95,
        top_k=0,
        pad_token_id=tokenizer.eos_token_id,
    )
    greedy = GenerationConfig(max_new_tokens=5, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    with torch.no_grad():
        reference = model.generate(**enc, generation_config=greedy)
        generation.install_prefix_generate(
            model, flags=generation.GenerationFlags(sampler="generate", end_after_code_block=False, fast_sampling=True)
        )
        out = model.generate(**enc, generation_config=sampling)
        assert out.shape == (4, enc["input_ids"].shape[1] + 5) and len(calls) == 5
        assert torch.equal(model.generate(**enc, generation_config=greedy), reference) and len(calls) == 5
