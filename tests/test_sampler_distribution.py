"""The static sampler (rubriq/models/static_decoding.py through decoding.decode) draws from exactly
the policy's distribution: greedy tokens equal transformers' ``generate``, sampled token
frequencies match the exact probabilities (a chi-square test, fixed seed, bounded sample count:
deterministic), log-probabilities equal the training forward's, and the policy's weights are left
bit for bit as they were (the adapter is merged into copies, never into the model)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")


def _tiny(vocab: int = 96, layers: int = 2, seed: int = 0, bias: bool = False):
    """A random Llama (grouped-query attention) with a LoRA adapter whose B is not zero."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        attention_bias=bias,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    model = get_peft_model(
        LlamaForCausalLM(config),
        LoraConfig(
            task_type="CAUSAL_LM", r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj", "down_proj"]
        ),
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.3)
    return model


def _batch(groups: int = 3, size: int = 4, vocab: int = 96, seed: int = 1):
    """``groups`` distinct left-padded prompts, each ``size`` times in a row (a GRPO batch)."""
    g = torch.Generator().manual_seed(seed)
    lengths = [7, 5, 9, 6][:groups]
    width = max(lengths)
    ids = torch.zeros((groups, width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, n in enumerate(lengths):
        ids[i, width - n :] = torch.randint(3, vocab, (n,), generator=g)
        mask[i, width - n :] = 1
    return ids.repeat_interleave(size, 0), mask.repeat_interleave(size, 0)


def _plan(**changes):
    from rubriq.models.decoding import DecodePlan

    return DecodePlan(**{"max_new_tokens": 12, "eos_token_ids": (2,), "pad_token_id": 0, **changes})


EOS = tuple(range(2, 96, 7))
"""Many end-of-sequence ids, so that rows end at different steps (finished rows leave the step)."""


@pytest.mark.parametrize("bias", [False, True])
def test_static_greedy_tokens_equal_transformers_generate(bias):
    from rubriq.models.decoding import decode

    model = _tiny(bias=bias).eval()
    ids, mask = _batch(groups=4, size=1)  # greedy: one row per prompt
    ids, mask = torch.cat([ids, ids.flip(1)]), torch.cat([mask, mask.flip(1).sort(1).values])
    ids = ids * mask
    with torch.no_grad():
        reference = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=12,
            do_sample=False,
            pad_token_id=0,
            eos_token_id=list(EOS),
        )
        ended = torch.isin(reference[:, ids.shape[1] :], torch.tensor(EOS)).any(1)
        assert bool(ended.any()) and not bool(ended.all())  # rows end at different steps
        for drop in (True, False):
            plan = _plan(do_sample=False, eos_token_ids=EOS)
            ours = decode(model, ids, mask, plan, drop_finished_rows=drop, static=True)
            assert torch.equal(ours, reference[:, : ours.shape[1]]), drop
            assert ours.shape[1] == reference.shape[1] or bool((reference[:, ours.shape[1] :] == 0).all())


def test_static_logprobs_equal_the_training_forward():
    from rubriq.models.decoding import decode
    from rubriq.training.grpo import completion_logps_and_entropy

    model = _tiny().eval()
    ids, mask = _batch()
    torch.manual_seed(0)
    plan = _plan(temperature=0.8, top_p=0.9, eos_token_ids=EOS)
    sequences, logps = decode(model, ids, mask, plan, static=True, return_logprobs=True)
    new = sequences.shape[1] - ids.shape[1]
    full_mask = torch.cat([mask, torch.ones((ids.shape[0], new), dtype=torch.long)], dim=1)
    with torch.no_grad():
        reference, _ = completion_logps_and_entropy(model, sequences, full_mask, new, temperature=0.8)
    completion = sequences[:, ids.shape[1] :]
    is_eos = torch.isin(completion, torch.tensor(EOS))
    ended = torch.cumsum(is_eos, dim=1) - is_eos.long() > 0  # after each row's eos
    assert bool(ended.any()) and not bool(ended[:, -1].all())  # some rows ended early, not all
    assert torch.allclose(logps[~ended], reference[~ended], atol=1e-4)
    assert bool((logps[ended] == 0).all())


def test_static_sampled_frequencies_match_the_exact_probabilities():
    """The second token of 6000 sampled rows (one prompt, so one shared group), counted per value
    after the most frequent first token, against the exact top-p / temperature probabilities of the
    policy's forward: a chi-square statistic below its 1e-6 quantile. The seed is fixed, so the
    outcome is the same on every run."""
    from scipy.stats import chi2

    from rubriq.models.decoding import decode

    vocab, rows = 12, 6000
    model = _tiny(vocab=vocab, seed=3).eval()
    ids = torch.tensor([[1, 5, 7, 4, 9]]).repeat(rows, 1)
    for fast in (True, False):
        torch.manual_seed(0)
        plan = _plan(max_new_tokens=2, eos_token_ids=(), temperature=0.7, top_p=0.95)
        out = decode(model, ids, None, plan, fast_sampling=fast, static=True)
        first, second = out[:, 5], out[:, 6]
        token = int(torch.bincount(first, minlength=vocab).argmax())
        seen = second[first == token]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([[1, 5, 7, 4, 9, token]])).logits[0, -1].double() / 0.7
        p = logits.softmax(-1)
        order = p.argsort(descending=True)
        above = p[order].cumsum(0) - p[order]
        keep = torch.zeros_like(p, dtype=torch.bool)
        keep[order[above < 0.95]] = True
        exact = torch.where(keep, p, 0.0)
        exact = exact / exact.sum()
        counts = torch.bincount(seen, minlength=vocab).double()
        assert counts[~keep].sum() == 0  # nothing outside the nucleus
        expected = exact * seen.numel()
        bins = expected >= 5
        rest = ~bins & keep
        observed = torch.cat([counts[bins], counts[rest].sum().view(1)])
        wanted = torch.cat([expected[bins], expected[rest].sum().view(1)])
        if float(wanted[-1]) == 0.0:
            observed, wanted = observed[:-1], wanted[:-1]
        statistic = float(((observed - wanted) ** 2 / wanted).sum())
        assert seen.numel() > 500
        assert statistic < chi2.ppf(1 - 1e-6, len(wanted) - 1), (fast, statistic)


def test_static_sampling_leaves_the_policy_bit_for_bit_and_in_its_mode():
    from rubriq.models.decoding import decode

    model = _tiny()
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids, mask = _batch()
    decode(model, ids, mask, _plan(temperature=0.8), static=True)
    assert model.training
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_static_decoder_declines_what_it_does_not_support_and_decode_falls_back():
    from transformers import GPT2Config, GPT2LMHeadModel

    from rubriq.models.decoding import decode
    from rubriq.models.static_decoding import supported

    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2, n_positions=64)).eval()
    assert "Llama-like" in (supported(gpt2) or "")
    ids = torch.randint(3, 64, (2, 5))
    with torch.no_grad():
        reference = gpt2.generate(input_ids=ids, max_new_tokens=4, do_sample=False, pad_token_id=0, eos_token_id=2)
    ours = decode(gpt2, ids, None, _plan(max_new_tokens=4, do_sample=False), static=True)
    assert torch.equal(ours, reference[:, : ours.shape[1]])
