"""TRL glue, top to bottom as ``train_rubriq.py`` runs it: ``config.py`` (TrainSettings),
``models.py`` (hub, embedded, tiny), ``sft.py`` (warm-start), ``grpo.py`` (TRL GRPOTrainer with
the rubric rewards of ``rewards.py``), ``ppo.py`` (Sparse-PPO), ``callbacks.py`` (JSONL, early
stopping), ``variants.py`` (baselines and ablations as configs), ``launch.py`` (accelerate,
Slurm), ``quickstart.py`` (the CPU demo).  See docs/training.md."""
