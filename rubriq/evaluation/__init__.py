"""Evaluation: the paper's metrics (``metrics.py``), sampling a model on prompts
(``sampling.py``), reports and plots (``report.py``, ``plots.py``).  Definitions: docs/metrics.md."""
