"""Studies: experiments that run the training and evaluation layers end to end and report
measured effects with their uncertainty.

* ``convergence.py``: GRPO with the rubric vs a gated rubric vs a sparse reward vs no RL, over
  seeds, evaluated on held-out targets by sampling (``rubriq study convergence CONFIG``);
* ``plots.py``: its figures.
"""
