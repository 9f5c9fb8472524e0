"""The RubriQ reward from any RL framework, in-process or through ``rubriq serve``.

- :class:`~rubriq.serve.client.RubriQClient` (:mod:`rubriq.serve.client`, re-exported here): the
  server's client (timeouts, retries with backoff for its patience, batches split to the
  server's limit, fork-safe);
- :mod:`~rubriq.integrations.backend`: in-process (a BatchScorer) or remote scoring, chosen
  by arguments or ``RUBRIQ_URL``, one answer shape for both;
- :mod:`~rubriq.integrations.verl`: ``compute_score`` / ``compute_score_batch`` /
  ``compute_score_float`` (verl's ``custom_reward_function``);
- :mod:`~rubriq.integrations.verl_manager`: ``RubriQRewardManager``, a reward manager of verl's
  reward loop (verl >= 0.7) that scores concurrent responses in batches (imports verl);
- :mod:`~rubriq.integrations.openrlhf`: ``reward_func`` (OpenRLHF's ``--reward.remote_url``),
  ``StopTraining``;
- TRL: :class:`~rubriq.reward.remote.RemoteRubricRewards` (:mod:`rubriq.reward`, also
  importable from ``rubriq.integrations.trl``), TRL reward functions scored by a server.

docs/integrations.md has each framework's exact config lines.
"""

from __future__ import annotations

from rubriq.serve.client import RubriQClient, RubriQError, RubriQRequestError, RubriQUnavailable

__all__ = ["RubriQClient", "RubriQError", "RubriQRequestError", "RubriQUnavailable"]
