"""RubriQ's decoding loop (rubriq/models/generation.py, ``decode``): the same tokens as
transformers' ``generate`` when greedy, on several architectures; the distribution transformers'
sampling gives (frequencies against the exact probabilities); log-probabilities equal to a
whole-row forward; a fallback to ``generate`` for whatever it does not do; and where the GRPO
trainer, the studies and the evaluation sampler use it. Tiny random models, no download."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.tiny import CPU  # noqa: E402

V = 300


def _tiny(kind: str, vocab: int = V, seed: int = 0):
    """A tiny random causal LM of architecture ``kind`` (float32, eval mode)."""
    t = transformers
    small = {"vocab_size": vocab, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
    heads = {"num_attention_heads": 4, "num_key_value_heads": 2}
    configs = {
        "llama": lambda: t.LlamaConfig(**small, **heads),
        "qwen2": lambda: t.Qwen2Config(**small, **heads),
        "phi3": lambda: t.Phi3Config(**small, **heads, pad_token_id=0),
        "gpt2": lambda: t.GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=4),
        "opt": lambda: t.OPTConfig(
            vocab_size=vocab,
            hidden_size=32,
            ffn_dim=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            word_embed_proj_dim=32,
        ),
        "gemma2": lambda: t.Gemma2Config(**small, **heads, head_dim=8),  # sliding-window layers
    }
    torch.manual_seed(seed)
    return t.AutoModelForCausalLM.from_config(configs[kind]()).eval()


def _prompts(groups: int = 4, size: int = 2, length: int = 7, seed: int = 1):
    """``groups`` distinct left-padded prompts (one padded), each repeated ``size`` times."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, V, (groups, length), generator=g)
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = 0, 0
    return ids.repeat_interleave(size, 0), mask.repeat_interleave(size, 0)


@pytest.mark.parametrize("kind", ["llama", "qwen2", "phi3", "gpt2", "opt"])
def test_greedy_decoding_gives_generates_tokens(kind):
    """Rows that end at different steps (end-of-sequence ids picked from a free run), shared and
    left-padded prompts: decode returns generate's very tensor, dropping finished rows or not."""
    from rubriq.models.generation import decode, decode_plan

    model = _tiny(kind)
    ids, mask = _prompts()
    with torch.no_grad():
        free = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=10, do_sample=False, pad_token_id=0, eos_token_id=[]
        )
        width = ids.shape[1]
        eos = sorted({int(free[0, width + 2]), int(free[4, width + 5])})
        kwargs = {"max_new_tokens": 10, "do_sample": False, "pad_token_id": 0, "eos_token_id": eos}
        reference = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
        plan = decode_plan(model, ids, kwargs)
        assert plan is not None and plan.eos_token_ids == tuple(eos) and plan.max_new_tokens == 10
        for drop in (True, False):
            ours = decode(model, ids, mask, plan, drop_finished_rows=drop)
            assert torch.equal(ours, reference), (kind, drop)
    ends = (reference[:, width:, None] == torch.tensor(eos)).any(-1)
    assert ends.any(1).sum() >= 2 and not ends.any(1).all()  # some rows ended early, others ran on


@pytest.mark.parametrize(
    "kwargs",
    [
        {"repetition_penalty": 1.3},
        {"num_beams": 2},
        {"min_new_tokens": 3},
        {"no_repeat_ngram_size": 2},
        {"return_dict_in_generate": True, "output_scores": True},
        {"do_sample": True, "typical_p": 0.5},
        {"do_sample": True, "min_p": 0.1},
    ],
)
def test_calls_decode_does_not_do_are_left_to_generate(kwargs):
    from rubriq.models.generation import decode_plan, generate_with_options

    model = _tiny("llama")
    ids, mask = _prompts()
    base = {"max_new_tokens": 5, "pad_token_id": 0, "do_sample": False, **kwargs}
    assert decode_plan(model, ids, base) is None
    if kwargs.get("do_sample") or kwargs.get("return_dict_in_generate"):
        return
    with torch.no_grad():
        reference = model.generate(input_ids=ids, attention_mask=mask, **base)
        ours = generate_with_options(model, sampler="loop")(input_ids=ids, attention_mask=mask, **base)
    assert torch.equal(ours, reference)


def test_models_without_a_plain_key_value_cache_are_left_to_generate():
    from transformers import LogitsProcessorList, TopKLogitsWarper

    from rubriq.models.generation import causal_lm, decode_plan

    ids, _ = _prompts()
    assert causal_lm(_tiny("gemma2")) is None  # sliding-window layers
    model = _tiny("llama")
    assert causal_lm(model) is model
    custom = {"max_new_tokens": 4, "logits_processor": LogitsProcessorList([TopKLogitsWarper(3)])}
    assert decode_plan(model, ids, custom) is None  # a logits processor it does not know


