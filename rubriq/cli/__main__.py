"""``python -m rubriq.cli``: the ``rubriq`` console script."""

from rubriq.cli import main

raise SystemExit(main())
