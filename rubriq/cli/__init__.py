"""The ``rubriq`` command line (typer + rich).

Conventions every command keeps (tests/test_cli.py checks them):

- exit codes: 0 done; 1 ran, but the answer is a failure (``score``: nothing parsed or
  scored; ``synthesize``: no correct circuit; ``doctor``: a sandbox layer is missing); 2 a
  usage or input error; 130 interrupted.
- a bad value is one line on stderr, ``error: --flag: what is wrong``, printed before any
  model, dataset, compiler or emulator loads; never a traceback (``--verbose`` shows the
  traceback of an internal error).
- tables wrap, never cut, at any width (80 columns included), in one style (:func:`rubriq.cli.common.new_table`).
- default outputs go under ``runs/`` (git-ignored); committed results are rewritten only when
  ``--out`` names them.
- libraries are quiet: their warnings, progress bars and per-step dicts go to the log
  (``--verbose`` brings them back to the console); long phases show progress that moves.

One module per command group (``rubriq <group> -h`` lists a group's commands):
``common`` (the root app, :func:`main` = the console script, consoles, errors, tables, the
option checks several commands share), ``scoring`` (``score``, ``targets``), ``data``
(``data build|fetch``), ``baselines``, ``doctor``, ``train`` (``train run|variants``),
``study`` (``study convergence``), ``hardware`` (``hardware run|backends``), ``evaluate``
(``evaluate``, ``report``), ``synthesize``, ``optimize``, ``webapp`` (``quickstart``, ``app``), ``serve`` (the scoring server).  A new
command goes in the module of its group, or in a new module imported below: importing a
module registers its commands, and the import order is the order of ``rubriq -h``.
"""

from __future__ import annotations

from rubriq.cli.common import app, main

# importing a command module registers its commands on ``app``: this order is ``rubriq -h``'s
# isort: off
from rubriq.cli import scoring  # noqa: F401  (score, targets)
from rubriq.cli import data  # noqa: F401
from rubriq.cli import baselines  # noqa: F401
from rubriq.cli import doctor  # noqa: F401
from rubriq.cli import train  # noqa: F401
from rubriq.cli import study  # noqa: F401
from rubriq.cli import hardware  # noqa: F401
from rubriq.cli import evaluate  # noqa: F401  (evaluate, report)
from rubriq.cli import synthesize  # noqa: F401
from rubriq.cli import optimize  # noqa: F401
from rubriq.cli import webapp  # noqa: F401  (quickstart, app)
from rubriq.cli import serve  # noqa: F401  (serve: the scoring server)
# isort: on

__all__ = ["app", "main"]
