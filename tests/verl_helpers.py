"""What the verl tests share: verl's own Hydra config composed with overrides, a batch of responses
as verl's ``DataProto`` (what its rollout hands the reward code), and the verl config blocks of
docs/integrations.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "integrations.md"


def compose(overrides: list[str], config_name: str = "ppo_trainer") -> Any:
    """verl's config (``verl/trainer/config/<config_name>.yaml``) with Hydra ``overrides``, as
    ``python -m verl.trainer.main_ppo key=value ...`` composes it."""
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(
        config_dir=os.path.join(os.path.dirname(verl.__file__), "trainer", "config"), version_base=None
    ):
        return hydra_compose(config_name=config_name, overrides=list(overrides))


def data_proto(tokenizer: Any, items: list[tuple[str, Any]], extra_info: bool = True, prompt: str = "Write it.") -> Any:
    """A batch of (response text, ground truth) as verl's rollout leaves it: ``prompts``,
    right-padded ``responses`` and the ``attention_mask`` over both, ``data_source``,
    ``reward_model`` ({"style": "rule", "ground_truth"}) and, with ``extra_info``, ``extra_info``."""
    import numpy as np
    import torch
    from verl import DataProto

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    responses = [tokenizer(text, add_special_tokens=False)["input_ids"] for text, _ in items]
    width = max(1, *(len(r) for r in responses))
    n = len(items)
    prompts = torch.tensor([prompt_ids] * n, dtype=torch.long)
    response_ids = torch.full((n, width), pad, dtype=torch.long)
    mask = torch.zeros((n, len(prompt_ids) + width), dtype=torch.long)
    mask[:, : len(prompt_ids)] = 1
    for i, ids in enumerate(responses):
        response_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        mask[i, len(prompt_ids) : len(prompt_ids) + len(ids)] = 1
    non_tensors = {
        "data_source": np.array(["rubriq"] * n, dtype=object),
        "reward_model": np.array([{"style": "rule", "ground_truth": gt} for _, gt in items], dtype=object),
    }
    if extra_info:
        non_tensors["extra_info"] = np.array([{"index": i, "split": "train"} for i in range(n)], dtype=object)
    return DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": response_ids,
            "attention_mask": mask,
            "input_ids": torch.cat([prompts, response_ids], dim=1),
        },
        non_tensors=non_tensors,
    )


def docs_blocks(framework: str) -> list[tuple[str, str]]:
    """The ```bash blocks of docs/integrations.md whose first line is a ``# <framework> ...``
    comment: (that comment, the block)."""
    blocks = re.findall(r"```bash\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    return [(b.splitlines()[0], b) for b in blocks if b.startswith(f"# {framework} ")]


def overrides_of(block: str) -> list[str]:
    """The Hydra overrides (``key=value``, ``+key=value``) of a docs block, shell substitutions
    ``$(python -c '...')`` evaluated with this interpreter."""

    def substitute(match: re.Match) -> str:
        return subprocess.run(
            [sys.executable, "-c", match.group(1)], capture_output=True, text=True, check=True
        ).stdout.strip()

    text = re.sub(r"\"?\$\(python -c '([^']*)'\)\"?", substitute, block)
    return [token for token in text.split() if re.fullmatch(r"\+?[A-Za-z_][\w.]*=\S+", token)]
