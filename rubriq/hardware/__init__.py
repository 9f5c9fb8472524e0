"""The hardware path: ``catalog.py`` (one backend table, also feeding the rubric's S_H),
``transpile.py``, ``emulate.py`` (noiseless / noisy distributions, KL), ``jobs.py`` (job store; its
files redacted by ``rubriq.redaction``), ``submit_ibm_ionq.py`` (the pipeline), ``plots.py`` (Fig. 8).
See docs/hardware.md."""
