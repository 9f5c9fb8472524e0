import os
from pathlib import Path

# No test may use the network: make Hugging Face libraries fail fast instead of trying the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

# a test run leaves `git status` as it found it (tests/clean_tree.py; tests/test_clean_tree.py checks it)
pytest_plugins = ["tests.clean_tree"]

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RUBRIQ_SHARED", REPO.parent / "shared"))
SHARED_SUITE = SHARED / "benchmarks" / "tcount_suite" / "qasm"
"""A local copy of the T-count suite's files (beside the project's checkouts; never in the
repository).  Tests take the suite from it the way a user behind a firewall does:
``rubriq data fetch tcount-suite --from DIR``, every file checked against the manifest."""


@pytest.fixture(scope="session")
def tcount_suite(tmp_path_factory) -> Path:
    """The folder of the fetched, verified T-count suite (a session temp folder)."""
    if not SHARED_SUITE.is_dir():
        pytest.skip(f"no local copy of the T-count suite at {SHARED_SUITE} (set RUBRIQ_SHARED)")
    from rubriq.suites import fetch_tcount_suite

    return fetch_tcount_suite(tmp_path_factory.mktemp("fetched") / "tcount_suite", source=SHARED_SUITE).directory


def qasm2(body: str, n: int) -> str:
    return f'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[{n}];\n{body}\n'
