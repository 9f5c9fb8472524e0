"""The committed rewriting warm-start (results/studies/rewriting/warm_start): its files are the
ones its SHA256SUMS names, RubriQ resolves its base to the embedded model and prompts it the way
it was trained, and every LoRA tensor fits the module of SmolLM2-135M it adapts.

The full load (`rubriq evaluate --model results/studies/rewriting/warm_start`) converts the
embedded model first (45 s, 540 MB), so it is not run here; docs/studies.md says how the held-out
numbers were reproduced with it.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

pytest.importorskip("peft")

from rubriq.evaluation.evaluate import prompt_style_of  # noqa: E402
from rubriq.models import EMBEDDED, adapter_base, embedded_gguf  # noqa: E402

WARM_START = Path(__file__).resolve().parents[1] / "results" / "studies" / "rewriting" / "warm_start"


def _sums() -> dict[str, str]:
    lines = (WARM_START / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    sums = {}
    for line in lines:
        match = re.fullmatch(r"([0-9a-f]{64})  (\S+)", line)
        assert match, f"not a sha256sum line: {line!r}"
        sums[match.group(2)] = match.group(1)
    return sums


def test_the_warm_start_is_what_its_hashes_say():
    sums = _sums()
    files = {p.name for p in WARM_START.iterdir() if p.name != "SHA256SUMS"}
    assert set(sums) == files, "SHA256SUMS must list every file of the folder, and only those"
    assert {"adapter_config.json", "adapter_model.safetensors", "rubriq_policy.json"} <= files
    for name, digest in sums.items():
        assert hashlib.sha256((WARM_START / name).read_bytes()).hexdigest() == digest, name


def test_the_warm_start_loads_onto_the_embedded_model_with_minimal_prompts():
    assert adapter_base(WARM_START) == EMBEDDED
    assert prompt_style_of(str(WARM_START)) == "minimal"
    info = json.loads((WARM_START / "rubriq_policy.json").read_text(encoding="utf-8"))
    assert info["base_model"] == EMBEDDED


def test_every_lora_tensor_fits_the_module_it_adapts():
    """Shapes from the embedded GGUF's own config (a model on the meta device: no weights)."""
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    gguf = embedded_gguf()
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    modules = dict(model.named_modules())
    adapter = json.loads((WARM_START / "adapter_config.json").read_text(encoding="utf-8"))
    rank = adapter["r"]
    seen = set()
    with safe_open(str(WARM_START / "adapter_model.safetensors"), framework="pt") as fh:
        keys = list(fh.keys())
        assert keys
        for key in keys:
            match = re.fullmatch(r"base_model\.model\.(.+)\.lora_([AB])\.weight", key)
            assert match, key
            module = modules[match.group(1)]
            shape = tuple(fh.get_slice(key).get_shape())
            expected = (rank, module.in_features) if match.group(2) == "A" else (module.out_features, rank)
            assert shape == expected, key
            seen.add(match.group(1).rsplit(".", 1)[1])
    assert seen == set(adapter["target_modules"])
    assert len(keys) == 2 * config.num_hidden_layers * len(seen)


def test_every_committed_policy_folder_has_a_model_card():
    """A README.md in the Hugging Face convention (YAML front matter: base model, library, metrics)
    beside every committed adapter, its numbers those of the committed evaluation (curve.jsonl)."""
    import json

    import yaml

    root = Path(__file__).resolve().parents[1] / "results"
    folders = [p.parent for p in root.rglob("adapter_config.json")]
    assert folders
    for folder in folders:
        text = (folder / "README.md").read_text(encoding="utf-8")
        assert text.startswith("---\n"), folder
        meta = yaml.safe_load(text.split("---\n")[1])
        assert meta["base_model"] and meta["library_name"] == "peft" and meta["model-index"], folder
        for heading in ("## Training data and recipe", "## Evaluation", "## Intended use and limits", "## How to load"):
            assert heading in text, (folder, heading)
    # the RFT adapter's card is the one its committed summary makes (regenerated, not edited)
    from rubriq.studies.rft import model_card

    rft = root / "studies" / "rewriting" / "rft"
    assert (rft / "adapter" / "README.md").read_text(encoding="utf-8") == model_card(
        rft, "results/studies/rewriting/rft"
    )
    # the hand-written card of the first warm-start says what the card generator computes from its records
    from rubriq.studies.sft_curve import SftCurveSettings
    from rubriq.studies.sft_curve import model_card as curve_card

    curve = SftCurveSettings.from_yaml(root.parent / "configs" / "studies" / "rewriting_warm_start.yaml")
    generated = yaml.safe_load(curve_card(WARM_START.parent, curve, "x").split("---\n")[1])
    written = yaml.safe_load((WARM_START / "README.md").read_text().split("---\n")[1])
    assert generated["model-index"][0]["results"][0]["metrics"] == written["model-index"][0]["results"][0]["metrics"]
    last = json.loads((WARM_START.parent / "curve.jsonl").read_text().splitlines()[-1])
    metrics = {
        m["type"]: m["value"]
        for m in yaml.safe_load((WARM_START / "README.md").read_text().split("---\n")[1])["model-index"][0]["results"][
            0
        ]["metrics"]
    }
    for key in ("correct_reduction_rate", "copy_rate", "wrong_rate", "gap_closed"):
        assert metrics[key] == round(last[key], 3), key
