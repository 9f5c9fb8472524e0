"""TRL: the rubric's reward functions scored by ``rubriq serve`` are
:class:`rubriq.reward.remote.RemoteRubricRewards` (also importable from here, its old place)."""

from __future__ import annotations

from rubriq.reward.remote import RemoteRubricRewards, result_from_dict

__all__ = ["RemoteRubricRewards", "result_from_dict"]
