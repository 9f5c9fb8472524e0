"""The command line is a package (rubriq/cli/, one module per command group); its two ways in
keep working: the ``rubriq`` console script (``rubriq.cli:main``) and ``python -m rubriq.cli``."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

from rubriq import __version__


def test_console_script_points_at_main():
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "rubriq"]
    assert script.value == "rubriq.cli:main"
    from rubriq.cli import main

    assert script.load() is main


def test_python_dash_m_runs_the_command_line():
    done = subprocess.run(
        [sys.executable, "-m", "rubriq.cli", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"rubriq {__version__}"
    done = subprocess.run(
        [sys.executable, "-m", "rubriq.cli", "targets", "--no-such-flag"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "--no-such-flag" in done.stderr