def _exact_pairs(model, prompt, warp, eos: int, vocab: int):
    """P(first two tokens) under transformers' warpers ``warp`` (the second token is the pad 0
    after an end-of-sequence first token)."""
    with torch.no_grad():
        first = warp(model(prompt[None]).logits[0, -1:].float()).softmax(-1)[0]
        seconds = torch.cat([prompt.repeat(vocab, 1), torch.arange(vocab)[:, None]], dim=1)
        second = warp(model(seconds).logits[:, -1].float()).softmax(-1)
    pairs = first[:, None] * second
    pairs[eos] = 0.0
    pairs[eos, 0] = first[eos]
    return pairs.double()


@pytest.mark.parametrize("fast_sampling", [True, False])
@pytest.mark.parametrize(
    "settings",
    [
        {"temperature": 0.8, "top_p": 1.0, "top_k": 0},  # the whole softmax (inverse transform)
        {"temperature": 0.7, "top_p": 0.8, "top_k": 0},  # a nucleus (Gumbel-max among candidates)
        {"temperature": 1.0, "top_p": 1.0, "top_k": 3},
    ],
)
def test_decode_samples_the_distribution_transformers_sampling_gives(fast_sampling, settings):
    """Two shared prompts x 4,000 rows, two new tokens, the first prompt's most likely token ends
    a row (those rows leave the batch): the frequency of every (first, second) token pair is within 6 standard errors (+ 2
    draws) of its exact probability under transformers' own warpers, and no pair outside the
    sampled support appears."""
    from transformers import GenerationConfig, LogitsProcessorList
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    from rubriq.models.generation import decode, decode_plan

    vocab, rows = 8, 4000
    model = _tiny("llama", vocab=vocab, seed=3)
    prompts = torch.tensor([[2, 5, 3], [6, 4, 7]])
    ids = prompts.repeat_interleave(rows, 0)
    warpers = LogitsProcessorList()
    if settings["temperature"] != 1.0:
        warpers.append(TemperatureLogitsWarper(settings["temperature"]))
    if settings["top_k"]:
        warpers.append(TopKLogitsWarper(settings["top_k"]))
    if settings["top_p"] < 1.0:
        warpers.append(TopPLogitsWarper(settings["top_p"]))
    with torch.no_grad():
        eos = int(model(prompts[:1]).logits[0, -1].argmax())
    config = GenerationConfig(max_new_tokens=2, do_sample=True, pad_token_id=0, eos_token_id=eos, **settings)
    plan = decode_plan(model, ids, {"generation_config": config})
    assert plan is not None and plan.do_sample
    torch.manual_seed(0)
    out = decode(model, ids, None, plan, fast_sampling=fast_sampling)
    for p, prompt in enumerate(prompts):
        drawn = out[p * rows : (p + 1) * rows, 3:]
        exact = _exact_pairs(model, prompt, lambda s: warpers(None, s), eos, vocab)
        freq = torch.bincount(drawn[:, 0] * vocab + drawn[:, 1], minlength=vocab * vocab).double().view(vocab, vocab)
        freq /= rows
        sigma = (exact * (1 - exact) / rows).sqrt()
        assert float(freq[exact == 0].sum()) == 0.0
        assert bool(((freq - exact).abs() <= 6 * sigma + 2 / rows).all()), (settings, (freq - exact).abs().max())
        if p == 0:
            assert 0.125 < float(exact[eos].sum()) < 0.98  # enough rows ended to leave the batch


def test_decodes_log_probabilities_equal_the_whole_row_forward():
    """A tiny Llama with a LoRA adapter (nonzero), shared left-padded prompts, rows ending at
    different steps and after their 'code block' (two fence tokens): the log-probability decode
    returns for each sampled token equals the one the GRPO update computes from the whole row
    (``completion_logps_and_entropy``: prompt + completion, float32 LM head)."""
    from peft import LoraConfig, get_peft_model
    from transformers import GenerationConfig

    from rubriq.models.generation import EndAfterCodeBlock, decode, decode_plan
    from rubriq.training.grpo import completion_logps_and_entropy

    vocab, new, eos, fences = 16, 12, [1, 2], [3]
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(_tiny("llama", vocab=vocab, seed=5), lora).eval()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(4, vocab, (3, 6), generator=g)
    mask = torch.ones_like(ids)
    ids[2, :3], mask[2, :3] = 0, 0
    ids, mask = ids.repeat_interleave(4, 0), mask.repeat_interleave(4, 0)
    width = ids.shape[1]
    config = GenerationConfig(
        max_new_tokens=new, do_sample=True, temperature=0.7, top_p=0.95, top_k=0, pad_token_id=0, eos_token_id=eos
    )
    end = EndAfterCodeBlock(fences, eos[0], width)
    plan = decode_plan(model, ids, {"generation_config": config, "logits_processor": [end]})
    assert plan is not None and plan.end_after_block is end
    torch.manual_seed(1)
    sequences, logps = decode(model, ids, mask, plan, return_logprobs=True)
    completions = sequences[:, width:]
    ended = torch.isin(completions, torch.tensor(eos))
    last = torch.where(ended.any(1), ended.int().argmax(1), completions.shape[1] - 1)
    keep = torch.arange(completions.shape[1])[None] <= last[:, None]
    assert 0 < int((~keep).sum()) and len(set(last.tolist())) > 2  # rows ended at several steps
    full = torch.cat([mask, keep.long()], dim=1)
    with torch.no_grad():
        reference, _ = completion_logps_and_entropy(model, sequences, full, completions.shape[1], temperature=0.7)
    assert torch.allclose(logps[keep], reference[keep], atol=1e-5), (logps - reference)[keep].abs().max()
    assert float(logps[keep].abs().mean()) > 0.5  # real log-probabilities, not zeros
    assert bool((logps[~keep] == 0).all())
    fenced = torch.isin(completions, torch.tensor(fences)).cumsum(1)
    after_block = torch.zeros_like(keep)
    after_block[:, 1:] = fenced[:, :-1] >= 2
    assert bool(after_block.any()) and bool((completions[after_block & keep] == eos[0]).all())


