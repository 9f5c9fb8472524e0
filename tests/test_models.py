"""Model loading: the embedded model's tokenizer from its GGUF, tiny models for fast tests.

The full embedded-model conversion (45 s, 540 MB) is exercised by the quickstart, not here.
"""

import pytest

pytest.importorskip("transformers")

from rubriq.models import EMBEDDED, ModelUnavailable, embedded_gguf, load_tokenizer, tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    import os

    os.environ.setdefault("RUBRIQ_CACHE", str(tmp_path_factory.mktemp("cache")))
    return load_tokenizer(EMBEDDED)


def test_embedded_gguf_is_shipped_by_the_package():
    path = embedded_gguf()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000


def test_real_tokenizer_and_chat_template(tokenizer):
    assert len(tokenizer) == 49152
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "qreg q[2];"}], tokenize=False, add_generation_prompt=True
    )
    assert "qreg q[2];" in text and text.rstrip().endswith("assistant")
    ids = tokenizer("h q[0];")["input_ids"]
    assert tokenizer.decode(ids) == "h q[0];"


def test_tiny_model_generates_with_the_real_tokenizer(tokenizer):
    import torch

    model = tiny_model(tokenizer)
    assert sum(p.numel() for p in model.parameters()) < 5_000_000
    enc = tokenizer("OPENQASM 2.0;", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=5, do_sample=False, pad_token_id=model.config.pad_token_id)
    assert out.shape[1] == enc["input_ids"].shape[1] + 5
    again = tiny_model(tokenizer)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters(), strict=True))  # seeded


def test_unknown_model_is_a_clear_error(tmp_path):
    from rubriq.models import load_model

    with pytest.raises(ModelUnavailable, match="cannot load model"):
        load_model(str(tmp_path / "nothing-here"))


def test_full_fine_tuning_keeps_the_trained_weights_float32(tokenizer, caplog):
    """auto casts frozen weights to bf16 where the CPU has bf16 units, but weights that are
    trained stay float32: in bf16 an AdamW step of 1e-4 on a weight of 0.05 rounds away."""
    import logging

    import torch

    from rubriq.models import to_policy_precision

    weight = torch.tensor(0.05, dtype=torch.bfloat16)
    assert weight - 1e-4 == weight  # the reason: half a bf16 ulp at 0.05 is 1.2e-4
    assert torch.tensor(0.05) - 1e-4 != torch.tensor(0.05)

    def dtype(model):
        return {p.dtype for p in model.parameters()}

    assert dtype(to_policy_precision(tiny_model(tokenizer), "auto", trained=True)) == {torch.float32}
    assert dtype(to_policy_precision(tiny_model(tokenizer), "bfloat16")) == {torch.bfloat16}
    assert dtype(to_policy_precision(tiny_model(tokenizer).bfloat16(), "float32", trained=True)) == {torch.float32}
    with caplog.at_level(logging.WARNING, logger="rubriq.models"):
        model = to_policy_precision(tiny_model(tokenizer), "bfloat16", trained=True)
    assert dtype(model) == {torch.bfloat16}
    assert any("full fine-tuning" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
