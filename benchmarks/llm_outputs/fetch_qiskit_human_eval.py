"""Fetch Qiskit HumanEval (github.com/qiskit-community/qiskit-human-eval, Apache-2.0) at a pinned
commit for the Qiskit-Python part of the extraction benchmark.

    .venv/bin/python benchmarks/llm_outputs/fetch_qiskit_human_eval.py [--repo PATH_OF_A_CLONE]

151 tasks written by Qiskit's developers: each a prompt (imports, a function signature and its
docstring) and a canonical solution (the function's body), i.e. the style in which code models
answer.  Not committed here (like the other third-party corpus): this script writes
``benchmarks/llm_outputs/local/qiskit-human-eval.json`` (git-ignored) from a local clone or bare
mirror (``git clone https://github.com/qiskit-community/qiskit-human-eval``) or, without
``--repo``, by downloading the file over HTTPS.  Either way the file is the one of COMMIT and
its SHA-256 is checked, so every run of the benchmark scores the same tasks.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = "qiskit-community/qiskit-human-eval"
COMMIT = "5327d8e079db5e8b51b85e2acafbb67e36ba2777"
"""The repository's main branch on 2026-05-20 ("Merge pull request #88")."""
PATH = "dataset/dataset_qiskit_test_human_eval.json"
SHA256 = "2d595cfec23e3d15e84a51bbce711d29501297d7418b966911f4111a1f62f042"
RAW = f"https://raw.githubusercontent.com/{REPO}/{COMMIT}/{PATH}"
OUT = HERE / "local" / "qiskit-human-eval.json"


def read(repo: Path | None) -> bytes:
    """The dataset file at COMMIT: from a clone or bare mirror, else downloaded."""
    if repo is not None:
        git_dir = repo / ".git" if (repo / ".git").exists() else repo
        shown = subprocess.run(
            ["git", "--git-dir", str(git_dir), "show", f"{COMMIT}:{PATH}"], capture_output=True, check=False
        )
        if shown.returncode != 0:
            raise SystemExit(
                f"{repo} has no {PATH} at {COMMIT[:12]} ({shown.stderr.decode(errors='replace').strip()}): "
                "fetch the repository again, or run without --repo to download the file"
            )
        return shown.stdout
    with urllib.request.urlopen(RAW, timeout=60) as response:  # noqa: S310 (fixed https URL)
        return response.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, help=f"a clone (or bare mirror) of {REPO}")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data = read(args.repo)
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{PATH} at {COMMIT[:12]} has SHA-256 {digest}, expected {SHA256}: not written")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"{PATH} at {COMMIT[:12]} ({len(data)} bytes, SHA-256 checked) -> {args.out}")


if __name__ == "__main__":
    main()
