"""Supervised warm-start: prompt -> reference-circuit pairs with TRL's SFTTrainer.

A 135M model writes no QASM before it has seen some; SFT on the dataset's reference circuits
(the ``reference`` column, OpenQASM 2.0) teaches the output format, the fenced block and to stop
after it (the chat template ends the assistant turn with the end-of-sequence token, which is
what keeps GRPO completions short on a CPU).  The reference is rewritten into the format the
prompt asks for: OpenQASM 2.0, OpenQASM 3.0 (``qiskit.qasm3.dumps``) or Qiskit Python.

The dataset is TRL's conversational prompt-completion format, so the loss covers the completion
only.  With ``lora`` the adapter is merged into the weights afterwards: GRPO then starts from
a plain model and adds its own adapter.

>>> row = {"format": "python", "reference": 'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; h q[0]; cx q[0],q[1];'}
>>> print(reference_completion(row))
```python
from qiskit import QuantumCircuit
<BLANKLINE>
qc = QuantumCircuit(2)
qc.h(0)
qc.cx(0, 1)
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qiskit import QuantumCircuit, qasm2, qasm3

from rubriq.training.callbacks import quiet_progress

FENCE = {"qasm2": "qasm", "qasm3": "qasm", "python": "python"}


def circuit_to_python(circuit: QuantumCircuit) -> str:
    """Qiskit Python that rebuilds ``circuit`` (standard gates, one method call per gate)."""
    lines = ["from qiskit import QuantumCircuit", "", f"qc = QuantumCircuit({circuit.num_qubits})"]
    for inst in circuit.data:
        op = inst.operation
        if not hasattr(QuantumCircuit, op.name):
            raise ValueError(f"no QuantumCircuit method for gate {op.name!r}")
        args = [repr(float(p)) for p in op.params] + [str(circuit.find_bit(q).index) for q in inst.qubits]
        lines.append(f"qc.{op.name}({', '.join(args)})")
    return "\n".join(lines)


def reference_completion(row: dict, qasm: str | None = None) -> str:
    """The reference circuit of ``row`` (or ``qasm``, one of its ``sft_answers``) as a fenced
    block in the row's output format."""
    fmt = row.get("format", "qasm2")
    if fmt not in FENCE:
        raise ValueError(f"unknown output format {fmt!r}")
    source = qasm if qasm is not None else row["reference"]
    if fmt == "qasm2":
        body = source.strip()
    else:
        circuit = qasm2.loads(source, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
        body = qasm3.dumps(circuit).strip() if fmt == "qasm3" else circuit_to_python(circuit)
    return f"```{FENCE[fmt]}\n{body}\n```"


def sft_dataset(rows: list[dict], max_reference_chars: int = 0):
    """TRL conversational prompt-completion rows: one per row with its reference, or one per
    answer of a row's ``sft_answers`` (the small rewrite tasks: several correct rewrites of
    different T); answers longer than ``max_reference_chars`` are left out when it is > 0 (they
    would be truncated)."""
    from datasets import Dataset

    out = []
    for r in rows:
        if "reference" not in r and not r.get("sft_answers"):
            raise ValueError("SFT needs the dataset's 'reference' column (rubriq data build writes it)")
        for answer in r.get("sft_answers") or [None]:
            text = reference_completion(r, answer)
            if max_reference_chars and len(text) > max_reference_chars:
                continue
            out.append({"prompt": r["prompt"], "completion": [{"role": "assistant", "content": text}]})
    if not out:
        raise ValueError("no SFT rows left (every reference is longer than max_reference_chars)")
    return Dataset.from_list(out)


def run_sft(
    model: Any,
    tokenizer: Any,
    rows: list[dict],
    output_dir: str | Path,
    args: dict | None = None,
    lora: dict | None = None,
    callbacks: list | None = None,
    max_reference_chars: int = 0,
    resume: str | None = None,
    adapter_dir: str | Path | None = None,
):
    """Fine-tune ``model`` on the references of ``rows`` (from the trainer checkpoint ``resume``
    when given); return the (merged) model.  With ``lora`` and ``adapter_dir``, the trained
    adapter is also saved there before it is merged (a few MB: what a results folder can keep)."""
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    config = SFTConfig(
        **{"report_to": [], "save_strategy": "no", "logging_steps": 1, **(args or {}), "output_dir": str(output_dir)}
    )
    peft_config = LoraConfig(task_type="CAUSAL_LM", **lora) if lora else None
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=sft_dataset(rows, max_reference_chars),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    quiet_progress(trainer)
    trainer.train(resume_from_checkpoint=resume)
    trained: Any = trainer.model
    if lora:
        if adapter_dir is not None:
            trained.save_pretrained(str(adapter_dir))
            tokenizer.save_pretrained(str(adapter_dir))
        trained = trained.merge_and_unload()
    return trained