def test_grpo_samples_through_the_decoding_loop_by_default_and_studies_through_generate(tmp_path, monkeypatch):
    """One GRPO step of the tiny model: with the default sampler (``static``) and with ``loop``
    every completion batch is decoded by ``decode``; with the learning and convergence studies'
    settings (``fast_decoding: false`` read as ``sampler: generate``) it is transformers' generate."""
    import dataclasses

    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    import rubriq.models.generation as generation
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.models import load_tokenizer, tiny_model
    from rubriq.training.config import TrainSettings
    from rubriq.training.grpo import build_grpo_trainer

    rows = synthesis_rows(
        PromptSpec(qft_sizes=(2,), qpe_sizes=(), hamiltonian_sizes=(), encoding_sizes=(), formats=("qasm2",))
    )
    calls = []
    real = generation.decode
    monkeypatch.setattr(generation, "decode", lambda *a, **k: calls.append(k.get("static")) or real(*a, **k))
    tokenizer = load_tokenizer("embedded")
    for config in ("learning_train.yaml", "convergence_train.yaml"):
        study = TrainSettings.from_yaml(f"configs/studies/{config}").generation
        assert study.sampler == "generate" and not study.fast_sampling and not study.drop_finished_rows, config
    defaults = TrainSettings().generation
    assert defaults.sampler == "static" and defaults.drop_finished_rows and defaults.fast_sampling
    for flags in (defaults, dataclasses.replace(defaults, sampler="loop"), study):
        calls.clear()
        trainer = build_grpo_trainer(
            tiny_model(tokenizer),
            tokenizer,
            rows,
            grpo_args=dict(
                output_dir=str(tmp_path / "out"),
                per_device_train_batch_size=4,
                num_generations=4,
                max_completion_length=8,
                max_steps=1,
                save_strategy="no",
                temperature=0.8,
                **CPU,
            ),
            lora=dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
            generation=flags,
        )
        trainer.train()
        assert trainer.state.log_history[0]["completions/mean_length"] > 0
        expected = {"static": [True], "loop": [False], "generate": []}[flags.sampler]
        assert calls == expected, flags


def test_evaluation_sampler_fast_decoding_gives_the_same_greedy_completions(tmp_path, monkeypatch):
    monkeypatch.setenv("RUBRIQ_CACHE", str(tmp_path / "cache"))
    import rubriq.models.generation as generation
    from rubriq.data.prompts import PromptSpec, synthesis_rows
    from rubriq.evaluation.sampling import generate
    from rubriq.models import load_tokenizer, tiny_model

    rows = synthesis_rows(
        PromptSpec(qft_sizes=(2, 3), qpe_sizes=(), hamiltonian_sizes=(), encoding_sizes=(), formats=("qasm2",))
    )
    tokenizer = load_tokenizer("embedded")
    model = tiny_model(tokenizer)
    calls = []
    real = generation.decode
    monkeypatch.setattr(generation, "decode", lambda *a, **k: calls.append(1) or real(*a, **k))
    common = {"max_new_tokens": 6, "batch_size": 4, "progress": False}
    plain = generate(model, tokenizer, rows, sampler="generate", **common)
    assert not calls
    fast = generate(model, tokenizer, rows, sampler="static", **common)
    assert calls and [r.text for r in fast] == [r.text for r in plain]
    sampled = generate(model, tokenizer, rows, samples=3, temperature=0.8, sampler="loop", **common)
    assert len(sampled) == 3 * len(rows) and [r.sample for r in sampled[:3]] == [0, 1, 2]
    assert not getattr(model.generate, "_rubriq_prefix", False)  # the model itself was left as it was
