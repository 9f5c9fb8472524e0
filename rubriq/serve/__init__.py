"""``rubriq serve``: the rubric as a scoring service for any RL framework.

The family, bottom to top:

- :mod:`~rubriq.serve.settings`: :class:`ServeSettings` (the flags of ``rubriq serve``, once);
- :mod:`~rubriq.serve.protocol`: the wire format of ``POST /v1/score``, every bad field a
  :class:`~rubriq.serve.protocol.BadRequest` naming it;
- :mod:`~rubriq.serve.service`: :class:`~rubriq.serve.service.ScoringService`, one shared
  :class:`~rubriq.evaluator.batch.BatchScorer` behind every request, a bounded queue, an answer
  for every accepted item, cancellation;
- :mod:`~rubriq.serve.metrics`: the Prometheus metrics;
- :mod:`~rubriq.serve.app`: the FastAPI routes (:func:`~rubriq.serve.app.create_app`) and
  :func:`~rubriq.serve.app.run` (uvicorn, one machine);
- :mod:`~rubriq.serve.ray_serve`: the same app as a Ray Serve deployment with N replicas.

The client and the verl / OpenRLHF / TRL adapters are in :mod:`rubriq.integrations`.  The
HTTP stack (fastapi, uvicorn, prometheus-client) is the ``serve`` extra, Ray the ``ray`` extra;
this module imports neither.
"""

from __future__ import annotations

from rubriq.serve.settings import API_KEY_ENV, ServeSettings

__all__ = ["API_KEY_ENV", "ServeSettings"]
