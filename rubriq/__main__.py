"""``python -m rubriq``: the ``rubriq`` command (the same as ``python -m rubriq.cli``)."""

from rubriq.cli import main

raise SystemExit(main())
