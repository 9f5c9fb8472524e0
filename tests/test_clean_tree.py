"""The clean-tree check of tests/clean_tree.py really fails a run that leaves a stray file or
rewrites a committed one, and passes a run that writes only under its temp folder or ``runs/``
(a pytest run in a throwaway git repository, with the plugin as the suite uses it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

if shutil.which("git") is None:  # pragma: no cover
    pytest.skip("git is not installed", allow_module_level=True)


def _repo(tmp_path: Path, test_body: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "__init__.py").write_text("")
    shutil.copy(HERE / "clean_tree.py", repo / "tests" / "clean_tree.py")
    (repo / "tests" / "conftest.py").write_text('pytest_plugins = ["tests.clean_tree"]\n')
    (repo / "tests" / "test_x.py").write_text(
        "from pathlib import Path\nROOT = Path(__file__).resolve().parents[1]\n\n\ndef test_x(tmp_path):\n" + test_body
    )
    (repo / "committed.txt").write_text("v1\n")
    (repo / "dirty.txt").write_text("mine\n")
    (repo / ".gitignore").write_text("runs/\n__pycache__/\n.pytest_cache/\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "tests", "committed.txt", ".gitignore"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=repo, check=True)
    return repo  # dirty.txt stays untracked: a tree already dirty before the run


def _pytest(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "tests"],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "body,stray",
    [
        ('    (ROOT / "stray.txt").write_text("x")\n', "stray.txt"),
        ('    (ROOT / "committed.txt").write_text("v2")\n', "committed.txt"),
        ('    (ROOT / "dirty.txt").write_text("changed")\n', "dirty.txt"),
    ],
    ids=["new-file", "committed-file-rewritten", "dirty-file-changed"],
)
def test_a_run_that_changes_the_tree_fails_naming_the_path(tmp_path, body, stray):
    result = _pytest(_repo(tmp_path, body))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 passed" in result.stdout and "git work tree changed" in result.stdout
    assert stray in result.stdout.split("git work tree changed", 1)[1]


def test_a_run_that_writes_only_where_it_may_passes(tmp_path):
    body = '    (tmp_path / "a.txt").write_text("x")\n    (ROOT / "runs").mkdir()\n    (ROOT / "runs" / "b.txt").write_text("x")\n'
    result = _pytest(_repo(tmp_path, body))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "git work tree changed" not in result.stdout
