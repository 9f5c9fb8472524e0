"""TRL glue: the rubric as reward functions (rewards.py).  The trainers, configs and the
quickstart are the training issue's work and not here yet."""
