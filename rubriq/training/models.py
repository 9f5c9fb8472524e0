"""The old place of :mod:`rubriq.models` (moved below evaluation and training, which both load
models): these names still import from here."""

from rubriq.models import (
    EMBEDDED,
    EMBEDDED_HUB_ID,
    GGUF_FILE,
    POLICY_INFO,
    ModelUnavailable,
    adapter_base,
    cpu_bf16_units,
    embedded_dir,
    embedded_gguf,
    load_model,
    load_tokenizer,
    policy_dtype,
    prepare_embedded,
    read_policy_info,
    tiny_model,
    to_policy_precision,
)

__all__ = [
    "EMBEDDED",
    "EMBEDDED_HUB_ID",
    "GGUF_FILE",
    "POLICY_INFO",
    "ModelUnavailable",
    "adapter_base",
    "cpu_bf16_units",
    "embedded_dir",
    "embedded_gguf",
    "load_model",
    "load_tokenizer",
    "policy_dtype",
    "prepare_embedded",
    "read_policy_info",
    "tiny_model",
    "to_policy_precision",
]
