"""A study's finished units kept for good (``results_dir``): a long study runs in pieces, on
machines that may not outlive a session, so each finished arm-seed (a *unit*) is copied, as it
ends, into a folder that is committed with the repository, and a run on a new machine copies
the units back before it starts and skips them.

What a unit keeps (:data:`UNIT_FILES`): its ``done.json``, evaluation rows and scored samples,
the training log, every training completion's scores and the group statistics, and
``adapter.json``, the SHA-256 of each file of its trained policy (``final/``; the weights
themselves are not kept: a few are committed on purpose, beside the study, by
:func:`rubriq.studies.weights.keep_weights`, ``rubriq study weights``, in
``RESULTS_DIR/weights/ARM_seedN``).  With it go what
every unit of a seed shares: the step-0 evaluation of the seed (``step0/``), the prompt filter's
decision (``filter.json``), the warm-start's fingerprint (``sft/fingerprint.json``), the
settings (``study.json``), the prompts evaluated (``data/SPLIT.jsonl`` of the held-out split and
the training prompts, ``tiers/NAME/test.jsonl``).  The kept folder has the layout of a study folder
(:mod:`rubriq.studies.layout`), so ``rubriq study convergence YAML --summary-only --out
RESULTS_DIR`` regenerates the summary from it alone.

With ``commit``, :func:`publish` also commits the unit (``git commit -- RESULTS_DIR``: only that
folder, whatever else the working tree holds), so a unit is on the branch the moment it ends.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import time
from pathlib import Path

from rubriq.studies import layout

log = logging.getLogger(__name__)

UNIT_FILES = ("done.json", "evals.jsonl", "metrics.jsonl", "train_scores.jsonl", "groups.jsonl", "adapter.json")
"""The files of a finished arm-seed that are kept, besides its scored samples (``*records_step*.jsonl``)."""
SHARED_FILES = ("study.json", "filter.json", "sft/fingerprint.json")
"""What the units of a study share, kept with the first unit and refreshed with every later one
(the warm-start fingerprint only when it names other weights: :func:`same_warm_start`)."""


FINGERPRINT = Path("sft", "fingerprint.json")


def same_warm_start(a: Path, b: Path) -> bool:
    """Whether warm-start fingerprints ``a`` and ``b`` (``sft/fingerprint.json``) name the same
    weights: the same SHA-256 of the model and, where it was merged from an adapter or used
    where it is, the same adapter hash and model; when and where they were written do not count.
    False when either is missing or unreadable.

    >>> import json, tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a").write_text(json.dumps({"sha256": "ab", "written": "2026-12-06", "merged_from": {"sha256": "cd", "adapter": "/x"}}))
    >>> _ = (d / "b").write_text(json.dumps({"sha256": "ab", "written": "2026-12-07", "merged_from": {"sha256": "cd", "adapter": "y"}}))
    >>> same_warm_start(d / "a", d / "b"), same_warm_start(d / "a", d / "missing")
    (True, False)
    """
    try:
        x, y = (json.loads(p.read_text()) for p in (a, b))
    except (OSError, ValueError):
        return False

    def key(r: dict) -> tuple:
        merged = r.get("merged_from") or {}
        return r.get("sha256"), merged.get("sha256"), r.get("model")

    return key(x)[0] is not None and key(x) == key(y)


def adapter_fingerprint(final: Path) -> dict:
    """``{file name: SHA-256}`` of every file of a trained policy folder (``final/``), so that a
    committed result names the exact weights it came from even where they are not kept."""
    out = {}
    for file in sorted(p for p in final.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with open(file, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 24), b""):
                digest.update(chunk)
        out[str(file.relative_to(final))] = digest.hexdigest()
    return out


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)


def publish(out: Path, results: Path, study, name: str, seed: int, commit: bool = False) -> list[Path]:
    """Copy the finished arm-seed ``(name, seed)`` of study folder ``out`` into ``results``
    (with the shared files, the evaluated prompts and the seed's step-0 evaluation); with
    ``commit``, commit ``results``.  Returns the files written."""
    src = layout.arm_dir(out, name, seed)
    if not (src / "done.json").is_file():
        raise ValueError(f"{src}: not finished (no done.json); only finished arm-seeds are kept")
    final = src / "final"
    if final.is_dir():
        (src / "adapter.json").write_text(json.dumps(adapter_fingerprint(final), indent=2))
    dst = layout.arm_dir(results, name, seed)
    written = []
    for file in [*(src / f for f in UNIT_FILES), *sorted(src.glob("*records_step*.jsonl"))]:
        if file.is_file():
            _copy(file, dst / file.name)
            written.append(dst / file.name)
    tiers = (
        [p.relative_to(out) for p in sorted((out / "tiers").glob("*/test.jsonl"))] if (out / "tiers").is_dir() else []
    )
    prompts = [Path("data") / f"{split}.jsonl" for split in dict.fromkeys((study.split, "train"))]
    for rel in [*map(Path, SHARED_FILES), *tiers, *prompts]:
        if (out / rel).is_file():
            if rel == FINGERPRINT and same_warm_start(out / rel, results / rel):
                continue  # the kept record names these weights: left as it is (no new time stamp or path)
            _copy(out / rel, results / rel)
            written.append(results / rel)
    for file in sorted((out / "step0").glob(f"*seed{seed}.json*")) + sorted((out / "step0").glob(f"*seed{seed}.jsonl")):
        _copy(file, results / "step0" / file.name)
        written.append(results / "step0" / file.name)
    log.info("unit %s seed %d kept in %s (%d files)", name, seed, results, len(written))
    if commit:
        git_commit(results, f"study unit {name} seed {seed}: its records, logs and adapter fingerprint ({results})")
    return written


def restore(results: Path, out: Path, study) -> list[tuple[str, int]]:
    """Copy every unit kept in ``results`` that ``out`` lacks back into ``out`` (with the shared
    step-0 evaluations and the prompt filter), so that the runner skips them; returns the
    (arm, seed) restored."""
    restored: list[tuple[str, int]] = []
    if not results.is_dir():
        return restored
    for rel in ("filter.json",):
        if (results / rel).is_file() and not (out / rel).is_file():
            _copy(results / rel, out / rel)
    for file in sorted((results / "step0").glob("*")) if (results / "step0").is_dir() else []:
        if not (out / "step0" / file.name).is_file():
            _copy(file, out / "step0" / file.name)
    for name in study.arms:
        for seed in study.seeds:
            src, dst = layout.arm_dir(results, name, seed), layout.arm_dir(out, name, seed)
            if (src / "done.json").is_file() and not (dst / "done.json").is_file():
                if dst.is_dir():
                    shutil.rmtree(dst)  # an unfinished run of a unit that finished elsewhere
                shutil.copytree(src, dst)
                restored.append((name, seed))
    if restored:
        log.info("restored %d finished unit(s) from %s: %s", len(restored), results, restored)
    return restored


def repo_relative(path: Path) -> str:
    """``path`` relative to the top of the git repository that holds it (how committed files name
    each other, whatever the working folder), else relative to the working folder where it lies
    in it, else as it is."""
    from rubriq.studies.settings import _portable

    path = Path(path).resolve()
    probe = next((p for p in (path, *path.parents) if p.is_dir()), None)
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=probe, capture_output=True, text=True, check=False
    )
    if top.returncode == 0 and path.is_relative_to(Path(top.stdout.strip()).resolve()):
        return path.relative_to(Path(top.stdout.strip()).resolve()).as_posix()
    return _portable(str(path))


def git_commit(folder: Path, message: str, also: tuple[Path, ...] = ()) -> bool:
    """Commit ``folder`` (added, and only it, with the files ``also`` that exist) in the repository
    that holds it; False (logged) when it is not in a repository or nothing changed.  ``git
    commit -- PATH...`` commits those paths alone, whatever else is staged."""
    folder = folder.resolve()
    run = {"cwd": folder, "capture_output": True, "text": True, "check": False}
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], **run)  # type: ignore[call-overload]
    if top.returncode != 0:
        log.warning("%s is not in a git repository: unit not committed", folder)
        return False
    root = Path(top.stdout.strip()).resolve()
    paths = [str(folder), *(str(p.resolve()) for p in also if p.is_file() and p.resolve().is_relative_to(root))]
    for attempt in range(6):
        subprocess.run(["git", "add", "--", *paths], **run)  # type: ignore[call-overload]
        done = subprocess.run(["git", "commit", "-q", "-m", message, "--", *paths], **run)  # type: ignore[call-overload]
        if done.returncode == 0:
            return True
        why = (done.stderr or done.stdout).strip()
        if "index.lock" not in why:  # another git command holds the index: try again shortly
            break
        time.sleep(2.0 * (attempt + 1))  # paces the retries of a commit that met a held lock
    log.warning("git commit of %s failed: %s", folder, why[-300:])
    return False


__all__ = ["SHARED_FILES", "UNIT_FILES", "adapter_fingerprint", "git_commit", "publish", "restore", "same_warm_start"]
