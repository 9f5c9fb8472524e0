"""Stage 2, the warm-start: the one policy every arm starts from, trained once (SFT on the
training prompts, ``rubriq.training.train_rubriq.warm_start``) into ``OUT/sft/model`` and
reused on every later run, or a pre-built one (``warm_start_model``: a model folder used where
it is, or a PEFT adapter folder merged into its base in ``OUT/sft/model``), and its fingerprint, the SHA-256 of its weights, which every finished arm-seed records
(``done.json``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubriq.config import ConfigError
from rubriq.studies.settings import _portable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WarmStart:
    """The warm-start on disk, its tokenizer, and a loader of it."""

    model_dir: Path
    tokenizer: Any
    precision: str
    """``model.precision`` of the training config: the policy is loaded as GRPO runs it."""

    def load(self):
        """A fresh copy of the warm-start in the policy's precision."""
        from rubriq.models import load_model, to_policy_precision

        return to_policy_precision(load_model(str(self.model_dir)), self.precision)


def prepare_warm_start(study, data, out: Path) -> WarmStart:
    """The pre-built ``warm_start_model`` (checked, used where it is), else the warm-start trained
    into ``OUT/sft/model`` unless it is there (with ``sft.enabled`` false: the base model, saved
    as it is); its fingerprint is recorded either way."""
    from rubriq.models import EMBEDDED, load_tokenizer, prepare_embedded
    from rubriq.training.train_rubriq import load_base
    from rubriq.training.train_rubriq import warm_start as train_sft

    settings = data.settings
    if study.warm_start_model and (Path(study.warm_start_model) / "adapter_config.json").is_file():
        model_dir = merge_adapter(Path(study.warm_start_model), out / "sft" / "model")
        warm_start_fingerprint(out)
        return WarmStart(model_dir, load_tokenizer(str(model_dir)), settings.model.precision)
    if study.warm_start_model:
        model_dir = check_model_folder(Path(study.warm_start_model))
        warm_start_fingerprint(out, model=model_dir)
        return WarmStart(model_dir, load_tokenizer(str(model_dir)), settings.model.precision)
    if settings.model.name_or_path == EMBEDDED and not settings.model.tiny:
        prepare_embedded()
    model_dir = out / "sft" / "model"
    trained = not (model_dir / "config.json").is_file()
    if trained:
        tokenizer, model = load_base(settings)
        if settings.sft.enabled:
            log.info("SFT warm-start on split %r", settings.sft.split or settings.data.split)
            train_sft(settings, tokenizer, model)
        else:
            model.save_pretrained(model_dir)
            tokenizer.save_pretrained(model_dir)
    warm_start_fingerprint(out, trained_here=trained)
    return WarmStart(model_dir, load_tokenizer(settings.model.name_or_path), settings.model.precision)


def merge_adapter(adapter: Path, model_dir: Path) -> Path:
    """A PEFT adapter folder as a warm-start: merged into its base model (PEFT's
    ``merge_and_unload``) and saved, with the tokenizer, to ``model_dir`` (``OUT/sft/model``) once;
    ``model_dir/merged_from.json`` names the adapter and the SHA-256 of its weights, and a folder
    merged from other weights is merged again.  So a committed adapter (a few MB) stands for the
    merged model (hundreds of MB) on any machine."""
    from peft import PeftModel

    from rubriq.models import adapter_base, load_model, load_tokenizer

    weights = sorted(adapter.glob("*.safetensors"))
    if not weights:
        raise ConfigError(f"warm_start_model {adapter}: an adapter folder without *.safetensors weights")
    # relative to the working folder where it lies in it, so that a record committed from one
    # checkout reads the same from another
    source = {"adapter": _portable(str(adapter.resolve())), "sha256": _sha256(weights)}
    marker = model_dir / "merged_from.json"
    if (model_dir / "config.json").is_file() and marker.is_file():
        if json.loads(marker.read_text()).get("sha256") == source["sha256"]:
            return model_dir
    base = adapter_base(adapter)
    log.info("merging the adapter %s into its base %s -> %s", adapter, base, model_dir)
    merged = PeftModel.from_pretrained(load_model(base), str(adapter)).merge_and_unload()
    model_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(model_dir)
    tok_dir = adapter if (adapter / "tokenizer_config.json").is_file() else base
    load_tokenizer(str(tok_dir)).save_pretrained(model_dir)
    marker.write_text(json.dumps(source, indent=2))
    return model_dir


