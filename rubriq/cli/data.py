"""``rubriq data``: build the prompt datasets, fetch circuit collections."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from rubriq.cli.common import (
    EXIT_FAILED,
    check,
    check_model,
    command_group,
    console,
    fail,
    new_table,
    reported,
)

data_app = command_group("data", "Build prompt datasets and fetch circuit collections.")


@data_app.command("build")
def data_build(
    out: Path = typer.Option(Path("data"), "--out", metavar="DIR", help="Output folder."),
    small: bool = typer.Option(False, "--small", help="A few rows per family (tests, quickstart)."),
    collections: str | None = typer.Option(
        None,
        metavar="LIST",
        help="Rewrite collections, comma-separated (tcount, mqt, qiskit-arith; default: all, the "
        "T-count suite only where it was fetched). A named collection that is not here is an error.",
    ),
    suite_dir: Path | None = typer.Option(
        None, metavar="DIR", help="Folder of the T-count suite's .qasm files (default: the fetched copy)."
    ),
    seed: int = typer.Option(42, metavar="N", help="Split and sampling seed."),
    from_qasm: Path | None = typer.Option(
        None,
        "--from-qasm",
        metavar="DIR",
        help="Instead: one rewrite prompt per .qasm file of DIR (its test split), with T0 and PyZX's T as t_best, "
        "written to --out itself (for rubriq evaluate --dataset OUT).",
    ),
    policy: str | None = typer.Option(
        None,
        metavar="MODEL",
        help="With --from-qasm: write the prompts in the style MODEL was trained with (its rubriq_policy.json).",
    ),
    prompt_style: str | None = typer.Option(
        None, metavar="STYLE", help="With --from-qasm: full | compact | minimal (default: --policy's, else full)."
    ),
) -> None:
    """Write the synthesis prompt dataset and the rewrite-with-fewer-T datasets (split by target:
    no target in two splits). A collection that is not on this machine is skipped, with how to
    get it. With --from-qasm DIR: a rewrite dataset of your own circuits instead."""
    from rubriq.data import COLLECTIONS, build_all

    if from_qasm is not None or policy is not None or prompt_style is not None:
        check(
            from_qasm is not None, "--policy" if policy is not None else "--prompt-style", "goes with --from-qasm DIR"
        )
        assert from_qasm is not None
        check(
            not small and collections is None and suite_dir is None,
            "--from-qasm",
            "takes no --small, --collections or --suite-dir (it builds one dataset of the folder's circuits)",
        )
        _build_from_qasm(from_qasm, out, policy, prompt_style)
        return

    names = tuple(c.strip() for c in (collections or ",".join(COLLECTIONS)).split(",") if c.strip())
    unknown = [c for c in names if c not in COLLECTIONS]
    check(not unknown, "--collections", f"unknown collection(s) {', '.join(unknown)}; use {', '.join(COLLECTIONS)}")
    check(suite_dir is None or suite_dir.is_dir(), "--suite-dir", f"no folder {suite_dir}")
    check(not out.is_file(), "--out", f"{out} is a file, not a folder")
    with reported():
        report = build_all(
            out, small=small, collections=names, suite_dir=suite_dir, seed=seed, skip_unavailable=collections is None
        )
    table = new_table(
        f"datasets written to {out} (counts: train/validation/test; T0 buckets: selected/available)",
        "dataset",
        "rows",
        "targets",
        "T0 buckets",
        "circuits skipped",
        keep_whole=("dataset",),
    )
    for name, info in report.items():
        if name == "unavailable":
            continue
        rows, tgts = info["rows"], info["targets"]
        buckets = (
            ""
            if name == "prompts"
            else "; ".join(f"{b} {v['selected']}/{v['available']}" for b, v in info["buckets"].items())
        )
        skipped = "" if name == "prompts" else ", ".join(f"{k}: {v}" for k, v in info["skipped"].items())
        table.add_row(
            name,
            *("/".join(str(counts.get(k, 0)) for k in ("train", "validation", "test")) for counts in (rows, tgts)),
            buckets,
            escape(skipped),
        )
    console.print(table)
    families = report.get("prompts", {}).get("families", {})
    if families:
        per_family = new_table(
            "prompts per target family (train/validation/test)", "family", "rows", "targets", keep_whole=("family",)
        )
        for family, info in families.items():
            per_family.add_row(
                family,
                *(
                    "/".join(str(info[what].get(k, 0)) for k in ("train", "validation", "test"))
                    for what in ("rows", "targets")
                ),
            )
        console.print(per_family)
    for name, why in report.get("unavailable", {}).items():
        console.print(f"skipped collection {name}: {why}", markup=False)


STYLES = ("full", "compact", "minimal")


def _build_from_qasm(folder: Path, out: Path, policy: str | None, prompt_style: str | None) -> None:
    from rubriq.data.qasm_folder import build_from_qasm
    from rubriq.suites.user import CircuitFileError

    check(folder.is_dir(), "--from-qasm", f"no folder {folder}")
    check(prompt_style is None or prompt_style in STYLES, "--prompt-style", f"use one of {', '.join(STYLES)}")
    check(not out.is_file(), "--out", f"{out} is a file, not a folder")
    check(
        not (out / "test.jsonl").exists() or out.resolve() != folder.resolve(),
        "--out",
        "must not be the --from-qasm folder",
    )
    if policy is not None:
        check_model(policy, "--policy")
        from rubriq.evaluation.evaluate import prompt_style_of

        style = prompt_style or prompt_style_of(policy)
    else:
        style = prompt_style or "full"
    with reported():
        try:
            report = build_from_qasm(folder, out, style)
        except CircuitFileError as exc:  # named against the flag that named the folder
            fail(str(exc), "--from-qasm")
    table = new_table(
        f"{len(report['circuits'])} rewrite prompts ({style} style) written to {out} [test]",
        "circuit",
        "qubits",
        "gates",
        "T0",
        "PyZX T (t_best)",
        keep_whole=("circuit",),
    )
    missing = []
    for name, c in report["circuits"].items():
        pyzx = "-" if c["t_pyzx"] is None else str(c["t_pyzx"])
        if c["t_pyzx"] is None:
            missing.append(f"{name} ({c['pyzx_verdict']}: {c['pyzx_detail']})")
        table.add_row(escape(name), str(c["qubits"]), str(c["gates"]), str(c["t0"]), pyzx)
    console.print(table)
    if missing:
        console.print(
            f"no verified PyZX count for {'; '.join(missing)}: these prompts are evaluated, but not in gap_closed",
            markup=False,
        )
    console.print(f"evaluate a policy on them: rubriq evaluate --model MODEL --dataset {out}", markup=False)


@data_app.command("fetch")
def data_fetch(
    what: str = typer.Argument(..., metavar="COLLECTION", help="tcount-suite"),
    out: Path | None = typer.Option(
        None, "--out", "--dest", metavar="DIR", help="Destination (default $RUBRIQ_CACHE/tcount_suite)."
    ),
    source: Path | None = typer.Option(
        None,
        "--from",
        metavar="DIR",
        help="Take the files from this folder (a copy of the suite's .qasm files) instead of the network.",
    ),
    base_url: str | None = typer.Option(
        None,
        metavar="URL",
        help="Download from this mirror of GitHub's raw files (default https://raw.githubusercontent.com).",
    ),
    timeout: float = typer.Option(30.0, metavar="SECONDS", help="Per-file download timeout."),
) -> None:
    """Fetch the T-count suite: PyZX's circuits/feyn_bench/qasm at a pinned commit, each file checked
    against the SHA-256 committed in RubriQ. A second run verifies and does nothing."""
    check(what == "tcount-suite", "COLLECTION", f"unknown collection {what!r}; available: tcount-suite")
    check(source is None or source.is_dir(), "--from", f"{source} is not a folder")
    check(out is None or not out.is_file(), "--out", f"{out} is a file, not a folder")
    check(
        base_url is None or base_url.startswith(("https://", "http://", "file://")),
        "--base-url",
        f"{base_url} is not an http(s):// or file:// URL",
    )
    check(timeout > 0, "--timeout", f"must be > 0 seconds, got {timeout}")
    from rubriq.suites.tcount import BASE_URL, fetch_tcount_suite, manifest

    base_url = base_url or BASE_URL
    with reported(code=EXIT_FAILED):
        done = fetch_tcount_suite(out, source=source, base_url=base_url, timeout=timeout)
    spec = manifest()
    pinned = f"{spec.repository}@{spec.ref[:12]} {spec.path}"
    if done.written == 0:
        console.print(
            f"T-count suite verified in {done.directory}: {done.verified} files ({pinned}), nothing to do", markup=False
        )
    else:
        origin = f"from {source}" if source is not None else f"from {base_url}"
        console.print(
            f"T-count suite in {done.directory}: {done.written} of {done.verified} files written {origin}, "
            f"every file's SHA-256 checked ({pinned})",
            markup=False,
        )
