import os
from pathlib import Path

# No test may use the network: make Hugging Face libraries fail fast instead of trying the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RUBRIQ_SHARED", REPO.parent / "shared"))
BENCHMARKS = SHARED / "benchmarks"


@pytest.fixture(scope="session")
def benchmarks_dir() -> Path:
    if not (BENCHMARKS / "published_tcounts.csv").is_file():
        pytest.skip(f"benchmark data not found at {BENCHMARKS} (set RUBRIQ_SHARED)")
    return BENCHMARKS


def qasm2(body: str, n: int) -> str:
    return f'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[{n}];\n{body}\n'