def _sha256(files: list[Path]) -> str:
    """The SHA-256 of ``files``' bytes, in order (the fingerprint of a set of weight files)."""
    digest = hashlib.sha256()
    for file in files:
        with open(file, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 24), b""):
                digest.update(chunk)
    return digest.hexdigest()


def check_model_folder(folder: Path) -> Path:
    """``folder`` (resolved) if it holds a model in Hugging Face format a study can start from:
    ``config.json``, ``*.safetensors`` weights (what the fingerprint hashes) and a tokenizer;
    else a ConfigError saying what is missing."""
    where = f"warm_start_model {folder}"
    if not folder.is_dir():
        raise ConfigError(f"{where}: no such folder")
    missing = [
        what
        for what, present in (
            ("config.json", (folder / "config.json").is_file()),
            ("*.safetensors weights", any(folder.glob("*.safetensors"))),
            (
                "a tokenizer (tokenizer.json or tokenizer_config.json)",
                any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")),
            ),
        )
        if not present
    ]
    if missing:
        raise ConfigError(
            f"{where}: not a model folder in Hugging Face format (missing {', '.join(missing)}); "
            "write one with model.save_pretrained(FOLDER) and tokenizer.save_pretrained(FOLDER)"
        )
    return folder.resolve()


def warm_start_fingerprint(out: Path, trained_here: bool = False, model: Path | None = None) -> dict:
    """``OUT/sft/fingerprint.json``: the SHA-256 of the warm-start's weights and the CPU that
    trained it (``model``: a pre-built warm-start's folder, recorded as ``model``; default
    ``OUT/sft/model``).  Every finished arm-seed records the hash (``done.json``), so a study
    whose warm-start was rebuilt (a new machine: bf16 training on another CPU need not give the
    same weights) or replaced says which arm-seeds trained from which; the summary lists them.
    The recorded file is kept only while it names the weights in the model folder (or no
    weights are there, as in committed results): a run folder restored from results and given a
    rebuilt warm-start gets the new model's fingerprint, with a warning, not the old one's."""
    path = out / "sft" / "fingerprint.json"
    folder = model or out / "sft" / "model"
    inside = model is None or folder.resolve() == (out / "sft" / "model").resolve()
    source = None if inside else _portable(str(folder.resolve()))
    weights = sorted(folder.glob("*.safetensors"))
    recorded = json.loads(path.read_text()) if path.is_file() else None
    if recorded is not None and not weights:
        return recorded
    sha = _sha256(weights)
    if recorded is not None:
        if recorded.get("sha256") == sha and recorded.get("model") == source:
            return recorded
        log.warning(
            "%s names warm-start %s, but the weights in %s are %s (the warm-start was rebuilt or replaced): "
            "recording the new one",
            path,
            str(recorded.get("sha256"))[:12],
            folder,
            sha[:12],
        )
    info = {
        "sha256": sha,
        "trained_on": _cpu_name() if trained_here else None,  # None: the model was there before the fingerprint
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if source is not None:
        info["model"] = source  # a pre-built warm-start, used where it is
    merged_from = folder / "merged_from.json"
    if merged_from.is_file():
        info["merged_from"] = json.loads(merged_from.read_text())  # a committed adapter, merged here
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=2))
    return info


def _cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what ``platform`` says."""
    cpu = platform.processor() or platform.machine()
    try:
        names = [x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("model name")]
        cpu = names[0].split(":", 1)[1].strip() if names else cpu
    except OSError:
        pass
    return cpu


__all__ = ["WarmStart", "check_model_folder", "prepare_warm_start", "warm_start_fingerprint"]
