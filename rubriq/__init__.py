"""RubriQ: rubric-rewarded reinforcement learning for quantum circuit synthesis."""

__version__ = "0.2.0"
