"""A chain of committed adapters: a GRPO adapter trained on a merged warm-start names the
warm-start's *adapter* folder as its base, and loading it merges the chain, checked against the
merge computed by hand (W + (alpha / r) B A, twice)."""

from __future__ import annotations

import json

import pytest


def _adapter(model, folder, base: str, fill: float, targets=("q_proj", "v_proj")):
    import torch
    from peft import LoraConfig, get_peft_model

    peft = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=list(targets)))
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.fill_(fill)
    peft.save_pretrained(folder)
    config = json.loads((folder / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = base
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return {
        n: p.detach().clone()
        for n, p in peft.named_parameters()
        if "lora_" in n  # A and B of each adapted matrix, to recompute the merge by hand
    }


def _by_hand(weight, lora: dict, module: str, scale: float = 4 / 2):
    a = next(v for k, v in lora.items() if module in k and "lora_A" in k)
    b = next(v for k, v in lora.items() if module in k and "lora_B" in k)
    return weight + scale * b @ a


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    from rubriq.models import load_tokenizer, tiny_model

    root = tmp_path_factory.mktemp("chain")
    tokenizer = load_tokenizer()
    base = tiny_model(tokenizer, seed=5)
    base.save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    w0 = base.model.layers[0].self_attn.q_proj.weight.detach().clone()
    first = _adapter(tiny_model(tokenizer, seed=5), root / "warm_start", "../base", 0.01)
    # the second adapter is trained on the merged warm-start; it names the warm-start's folder
    from peft import PeftModel

    merged = PeftModel.from_pretrained(tiny_model(tokenizer, seed=5), str(root / "warm_start")).merge_and_unload()
    (root / "weights").mkdir()
    second = _adapter(merged, root / "weights" / "grpo", "../../warm_start", -0.02, targets=("q_proj",))
    return root, w0, first, second


def test_a_chain_of_adapters_loads_as_the_merge_by_hand(chain):
    import torch

    from rubriq.models import load_model

    root, w0, first, second = chain
    model = load_model(str(root / "weights" / "grpo"))
    expected = _by_hand(_by_hand(w0, first, "layers.0.self_attn.q_proj"), second, "layers.0.self_attn.q_proj")
    got = model.model.layers[0].self_attn.q_proj.weight
    assert not any("lora_" in n for n, _ in model.named_parameters())  # merged, not wrapped
    assert torch.allclose(got, expected, atol=1e-6)
    assert not torch.allclose(got, w0, atol=1e-4)  # both adapters changed it


def test_the_chain_loads_for_evaluate_with_its_base_tokenizer(chain):
    """`rubriq evaluate --model FOLDER` on the GRPO adapter: the adapter over the merged
    warm-start, the tokenizer found at the end of the chain (neither adapter saved one)."""
    import torch

    from rubriq.evaluation.evaluate import load_policy

    root, w0, first, second = chain
    tokenizer, model = load_policy(str(root / "weights" / "grpo"))
    assert len(tokenizer) > 0 and tokenizer.eos_token is not None
    merged = model.merge_and_unload()
    expected = _by_hand(_by_hand(w0, first, "layers.0.self_attn.q_proj"), second, "layers.0.self_attn.q_proj")
    assert torch.allclose(merged.model.layers[0].self_attn.q_proj.weight, expected, atol=1e-6)


def test_an_adapter_whose_base_is_missing_is_named(tmp_path, chain):
    from rubriq.models import ModelUnavailable, load_model

    root, *_ = chain
    folder = tmp_path / "orphan"
    folder.mkdir()
    config = json.loads((root / "weights" / "grpo" / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tmp_path / "no" / "such" / "warm_start")
    (folder / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ModelUnavailable, match="does not exist"):
        load_model(str(folder))


def test_an_adapter_chain_that_loops_is_named(tmp_path, chain):
    from rubriq.models import ModelUnavailable, load_model

    root, *_ = chain
    for name, base in (("a", "../b"), ("b", "../a")):
        (tmp_path / name).mkdir()
        config = json.loads((root / "weights" / "grpo" / "adapter_config.json").read_text())
        config["base_model_name_or_path"] = base
        (tmp_path / name / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(ModelUnavailable, match="loops"):
        load_model(str(tmp_path / "a"))
