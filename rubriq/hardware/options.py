"""The hardware pipeline's options, declared once and import-light (no Qiskit): ``rubriq
hardware run`` (typer) and ``python -m rubriq.hardware.submit_ibm_ionq`` (argparse) derive their
flags, defaults and help from :class:`HardwareOptions` (``rubriq/options.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from rubriq.options import option

DEFAULT_SHOTS = 4096
KL_THRESHOLD = 0.05
"""The paper's KL flag threshold (nats)."""
DEFAULT_OUT = "runs/hardware"


@dataclass(frozen=True)
class HardwareOptions:
    """The pipeline's options, declared once: ``rubriq hardware run`` and ``python -m
    rubriq.hardware.submit_ibm_ionq`` both derive their flags from these fields."""

    backend: list[str] = option(
        ["ibm_eagle"],
        "Catalog backend (repeatable; `rubriq hardware backends` lists them).",
        metavar="NAME",
        repeatable=True,
    )
    shots: int = option(DEFAULT_SHOTS, "Shots per circuit.", metavar="N")
    top_k: int = option(5, "Circuits taken from an evaluation JSONL (its best correct ones by reward).", metavar="K")
    threshold: float = option(KL_THRESHOLD, "KL flag threshold in nats (the paper's 0.05).", metavar="NATS")
    seed: int = option(42, "Transpiler and emulator seed.", metavar="N")
    out: str = option(DEFAULT_OUT, "Output folder: results.json, jobs.json, kl.png.", metavar="DIR")
    offline: bool = option(False, "Emulate even when a provider token is set.")
    dry_run: bool = option(False, "Transpile and print what would be sent; send nothing.")
