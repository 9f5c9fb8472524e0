"""Trainer callbacks: the JSONL step log, early stopping, progress for long loops.

Each one has one job and plugs into any transformers ``Trainer`` (GRPO, SFT) through
``trainer.add_callback``; RubriQ's PPO loop calls :class:`EarlyStopper` and
:func:`append_jsonl` directly.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections import deque
from pathlib import Path

from rubriq.extract.files import open_record
from rubriq.training.config import EarlyStoppingSettings


def append_jsonl(path: Path, record: dict) -> None:
    """Append one JSON line (NaN/inf become null so every JSON reader accepts the file)."""
    clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
    with open_record(path, "a") as fh:  # 0600: records hold completions and their rewards
        fh.write(json.dumps(clean) + "\n")


class EarlyStopper:
    """Moving-average early stopping (see :class:`EarlyStoppingSettings`).

    >>> stop = EarlyStopper(EarlyStoppingSettings(patience=2, window=1))
    >>> [stop.update(v) for v in (0.1, 0.3, 0.2, 0.25, 0.3)]
    [False, False, False, True, True]
    """

    def __init__(self, settings: EarlyStoppingSettings) -> None:
        self.settings = settings
        self.values: deque[float] = deque(maxlen=max(1, settings.window))
        self.best = -math.inf
        self.since_best = 0

    def update(self, value: float | None) -> bool:
        """Feed one logged value; True when training should stop."""
        if self.settings.patience <= 0 or value is None or not math.isfinite(value):
            return False
        self.values.append(float(value))
        average = sum(self.values) / len(self.values)
        if average > self.best + self.settings.min_delta:
            self.best, self.since_best = average, 0
        else:
            self.since_best += 1
        return self.since_best >= self.settings.patience


log = logging.getLogger("rubriq.training")

STEP_KEYS = (
    ("reward", "reward"),
    ("loss", "loss"),
    ("correct_rate", "correct"),
    ("parse_rate", "parsed"),
    ("step_time", "s/step"),
)


def step_line(step: int, max_steps: int, logs: dict) -> str | None:
    """One short line for a logged step (the full dict goes to metrics.jsonl); None for a log
    without step metrics (the trainer's closing summary).

    >>> step_line(3, 12, {"reward": 0.4123, "loss": 0.01, "completions/mean_length": 50})
    'step 3/12: reward 0.412, loss 0.010'
    >>> step_line(12, 12, {"train_runtime": 31.0}) is None
    True
    """
    parts = [f"{label} {logs[key]:.3f}" for key, label in STEP_KEYS if isinstance(logs.get(key), (int, float))]
    return f"step {step}/{max_steps}: " + ", ".join(parts) if parts else None


def quiet_progress(trainer) -> None:
    """Replace transformers' ProgressCallback, which prints every logged dict (1,000+
    characters a step) on the console: on a terminal its bar stays and shows the step's short
    line; elsewhere (a log file, CI, Slurm) there is no redrawn bar, one ``logging`` line per
    logged step instead.  The full dict is in metrics.jsonl (and at DEBUG: ``rubriq --verbose``)."""
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class BarWithLine(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs:
                log.debug("%s", logs)
                line = step_line(state.global_step, state.max_steps, logs)
                if self.training_bar is not None and line:
                    self.training_bar.set_postfix_str(line.split(": ", 1)[1], refresh=True)

    class StepLines(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and logs:
                log.debug("%s", logs)
                line = step_line(state.global_step, state.max_steps, logs)
                if line:
                    log.info("%s", line)

    had_bar = trainer.pop_callback(ProgressCallback) is not None
    had_printer = trainer.pop_callback(PrinterCallback) is not None
    if had_bar or had_printer:
        trainer.add_callback(BarWithLine() if had_bar and sys.stderr.isatty() else StepLines())


def trainer_callbacks(output_dir: Path, early_stopping: EarlyStoppingSettings, phase: str = "grpo") -> list:
    """The JSONL logger (``output_dir/metrics.jsonl``, one line per logged step with its
    ``phase``) and, when ``patience`` > 0, early stopping on ``early_stopping.metric``."""
    from transformers import TrainerCallback

    path = Path(output_dir) / "metrics.jsonl"

    class JsonlLogger(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and state.is_world_process_zero:
                Path(output_dir).mkdir(parents=True, exist_ok=True)
                append_jsonl(path, {"phase": phase, "step": state.global_step, **logs})

    class EarlyStopping(TrainerCallback):
        def __init__(self) -> None:
            self.stopper = EarlyStopper(early_stopping)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and self.stopper.update(logs.get(early_stopping.metric)):
                control.should_training_stop = True
                log.info(
                    "early stopping at step %d: %s has not improved for %d logs",
                    state.global_step,
                    early_stopping.metric,
                    early_stopping.patience,
                )

    callbacks: list[TrainerCallback] = [JsonlLogger()]
    if early_stopping.patience > 0:
        callbacks.append(EarlyStopping())
    return callbacks
