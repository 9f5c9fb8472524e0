"""Sampling in forked processes (rubriq.training.generation.GenerationPool): the same tokens as
sampling in the training process, the policy's in-place updates seen by the next call, a moved
parameter re-forks, seeded sampling reproducible, a failure raised with the process's error,
and a GRPO run that trains with it."""

import json

import pytest
import yaml

from tests.tiny import CPU, tiny_build

pytest.importorskip("trl")
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    import os

    os.environ.setdefault("RUBRIQ_CACHE", str(tmp_path_factory.mktemp("cache")))
    from rubriq.training.models import load_tokenizer

    tok = load_tokenizer("embedded")
    tok.padding_side = "left"
    return tok


def _policy(tokenizer, **install):
    """A tiny LoRA policy with nonzero adapters (so updates change its tokens), one with the
    pool and a twin sampled in this process, sharing the same module."""
    from peft import LoraConfig, get_peft_model

    from rubriq.training.generation import install_prefix_generate
    from rubriq.training.models import tiny_model

    torch.manual_seed(0)
    lora = LoraConfig(
        r=4, lora_alpha=32, lora_dropout=0.0, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    model = get_peft_model(tiny_model(tokenizer), lora)
    return install_prefix_generate(model, tokenizer, **install)


def _enc(tokenizer):
    texts = ["OPENQASM 2.0; qreg q[2];"] * 2 + ["a longer prompt about the QFT on three qubits"] * 2
    texts += ["ccz on three"] * 2
    return tokenizer(texts, return_tensors="pt", padding=True)


def _here(model, enc, **kwargs):
    """The same call generated in this process (the wrapper's own path, pool bypassed)."""
    from rubriq.training import generation

    generation._IN_WORKER = True
    try:
        return model.generate(**enc, **kwargs)
    finally:
        generation._IN_WORKER = False


GREEDY = {"max_new_tokens": 8, "do_sample": False}


def test_the_pool_generates_what_this_process_generates_and_sees_updates(tokenizer):
    model = _policy(tokenizer, generation_workers=2)
    pool = model.generate.args[0]._rubriq_pool
    enc = _enc(tokenizer)
    kw = {**GREEDY, "pad_token_id": tokenizer.eos_token_id}
    try:
        with torch.no_grad():
            first = model.generate(**enc, **kw)
            assert len(pool._procs) == 2 and all(p.is_alive() for p in pool._procs)
            assert torch.equal(first, _here(model, enc, **kw))
            # an optimizer step changes the LoRA weights in place: the processes see it
            lora = [p for n, p in model.named_parameters() if "lora_B" in n]
            assert lora and all(p.is_shared() for p in lora)
            procs = list(pool._procs)
            for p in lora:
                p.add_(torch.randn_like(p) * 2.0)
            second = model.generate(**enc, **kw)
            assert pool._procs == procs  # not forked again
            assert torch.equal(second, _here(model, enc, **kw))
            assert not torch.equal(second, first)  # the update changed the greedy tokens
            # a parameter whose storage is replaced (a cast, a reload) is re-forked for
            lora[0].data = lora[0].data.clone() * -1.0
            third = model.generate(**enc, **kw)
            assert pool._procs != procs
            assert torch.equal(third, _here(model, enc, **kw))
    finally:
        pool.close()


def test_seeded_sampling_in_the_pool_is_reproducible_and_failures_are_raised(tokenizer):
    model = _policy(tokenizer, generation_workers=2, end_after_code_block=True)
    pool = model.generate.args[0]._rubriq_pool
    enc = _enc(tokenizer)
    kw = {"max_new_tokens": 12, "do_sample": True, "temperature": 1.0, "pad_token_id": tokenizer.eos_token_id}
    try:
        with torch.no_grad():
            torch.manual_seed(5)
            a = model.generate(**enc, **kw)
            torch.manual_seed(5)
            b = model.generate(**enc, **kw)
            torch.manual_seed(6)
            c = model.generate(**enc, **kw)
        assert torch.equal(a, b) and not torch.equal(a, c)
        assert a.shape[0] == 6 and torch.equal(a[:, : enc["input_ids"].shape[1]], enc["input_ids"])
        # one group only: generated here, not split
        single = {k: v[:2] for k, v in enc.items()}
        with torch.no_grad():
            assert model.generate(**single, **GREEDY, pad_token_id=tokenizer.eos_token_id).shape[0] == 2
        with pytest.raises(RuntimeError, match="generation pool failed.*worker 0"):
            with torch.no_grad():
                model.generate(**enc, max_new_tokens=4, do_sample=True, temperature=-1.0)
        assert pool._procs == []  # closed after the failure; the next call forks again
    finally:
        pool.close()


def test_bad_generation_workers_is_a_clear_error(tokenizer):
    with pytest.raises(ValueError, match="generation_workers must be 0"):
        _policy(tokenizer, generation_workers=-1)


def test_grpo_trains_with_sampling_in_the_pool(tokenizer, tmp_path, caplog):
    import logging

    from rubriq.training.train_rubriq import main

    config = {
        "output_dir": str(tmp_path / "run"),
        "model": {"name_or_path": "embedded", "tiny": True},
        "lora": {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]},
        "data": {"dataset": str(tmp_path / "data"), "build": tiny_build()},
        "generation_workers": 2,
        "sample_without_dropout": True,
        "grpo": {
            "per_device_train_batch_size": 4,
            "num_generations": 2,
            "max_completion_length": 8,
            "max_steps": 2,
            "logging_steps": 1,
            "save_strategy": "no",
            "seed": 1,
            **CPU,
        },
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    with caplog.at_level(logging.INFO, logger="rubriq.training.generation"):
        assert main(["--rubriq_config", str(path)]) == 0
    assert "sampling in 2 forked processes" in caplog.text
    assert "not in the pool" not in caplog.text  # every batch was split over the processes
    import multiprocessing

    assert not multiprocessing.active_children()  # train() stopped them at its end
    steps = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = [s for s in steps if "timing/generation_s" in s]
    assert len(logged) == 2 and all(s["completions/mean_length"] > 0 for s in logged)
