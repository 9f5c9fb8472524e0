"""The RubriQ reward from any RL framework, in-process or through ``rubriq serve``.

- :mod:`~rubriq.integrations.client`: :class:`~rubriq.integrations.client.RubriQClient`, the
  server's client (timeouts, retries with backoff, batches split to the server's limit);
- :mod:`~rubriq.integrations.backend`: in-process (a BatchScorer) or remote scoring, chosen
  by arguments or ``RUBRIQ_URL``, one answer shape for both;
- :mod:`~rubriq.integrations.verl`: ``compute_score`` / ``compute_score_batch`` (verl's
  ``custom_reward_function``);
- :mod:`~rubriq.integrations.openrlhf`: ``reward_func`` (OpenRLHF's ``--reward.remote_url``);
- :mod:`~rubriq.integrations.trl`: :class:`~rubriq.integrations.trl.RemoteRubricRewards`,
  TRL reward functions per dimension scored by a server.

docs/integrations.md has each framework's exact config lines.
"""

from __future__ import annotations

from rubriq.integrations.client import RubriQClient, RubriQError, RubriQRequestError, RubriQUnavailable

__all__ = ["RubriQClient", "RubriQError", "RubriQRequestError", "RubriQUnavailable"]
