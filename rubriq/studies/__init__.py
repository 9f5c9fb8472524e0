"""Studies: experiments that run the training and evaluation layers end to end and report
measured effects with their uncertainty.

The convergence study (``rubriq study convergence CONFIG``: GRPO with the rubric vs other
rewards vs no RL, over seeds, evaluated on held-out targets by sampling) is a pipeline of
stages, each a module with one job, composed in that order by ``convergence.run``:

* ``settings.py``: the study YAML (``StudySettings``, ``ArmSettings``) and the metric names;
* ``layout.py``: where each file lives under the study's folder, and reading them back;
* ``data.py`` (stage 1): the training settings rooted in the study's folder, the prompt splits;
* ``warm_start.py`` (2): the shared SFT warm-start, trained once, and its SHA-256 fingerprint;
* ``pilot.py`` (3): the difficulty filter (the warm-start's groups on the training prompts);
* ``arms.py`` (4): one GRPO run per (arm, seed), evaluated as it trains;
  ``parallel.py``: several arm-seeds at a time, one process each;
* ``evaluate.py`` (5): sampling and scoring a policy on a prompt set, the step-0 evaluation;
* ``aggregate.py`` (6): the numbers over seeds (intervals, time-to-target, paired differences,
  correlations of the dimensions); ``summary.py``: the tables and files; ``plots.py``: the figures;
* ``convergence.py``: the entry point (``run``), which reads as the stages above;
* ``compare.py``: whether two arm-seeds are the same run (``rubriq study compare``);
* ``units.py``: finished arm-seeds kept in ``results_dir`` and restored on a new machine;
  ``weights.py``: one unit's trained adapter kept there too (``rubriq study weights``);
* ``analysis.py``: what a study computes from scored completions (the gap to PyZX, the
  effective number of dimensions, the minimum detectable effect, verbatim copies).

Imports form no circle: ``settings``, ``layout`` and ``analysis`` import no other study
module; a stage imports only these and the earlier stages it uses (``arms``: ``evaluate`` and
``warm_start``); ``summary`` imports ``aggregate`` and ``plots``; ``convergence`` imports them all
and no module of the package imports it.
"""
