"""The package as users install it (issue 48): the wheel, built from a copy of the sources and
installed into a fresh venv with no network (``--no-deps --no-index``; the dependencies come from
the project's venv through a ``.pth`` path line, so the project's own editable install is not
seen), runs the README's first commands from an empty folder outside the repository: ``rubriq
--version``, ``python -m rubriq``, ``rubriq score`` on the packaged example, and the quickstart's
config (and the configs it includes) loads from inside the package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from rubriq import __version__

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("rubriq", "configs", "pyproject.toml", "README.md", "LICENSE")


def run(args: list[str], cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh venv, the wheel) built from a copy of the sources."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
            shutil.copytree(path, src / name, symlinks=True, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    dist = root / "dist"
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)],
        root,
        env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = dist.glob("rubriq-*.whl")
    venv = root / "venv"
    done = run([sys.executable, "-m", "venv", "--without-pip", str(venv)], root)
    assert done.returncode == 0, done.stderr
    site = Path(
        run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root
        ).stdout.strip()
    )
    # the project's dependencies, as a plain path (its .pth files, the editable rubriq included, are not run)
    (site / "project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done = run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps", str(wheel)],
        root,
        env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return venv, wheel


def test_the_wheel_holds_the_examples_and_the_default_configs(installed):
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for example in (REPO / "rubriq" / "examples").rglob("*"):
        if example.is_file() and "__pycache__" not in example.parts:
            assert f"rubriq/{example.relative_to(REPO / 'rubriq').as_posix()}" in names, example
    for config in (REPO / "configs").rglob("*.yaml"):
        assert f"rubriq/configs/{config.relative_to(REPO / 'configs').as_posix()}" in names, config


def test_the_tour_runs_from_an_empty_folder(installed, tmp_path):
    venv, _ = installed
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(COLUMNS="200", RUBRIQ_CACHE=str(tmp_path / "cache"), HOME=str(tmp_path))
    bin_ = venv / "bin"
    where = run([str(bin_ / "python"), "-c", "import rubriq; print(rubriq.__file__)"], empty, env)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # the wheel, not the checkout
    for args in ([str(bin_ / "rubriq"), "--version"], [str(bin_ / "python"), "-m", "rubriq", "--version"]):
        done = run(args, empty, env)
        assert done.returncode == 0 and done.stdout.strip() == f"rubriq {__version__}", done.stderr
    done = run(
        [str(bin_ / "rubriq"), "score", "rubriq/examples/llm_completion.txt", "--target", "qft", "--qubits", "4"],
        empty,
        env,
    )
    assert done.returncode == 0, done.stderr
    assert "CORRECT" in " ".join(done.stdout.split())
    check = (
        "from rubriq.training.quickstart import DEFAULT_CONFIG\n"
        "from rubriq.training.config import TrainSettings\n"
        "s = TrainSettings.from_yaml(DEFAULT_CONFIG)\n"
        "print(DEFAULT_CONFIG)\n"
        "print(s.model.name_or_path if hasattr(s, 'model') else 'loaded')\n"
    )
    done = run([str(bin_ / "python"), "-c", check], empty, env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert Path(done.stdout.splitlines()[0]).is_relative_to(venv)
    assert list(empty.iterdir()) == []  # nothing written into the user's folder
