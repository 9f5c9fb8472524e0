"""The ``rubriq`` command line (typer + rich).

Conventions every command keeps (tests/test_cli.py checks them):

- exit codes: 0 done; 1 ran, but the answer is a failure (``score``: nothing parsed or
  scored; ``synthesize``: no correct circuit; ``doctor``: a sandbox layer is missing); 2 a
  usage or input error; 130 interrupted.
- a bad value is one line on stderr, ``error: --flag: what is wrong``, printed before any
  model, dataset, compiler or emulator loads; never a traceback (``--verbose`` shows the
  traceback of an internal error).
- tables wrap, never cut, at any width (80 columns included), in one style (:func:`_table`).
- default outputs go under ``runs/`` (git-ignored); committed results are rewritten only when
  ``--out`` names them.
- libraries are quiet: their warnings, progress bars and per-step dicts go to the log
  (``--verbose`` brings them back to the console); long phases show progress that moves.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.exceptions import TyperException  # typer's own (vendored) click: usage errors

from rubriq import __version__
from rubriq.hardware.options import HardwareOptions
from rubriq.options import typer_options
from rubriq.training.launch import LaunchSettings, RunOptions

CONTEXT = {"help_option_names": ["-h", "--help"]}


def _plain_argument_metavars() -> None:
    """typer >= 0.2x writes an argument as ``FILE <str>`` in help and ``{FILE}`` in the usage
    line; a given metavar alone (``FILE``, ``PATH...``) is what click and argparse print.  typer
    has no setting for this, hence the two small overrides (skipped if typer renames them)."""
    from typer.core import TyperArgument

    if not hasattr(TyperArgument, "_usage_display_name"):
        return
    usage = TyperArgument._usage_display_name
    rich_type = TyperArgument.display_type_rich

    def usage_name(self) -> str:
        return self.metavar if self.metavar else usage(self)

    def type_name(self, ctx):
        return None if self.metavar else rich_type(self, ctx)

    TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]
    TyperArgument.display_type_rich = type_name  # type: ignore[method-assign]


_plain_argument_metavars()
app = typer.Typer(
    help="RubriQ: rubric-rewarded quantum circuit synthesis.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT,
    rich_markup_mode=None,
)
console = Console(highlight=False)
err = Console(stderr=True, highlight=False)
log = logging.getLogger("rubriq.cli")

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
STATE = {"verbose": False}


# -- errors, tables, library noise --------------------------------------------------------------
def fail(message: str, flag: str | None = None, code: int = EXIT_USAGE) -> NoReturn:
    """One line on stderr (``error: --flag: message``) and exit ``code``."""
    text = " ".join(str(message).split())  # one line, whatever the exception's message held
    err.print(f"error: {flag + ': ' if flag else ''}{text}", markup=False, soft_wrap=True)
    raise typer.Exit(code)


def check(ok: bool, flag: str, message: str) -> None:
    """``fail`` with ``flag`` unless ``ok``: the up-front checks of every command."""
    if not ok:
        fail(message, flag)


@contextmanager
def reported(code: int = EXIT_USAGE, flag: str | None = None) -> Iterator[None]:
    """Turn the errors RubriQ raises for bad input (config, target, model, file, value) into
    :func:`fail`; anything else is an internal error, reported by :func:`main`."""
    from rubriq.config import ConfigError
    from rubriq.targets import TargetError

    try:
        yield
    except (typer.Exit, typer.Abort, TyperException):
        raise
    except (ConfigError, TargetError, ValueError, OSError, RuntimeError, LookupError) as exc:
        fail(str(exc) or type(exc).__name__, flag, code)


def _table(title: str | None, *columns: str, keep_whole: tuple[str, ...] = ()) -> Table:
    """The one table style: a header rule, left-aligned title, cells that wrap (never cut);
    ``keep_whole`` columns (names a flag needs) never wrap."""
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    for name in columns:
        table.add_column(name, no_wrap=name in keep_whole, overflow="fold")
    return table


def quiet_libraries(verbose: bool) -> None:
    """Library warnings, progress bars and per-step dicts off the console unless ``verbose``;
    RubriQ's own log lines (INFO) stay."""
    import os
    import warnings

    # the console script's own handler (a no-op under pytest or an embedding program's logging)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(message)s", stream=sys.stderr)
    for name in (
        "transformers",
        "datasets",
        "accelerate",
        "peft",
        "trl",
        "qiskit",
        "httpx",
        "urllib3",
        "gradio",
        "huggingface_hub",
        "matplotlib",
        "numba",
    ):
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.WARNING)
    if verbose:
        return
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # read when transformers is imported
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # "Saving the dataset" bars
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # transformers' "Loading weights" bars
    if "datasets" in sys.modules:  # already imported (an embedding program, the tests): tell it directly
        sys.modules["datasets"].disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].logging.set_verbosity_error()
        sys.modules["transformers"].logging.disable_progress_bar()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*[Tt]ranspile.*level.*")  # qiskit-ionq IonQTranspileLevelWarning
    warnings.filterwarnings("ignore", module="transformers|trl|peft|accelerate|qiskit_ionq|torch")


def _version(value: bool) -> None:
    if value:
        console.print(f"rubriq {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Library warnings and tracebacks on the console."),
) -> None:
    """RubriQ: rubric-rewarded quantum circuit synthesis. Exit codes: 0 done, 1 failed result,
    2 usage or input error."""
    STATE["verbose"] = verbose
    quiet_libraries(verbose)


def main(argv: list[str] | None = None) -> int:
    """The ``rubriq`` console script: usage errors as one line, internal errors without a
    traceback (unless ``--verbose``), documented exit codes."""
    args = sys.argv[1:] if argv is None else argv
    STATE["verbose"] = False
    try:
        code = app(args=args, prog_name="rubriq", standalone_mode=False)
    except TyperException as exc:  # a usage error found by the parser (unknown option, missing value ...)
        ctx = getattr(exc, "ctx", None)
        hint = f" ({ctx.command_path} -h for help)" if ctx is not None else ""
        err.print(f"error: {' '.join(exc.format_message().split())}{hint}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    except (typer.Abort, KeyboardInterrupt):
        err.print("interrupted", markup=False)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the console script never shows a raw traceback by default
        if STATE["verbose"] or "--verbose" in args or "-v" in args:
            traceback.print_exc()
        err.print(
            f"error: internal: {type(exc).__name__}: {' '.join(str(exc).split())} (rerun with --verbose "
            "for the traceback; please report it)",
            markup=False,
            soft_wrap=True,
        )
        return EXIT_FAILED
    return code if isinstance(code, int) else EXIT_OK


# -- shared option checks -----------------------------------------------------------------------
def _parse_params(items: list[str]) -> dict:
    """`key=value` pairs (rubriq.targets.parse_params), errors reported against --param."""
    from rubriq.targets import TargetError, parse_params

    try:
        return parse_params(items)
    except TargetError as exc:
        fail(str(exc), "--param")


def _read_input(path: str, flag: str = "FILE", allow_empty: bool = True) -> str:
    from rubriq.extract.files import InputError, read_text_file

    if path == "-":
        return sys.stdin.read()
    try:
        return read_text_file(path, allow_empty=allow_empty)
    except InputError as exc:
        fail(str(exc), flag)


def _check_target(name: str | None, qubits: int | None, flag: str = "--target") -> None:
    """The target name is known and ``--qubits`` is given and in its range (by flag name, not
    by the library's ``num_qubits``)."""
    from rubriq.targets import TARGETS

    if name is not None:
        check(name in TARGETS, flag, f"unknown target {name!r}; known: {', '.join(TARGETS)} (rubriq targets)")
    if qubits is not None:
        check(qubits >= 1, "--qubits", f"must be >= 1, got {qubits}")
    if name is None or name == "circuit":
        return
    cls = TARGETS[name]
    if qubits is None and cls.default_width({}) is not None:
        return  # a fixed-width gate or state (toffoli, bell): the library picks the width
    check(
        qubits is not None,
        "--qubits",
        f"the target {name} needs its number of qubits ({cls.min_qubits}-{cls.max_qubits})",
    )
    assert qubits is not None
    check(
        cls.min_qubits <= qubits <= cls.max_qubits,
        "--qubits",
        f"{name} takes {cls.min_qubits}-{cls.max_qubits} qubits, got {qubits}",
    )


def _check_model(model: str, flag: str = "--model") -> None:
    from rubriq.evaluation.evaluate import check_policy
    from rubriq.training.models import ModelUnavailable

    try:
        check_policy(model)
    except ModelUnavailable as exc:
        fail(str(exc), flag)


FORMATS = ("qasm2", "qasm3", "python")


# -- score ----------------------------------------------------------------------------------------
@app.command(context_settings=CONTEXT)
def score(
    file: str = typer.Argument(
        ..., metavar="FILE", help="Completion or circuit file (QASM, Python, or LLM text); '-' for stdin."
    ),
    target: str = typer.Option(..., "--target", "-t", metavar="NAME", help="Target algorithm (rubriq targets)."),
    qubits: int | None = typer.Option(None, "--qubits", "-q", metavar="N", help="Number of qubits of the target."),
    param: list[str] = typer.Option([], "--param", "-p", metavar="KEY=VALUE", help="Target parameter (repeatable)."),
    target_qasm: Path | None = typer.Option(
        None, metavar="FILE", help="QASM file of the target circuit (--target circuit)."
    ),
    config: Path | None = typer.Option(
        None, "--config", "-c", metavar="YAML", help="Rubric YAML (configs/rubric_default.yaml)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
) -> None:
    """Score one completion with the rubric and print the breakdown. Exit 0: scored; 1: nothing
    could be parsed or scored (the reason is printed); 2: bad input."""
    from rubriq.config import RubricConfig
    from rubriq.evaluator import RubriQEvaluator
    from rubriq.evaluator.result import is_correct

    _check_target(target, qubits)
    params = _parse_params(param)
    if target_qasm is not None:
        params["qasm"] = _read_input(str(target_qasm), "--target-qasm", allow_empty=False)
    elif target == "circuit":
        fail("--target circuit needs the target circuit: --target-qasm FILE", "--target-qasm")
    text = _read_input(file)
    with reported(flag="--config"):
        cfg = RubricConfig.from_yaml(config) if config else RubricConfig()
    with reported():
        evaluator = RubriQEvaluator(target_algorithm=target, num_qubits=qubits, config=cfg, **params)
    result = evaluator.evaluate(text)
    threshold = cfg.fidelity.correct_threshold
    correct = is_correct(result, threshold)
    if as_json:
        print(json.dumps({**result.to_dict(), "correct": correct, "correct_threshold": threshold}, indent=2))
    else:
        _print_result(result, correct, threshold)
    width = (result.target or {}).get("num_qubits")
    if result.parsed and result.num_qubits is not None and width and result.num_qubits < width:
        err.print(
            f"warning: the circuit has {result.num_qubits} qubits, the target {width}: it was scored against "
            f"the {width}-qubit target with the missing qubits left idle (identity)",
            markup=False,
            soft_wrap=True,
        )
    if result.error:
        raise typer.Exit(EXIT_FAILED)


def _print_result(result, correct: bool, threshold: float) -> None:
    title = f"RubriQ score: target {result.target.get('algorithm')} ({result.target.get('num_qubits')} qubits)"
    table = _table(title, "dimension", "score", "weight", "detail", keep_whole=("dimension",))
    details = {
        "clifford": f"{result.num_gates} gates as written" if result.parsed else "",
        "tcount": f"T(c) = {result.t_count}" if result.t_count is not None else "",
        "hardware": f"best: {result.best_backend}" if result.best_backend else "",
        "fidelity": (
            f"F_process = {result.process_fidelity:.10f}, F_avg = {result.average_fidelity:.10f}"
            if result.fidelity_kind == "process"
            else f"F_state = {result.process_fidelity:.10f}"
            if result.fidelity_kind
            else ""
        ),
        "efficiency": f"depth {result.depth}, {result.num_qubits} qubits" if result.depth is not None else "",
    }
    for name, value in result.scores.items():
        weight = result.weights.get(name)
        table.add_row(name, f"{value:.4f}", "" if weight is None else f"{weight:.2f}", escape(details.get(name, "")))
    table.add_row("reward", f"{result.reward:.4f}", "", "R = sum of weight x score")
    console.print(table)
    if result.error:
        console.print(f"not scored ({result.error_type} error): {result.error}", markup=False, soft_wrap=True)
        return
    f = result.average_fidelity
    verdict = "CORRECT" if correct else "NOT CORRECT"
    console.print(
        f"{verdict}: F_avg = {f:.6f} {'>=' if correct else '<'} {threshold} (the correctness threshold); "
        f"reward {result.reward:.4f}. The reward is a weighted sum: a wrong circuit can score close to a "
        "correct one (README, 'Reading a score')."
        if f is not None
        else f"{verdict}: no fidelity",
        markup=False,
    )
    console.print(f"extracted by: {result.strategy}", markup=False)
    if result.hardware:
        hw = _table(
            "hardware fit per backend",
            "backend",
            "S_H",
            "fits qubits",
            "fits depth",
            "native frac",
            "swaps",
            keep_whole=("backend",),
        )
        for name, row in result.hardware.items():
            hw.add_row(
                name,
                f"{row['score']:.4f}",
                str(row["fits_qubits"]),
                str(row["fits_depth"]),
                f"{row['native_fraction']:.2f}",
                "-" if row["swaps"] is None else str(row["swaps"]),
            )
        console.print(hw)


# -- targets --------------------------------------------------------------------------------------
@app.command(context_settings=CONTEXT)
def targets() -> None:
    """List the target algorithms and their parameters (--param KEY=VALUE)."""
    from rubriq.targets import TARGETS

    table = _table("RubriQ targets", "target", "qubits", "what it is; parameters", keep_whole=("target",))
    for name, cls in TARGETS.items():
        qubit_range = "any" if name == "circuit" else f"{cls.min_qubits}-{cls.max_qubits}"
        params = "".join(f"\n  {k}: {v}" for k, v in cls.parameters.items())
        table.add_row(f"{name}\n({cls.kind})", qubit_range, escape(cls.summary + params))
        table.add_row("", "", "")
    console.print(table)


# -- data -----------------------------------------------------------------------------------------
data_app = typer.Typer(
    help="Build prompt datasets and fetch circuit collections.", no_args_is_help=True, context_settings=CONTEXT
)
app.add_typer(data_app, name="data")


@data_app.command("build")
def data_build(
    out: Path = typer.Option(Path("data"), "--out", metavar="DIR", help="Output folder."),
    small: bool = typer.Option(False, "--small", help="A few rows per family (tests, quickstart)."),
    collections: str = typer.Option(
        "tcount,mqt,qiskit-arith",
        metavar="LIST",
        help="Rewrite collections, comma-separated (tcount, mqt, qiskit-arith).",
    ),
    suite_dir: Path | None = typer.Option(None, metavar="DIR", help="Folder of the T-count suite's .qasm files."),
    seed: int = typer.Option(42, metavar="N", help="Split and sampling seed."),
) -> None:
    """Write the synthesis prompt dataset and the rewrite-with-fewer-T datasets (split by target:
    no target in two splits). A collection that is not on this machine is skipped, with how to
    get it."""
    from rubriq.data import COLLECTIONS, build_all

    names = tuple(c.strip() for c in collections.split(",") if c.strip())
    unknown = [c for c in names if c not in COLLECTIONS]
    check(not unknown, "--collections", f"unknown collection(s) {', '.join(unknown)}; use {', '.join(COLLECTIONS)}")
    check(suite_dir is None or suite_dir.is_dir(), "--suite-dir", f"no folder {suite_dir}")
    check(not out.is_file(), "--out", f"{out} is a file, not a folder")
    with reported():
        report = build_all(out, small=small, collections=names, suite_dir=suite_dir, seed=seed)
    table = _table(
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
        per_family = _table(
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


@data_app.command("fetch")
def data_fetch(
    what: str = typer.Argument(..., metavar="COLLECTION", help="tcount-suite"),
    dest: Path | None = typer.Option(None, metavar="DIR", help="Destination (default ~/.cache/rubriq/tcount_suite)."),
) -> None:
    """Download a public circuit collection (needs network)."""
    from rubriq.data.suites import fetch_tcount_suite

    check(what == "tcount-suite", "COLLECTION", f"unknown collection {what!r}; available: tcount-suite")
    with reported(code=EXIT_FAILED):
        path = fetch_tcount_suite(dest)
    console.print(f"T-count suite in {path}")


# -- baselines ------------------------------------------------------------------------------------
@app.command(context_settings=CONTEXT)
def baselines(
    suite: str = typer.Option("tcount", metavar="NAME", help="tcount | mqt | qiskit-arith | prompts"),
    methods: str = typer.Option(
        "qiskit,tket,pyzx,best",
        metavar="LIST",
        help="Comma-separated: qiskit, tket, pyzx, best (the verified minimum of all, plus PyZX then TKET/Qiskit).",
    ),
    out: Path = typer.Option(
        Path("runs/baselines"), metavar="DIR", help="Output folder (baselines.csv, baselines.md)."
    ),
    suite_dir: Path | None = typer.Option(None, metavar="DIR", help="Folder of the T-count suite's .qasm files."),
    published: Path | None = typer.Option(None, metavar="CSV", help="published_tcounts.csv: reference columns."),
    max_t0: int | None = typer.Option(None, metavar="N", help="Only circuits with T0 <= N."),
    limit: int | None = typer.Option(None, metavar="N", help="At most N circuits (stratified, seed 42)."),
    route_timeout: float = typer.Option(
        180.0,
        metavar="SECONDS",
        help="Per compiler route (compile + verify); a timed-out route is recorded, the other routes still count.",
    ),
    workers: int = typer.Option(0, metavar="N", help="Worker processes (0 = one per core)."),
    resume: bool = typer.Option(False, help="Skip (circuit, method) cells already in OUT/baselines.csv."),
) -> None:
    """Run the compiler baselines (Qiskit, TKET, PyZX, best) with equivalence checks."""
    import os

    from rubriq.baselines.compilers import METHODS
    from rubriq.baselines.runner import load_done, load_published, run_suite, write_reports
    from rubriq.data.suites import load_collection, stratify

    suites = ("tcount", "mqt", "qiskit-arith", "prompts")
    check(suite in suites, "--suite", f"unknown suite {suite!r}; use {', '.join(suites)}")
    method_list = [m.strip() for m in methods.split(",") if m.strip()]
    unknown = [m for m in method_list if m not in METHODS]
    check(
        bool(method_list) and not unknown,
        "--methods",
        f"unknown method(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(METHODS)}",
    )
    check(route_timeout > 0, "--route-timeout", f"must be > 0 seconds, got {route_timeout}")
    check(workers >= 0, "--workers", f"must be >= 0 (0 = one per core), got {workers}")
    check(limit is None or limit >= 1, "--limit", f"must be >= 1, got {limit}")
    check(max_t0 is None or max_t0 >= 0, "--max-t0", f"must be >= 0, got {max_t0}")
    check(suite_dir is None or suite_dir.is_dir(), "--suite-dir", f"no folder {suite_dir}")
    reference: dict[str, dict] = {}
    columns: tuple[str, ...] = ()
    if published is not None:
        with reported(flag=None):
            reference, columns = load_published(published)
    with reported():
        circuits = load_collection(suite, suite_dir)
    if max_t0 is not None:
        circuits = [c for c in circuits if c.t0 <= max_t0]
    check(bool(circuits), "--max-t0", f"no circuit of {suite} has T0 <= {max_t0}")
    if limit is not None:
        circuits, _ = stratify(circuits, total=limit)
    title = f"Compiler baselines: {suite}"
    done = load_done(out / "baselines.csv", method_list) if resume else {}
    if done:
        console.print(f"resuming: {len(done)} (circuit, method) cells already in {out / 'baselines.csv'}")
    with reported():
        rows = run_suite(
            circuits,
            method_list,
            reference,
            route_timeout_s=route_timeout,
            workers=workers or os.cpu_count() or 1,
            done=done,
            on_row=lambda finished: write_reports(finished, method_list, out, title + " (in progress)", columns),
        )
    csv_path, md_path = write_reports(rows, method_list, out, title, columns)
    table = _table(title, "circuit", "T0", *method_list, keep_whole=("circuit",))
    for row in rows:
        cells = []
        for m in method_list:
            res = row.results.get(m)
            cells.append(
                "-"
                if res is None
                else f"{res.t}" + ("" if res.verified else f" ({res.verdict})")
                if res.t is not None
                else res.verdict
            )
        table.add_row(row.circuit.name, str(row.circuit.t0), *cells)
    console.print(table)
    console.print(f"wrote {csv_path} and {md_path}")


# -- doctor ---------------------------------------------------------------------------------------
@app.command(context_settings=CONTEXT)
def doctor(as_json: bool = typer.Option(False, "--json", help="Print the report as JSON.")) -> None:
    """Start a sandbox worker and report which isolation layers hold on this machine, and the
    seccomp allow-list. Exit code 1 when a layer is missing."""
    from rubriq.extract.sandbox import SandboxUnavailable
    from rubriq.extract.sandbox import doctor as sandbox_doctor

    try:
        report = sandbox_doctor()
    except SandboxUnavailable as exc:
        fail(str(exc), code=EXIT_FAILED)
    if as_json:
        print(json.dumps(report, indent=2))
        raise typer.Exit(EXIT_OK if all(report["active"].values()) else EXIT_FAILED)
    table = _table(
        f"RubriQ sandbox layers (euid {report.get('euid')}, child's host uid {report.get('outside_uid')}, "
        f"Python {report.get('python')})",
        "layer",
        "holds",
        "why not",
        keep_whole=("layer",),
    )
    for name, active in report["active"].items():
        table.add_row(name, "yes" if active else "NO", escape(report["why"].get(name, "")))
    console.print(table)
    sc = report.get("seccomp") or {}
    if sc:
        console.print(
            f"seccomp: default {sc['default']}; other architectures and x32: "
            f"{sc['other architectures and x32']}; ENOSYS: {', '.join(sc['ENOSYS'])}",
            markup=False,
        )
        console.print("allowed: " + ", ".join(sc["allowed"]), markup=False)
        for name, condition in sc["allowed with conditions"].items():
            console.print(f"allowed if {condition}: {name}", markup=False)
    console.print("See SECURITY.md for what each layer does and what holds when one is missing.")
    if not all(report["active"].values()):
        raise typer.Exit(EXIT_FAILED)


# -- train ----------------------------------------------------------------------------------------
train_app = typer.Typer(
    help="Train a policy (GRPO, Sparse-GRPO, Sparse-PPO, ablations).", no_args_is_help=True, context_settings=CONTEXT
)
app.add_typer(train_app, name="train")
LAUNCHERS = ("python", "accelerate")


@train_app.command("run")
@typer_options(LaunchSettings, into="launch")
@typer_options(RunOptions, into="run")
def train_run(
    config: Path = typer.Argument(
        ..., metavar="YAML", help="Training YAML (configs/rubriq_grpo.yaml, configs/variants/...)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the config, print the command, run nothing."),
    launch: LaunchSettings = LaunchSettings(),
    run: RunOptions = RunOptions(),
) -> None:
    """Train with the entry point rubriq/training/train_rubriq.py (here or under accelerate; for
    Slurm, sbatch scripts/submit_rubriq_perlmutter.slurm)."""
    import subprocess

    from rubriq.training.launch import as_shell, check_runnable, launch_command

    check(
        launch.launcher in LAUNCHERS,
        "--launcher",
        f"unknown launcher {launch.launcher!r}; use python or accelerate (Slurm: "
        "sbatch scripts/submit_rubriq_perlmutter.slurm)",
    )
    check(launch.num_processes >= 1, "--num-processes", f"must be >= 1, got {launch.num_processes}")
    check(launch.num_machines >= 1, "--num-machines", f"must be >= 1, got {launch.num_machines}")
    check(
        0 <= launch.machine_rank < launch.num_machines,
        "--machine-rank",
        f"must be in 0..{launch.num_machines - 1}, got {launch.machine_rank}",
    )
    check(
        1 <= launch.main_process_port <= 65535, "--main-process-port", f"{launch.main_process_port} is not a TCP port"
    )
    check(run.max_steps is None or run.max_steps >= 1, "--max-steps", f"must be >= 1, got {run.max_steps}")
    check(config.is_file(), "YAML", f"no such file: {config}")
    check(
        launch.accelerate_config is None or Path(launch.accelerate_config).is_file(),
        "--accelerate-config",
        f"no such file: {launch.accelerate_config}",
    )
    with reported():
        cmd = launch_command(config, launch, resume=run.resume, max_steps=run.max_steps)
    from rubriq.training.config import TrainSettings

    with reported(flag=str(config)):
        settings = TrainSettings.from_yaml(config)
    if dry_run:
        console.print(
            f"config ok: {config} ({settings.algorithm}, reward {settings.reward.kind}, "
            f"model {settings.model.name_or_path}, output {settings.output_dir})",
            markup=False,
        )
        print(as_shell(cmd))
        return
    with reported():
        check_runnable(launch)
    raise typer.Exit(subprocess.call(cmd))


@train_app.command("variants")
def train_variants(
    base: Path = typer.Option(
        Path("configs/rubriq_grpo.yaml"), metavar="YAML", help="The config the variants start from."
    ),
    out: Path = typer.Option(
        Path("runs/variants"),
        metavar="DIR",
        help="Folder for the variant YAML files (the committed ones: --out configs/variants).",
    ),
    delta: float = typer.Option(0.05, metavar="STEP", help="Weight step of the sensitivity grid."),
) -> None:
    """Write Sparse-GRPO, Sparse-PPO, no-w_H/T/E and the +/-delta weight grid as YAML files."""
    from rubriq.training.variants import write_variants

    check(base.is_file(), "--base", f"no such file: {base}")
    check(0 < delta < 1, "--delta", f"must be in (0, 1), got {delta}")
    with reported():
        paths = write_variants(base, out, delta)
    console.print(f"wrote {len(paths)} variants to {out}: " + ", ".join(p.stem for p in paths), markup=False)


# -- study ----------------------------------------------------------------------------------------
study_app = typer.Typer(
    help="Studies that measure what training does (docs/studies.md).", no_args_is_help=True, context_settings=CONTEXT
)
app.add_typer(study_app, name="study")


@study_app.command("convergence")
def study_convergence(
    config: Path = typer.Argument(..., metavar="YAML", help="Study YAML (configs/studies/convergence_cpu.yaml)."),
    out: Path | None = typer.Option(None, metavar="DIR", help="Output folder (default: the study's output_dir)."),
    arm: list[str] | None = typer.Option(None, metavar="NAME", help="Run only this arm (repeatable)."),
    seed: list[int] | None = typer.Option(None, metavar="N", help="Run only this seed (repeatable)."),
    summary_only: bool = typer.Option(False, "--summary-only", help="Rewrite the summary from finished arm-seeds."),
) -> None:
    """Rubric vs gated rubric vs sparse reward vs no RL from one warm-start, over seeds, evaluated on
    held-out targets by sampling. Resumable: finished arm-seeds are skipped."""
    from rubriq.studies import convergence

    check(config.is_file(), "YAML", f"no such file: {config}")
    with reported():
        if summary_only:
            study = convergence.StudySettings.from_yaml(config)
            folder = out or Path(study.output_dir)
            rows = [r for r in (folder / "data" / f"{study.split}.jsonl").read_text().splitlines() if r.strip()]
            n = min(len(rows), study.max_prompts) if study.max_prompts else len(rows)
            report = convergence.write_summary(folder, study, n)
        else:
            report = convergence.run(
                config, out, arm or None, seed or None, progress=lambda m: console.print(f"study: {m}", markup=False)
            )
    console.print(f"summary: {report}", markup=False)


# -- hardware -------------------------------------------------------------------------------------
hardware_app = typer.Typer(
    help="Transpile and run circuits on IBM / IonQ or their offline emulation.",
    no_args_is_help=True,
    context_settings=CONTEXT,
)
app.add_typer(hardware_app, name="hardware")


@hardware_app.command("run")
@typer_options(HardwareOptions)
def hardware_run(
    circuits: list[Path] = typer.Argument(
        ..., metavar="PATH...", help=".qasm / .py files, folders of .qasm, or an evaluation records.jsonl."
    ),
    options: HardwareOptions = HardwareOptions(),
) -> None:
    """The paper's hardware pipeline (also: python -m rubriq.hardware.submit_ibm_ionq, same options)."""
    from rubriq.hardware.jobs import redact
    from rubriq.hardware.submit_ibm_ionq import check_options, load_circuits, pipeline, write_results

    with reported():
        check_options(list(options.backend), options.shots, options.top_k, options.threshold)
    with reported(flag="PATH"):
        loaded = load_circuits(circuits, options.top_k)
    run = pipeline(options, say=lambda m: err.print(m, markup=False, soft_wrap=True))
    dry_run, out, threshold = options.dry_run, Path(options.out), options.threshold
    with reported():
        rows = run.run(loaded)
    table = _table(
        "what would be sent (dry run)" if dry_run else "results",
        "backend",
        "circuit",
        "mode",
        "qubits",
        "depth",
        "2q gates",
        "SWAPs",
        "KL",
        keep_whole=("backend",),
    )
    for r in rows:
        kl = r.get("kl")
        table.add_row(
            r["backend"],
            escape(r["circuit"]),
            r["mode"],
            str(r["qubits"]),
            str(r["depth"]),
            str(r["two_qubit_gates"]),
            str(r["swaps_inserted"]),
            "-"
            if kl is None
            else f"{kl:.4f}" + (" > threshold" if r.get("flagged") else "")
            if r.get("status", "done") == "done" or kl is not None
            else f"pending ({r.get('status')})",
        )
    console.print(table)
    if dry_run:
        console.print("nothing sent; cost: see the IBM Quantum and IonQ pricing pages (IonQ bills per gate-shot)")
        return
    paths = write_results(rows, out, threshold)
    console.print(redact("wrote " + ", ".join(str(p) for p in paths.values())), markup=False)


@hardware_app.command("backends")
def hardware_backends() -> None:
    """The backend catalog: qubits, topology, native gates, depth budget, error rates and sources."""
    from rubriq.circuit.backends import CATALOG, error_rates

    table = _table(
        "RubriQ backend catalog (names for --backend)",
        "backend",
        "device",
        "qubits",
        "topology",
        "max depth",
        "native gates",
        keep_whole=("backend",),
    )
    for name, spec in CATALOG.items():
        table.add_row(
            name,
            spec.family,
            str(spec.num_qubits),
            spec.topology,
            str(spec.max_depth),
            " ".join(sorted(spec.native_gates)),
        )
    console.print(table)
    rates = _table(
        "error rates (emulation; sources below)", "backend", "e_1q", "e_2q", "e_readout", keep_whole=("backend",)
    )
    for name in CATALOG:
        e = error_rates(name)
        rates.add_row(name, f"{e['error_1q']:.2e}", f"{e['error_2q']:.2e}", f"{e['error_readout']:.2e}")
    console.print(rates)
    for name, spec in CATALOG.items():
        console.print(f"{name}: {spec.source}", markup=False)


# -- evaluate, report, synthesize -----------------------------------------------------------------
def _check_sampling(samples: int, temperature: float, max_new_tokens: int, samples_flag: str) -> None:
    check(samples >= 1, samples_flag, f"must be >= 1, got {samples}")
    check(temperature >= 0, "--temperature", f"must be >= 0, got {temperature}")
    check(
        temperature > 0 or samples == 1,
        samples_flag,
        f"{samples} samples need --temperature > 0 (greedy decoding gives one distinct completion)",
    )
    check(max_new_tokens >= 1, "--max-new-tokens", f"must be >= 1, got {max_new_tokens}")


@app.command(context_settings=CONTEXT)
def evaluate(
    model: str = typer.Option(..., metavar="MODEL", help="Model or adapter folder, hub id, 'embedded', or 'tiny'."),
    dataset: Path = typer.Option(Path("data/prompts"), metavar="DIR", help="Folder written by rubriq data build."),
    split: str = typer.Option("test", metavar="NAME", help="Dataset split (train, validation, test)."),
    samples: int = typer.Option(1, "--samples", "-n", metavar="K", help="Completions per prompt (the k of pass@k)."),
    temperature: float = typer.Option(0.0, metavar="T", help="0: greedy (then --samples must be 1)."),
    max_new_tokens: int = typer.Option(512, metavar="N", help="Tokens per completion."),
    max_prompts: int = typer.Option(0, metavar="N", help="Evaluate at most N prompts (0: all)."),
    eps: float = typer.Option(0.01, metavar="EPS", help="Correct: F_avg >= 1 - EPS."),
    baselines: str = typer.Option("", metavar="LIST", help="Compiler baselines on the same targets, e.g. qiskit,pyzx."),
    out: Path = typer.Option(Path("runs/eval"), metavar="DIR", help="records.jsonl, summary.json"),
) -> None:
    """Sample a policy on a split and compute the paper's metrics (docs/metrics.md)."""
    from rubriq.baselines.compilers import METHODS
    from rubriq.evaluation.evaluate import EvalRequest, run_evaluation
    from rubriq.tables import fmt

    _check_sampling(samples, temperature, max_new_tokens, "--samples")
    check(max_prompts >= 0, "--max-prompts", f"must be >= 0 (0: all), got {max_prompts}")
    check(0 < eps < 1, "--eps", f"must be in (0, 1), got {eps}")
    methods = tuple(m.strip() for m in baselines.split(",") if m.strip())
    unknown = [m for m in methods if m not in METHODS]
    check(not unknown, "--baselines", f"unknown method(s) {', '.join(unknown)}; known: {', '.join(METHODS)}")
    check(dataset.is_dir(), "--dataset", f"no folder {dataset} (write one with rubriq data build)")
    check(
        (dataset / f"{split}.jsonl").is_file(),
        "--split",
        f"no split {split!r} in {dataset} (has: "
        f"{', '.join(sorted(p.stem for p in dataset.glob('*.jsonl'))) or 'none'})",
    )
    _check_model(model)
    _warn_style(model, dataset, split)
    req = EvalRequest(
        model=model,
        dataset=str(dataset),
        split=split,
        samples=samples,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        max_prompts=max_prompts,
        eps=eps,
    )
    with reported():
        summary = run_evaluation(req, out, baselines=methods)
    s = summary["overall"]
    ks = sorted(int(k.removeprefix("pass@")) for k in s if k.startswith("pass@"))
    table = _table(
        f"{model} on {dataset} [{split}] ({s['completions']} completions)", "metric", "value", keep_whole=("metric",)
    )
    for label, value in (
        ("parse rate", fmt(s["parse_rate"], 2)),
        ("mean F_avg", fmt(s["mean_fidelity"])),
        (f"correct (F_avg >= {1 - eps:g})", fmt(s["correct_rate"], 2)),
        ("C = T0/T over correct", fmt(s["compression"], 2)),
        ("MNTC", fmt(s["mntc"])),
        ("violation rate V", fmt(s["violation_rate"], 2)),
        *((f"pass@{k}", fmt(s.get(f"pass@{k}"), 2)) for k in ks),
        ("mean reward", fmt(s["mean_reward"])),
        ("wrong rewarded", fmt(s["wrong_rewarded_rate"], 2)),
        ("trivial", fmt(s["trivial_rate"], 2)),
    ):
        table.add_row(label, value)
    console.print(table)
    if summary.get("baselines"):
        console.print(_baseline_table(summary["baselines"]))
    console.print(f"wrote {out / 'records.jsonl'} and {out / 'summary.json'}", markup=False)


def _warn_style(model: str, dataset: Path, split: str) -> None:
    """Warn when the dataset's prompts are not in the style the policy was trained with."""
    from rubriq.data.prompts import prompt_style_of_rows
    from rubriq.evaluation.evaluate import prompt_style_of

    first = (dataset / f"{split}.jsonl").read_text(encoding="utf-8").split("\n", 1)[0]
    try:
        style = prompt_style_of_rows([json.loads(first)])
    except (ValueError, AttributeError):
        return
    trained = prompt_style_of(model)
    if Path(model).is_dir() and style != trained:
        err.print(
            f"warning: {dataset} has {style} prompts but {model} was trained on {trained} prompts (build the "
            f"dataset with prompt_style: {trained})",
            markup=False,
            soft_wrap=True,
        )


def _baseline_table(rows: list[dict]) -> Table:
    methods = sorted({r["method"] for r in rows})
    table = _table(
        "compiler baselines on the same targets (T, verified)", "target", "T0", *methods, keep_whole=("target",)
    )
    by_circuit: dict[str, dict] = {}
    for r in rows:
        by_circuit.setdefault(r["circuit"], {"t0": r["t0"]})[r["method"]] = r
    for name, cells in by_circuit.items():
        table.add_row(
            name,
            str(cells["t0"]),
            *(
                ("-" if m not in cells else f"{cells[m]['t']}" + ("" if cells[m]["verified"] else " (unverified)"))
                for m in methods
            ),
        )
    return table


@app.command(context_settings=CONTEXT)
def report(
    inputs: list[Path] = typer.Argument(
        ..., metavar="DIR...", help="Training runs (metrics.jsonl) and/or evaluations (records.jsonl)."
    ),
    out: Path = typer.Option(Path("runs/report"), metavar="DIR", help="report.md, report.html, PNGs"),
    target_metric: str = typer.Option(
        "reward", metavar="NAME", help="Logged metric for time-to-target (e.g. compression)."
    ),
    target_value: float = typer.Option(
        0.5, metavar="X", help="Threshold of the time-to-target (paper: compression 3.3)."
    ),
    eps: float = typer.Option(0.01, metavar="EPS", help="Correct: F_avg >= 1 - EPS."),
) -> None:
    """Tables and plots from training runs and evaluations (markdown + self-contained HTML)."""
    from rubriq.evaluation.report import write_report

    missing = [str(p) for p in inputs if not p.is_dir()]
    check(not missing, "DIR", f"not a folder: {', '.join(missing)}")
    check(0 < eps < 1, "--eps", f"must be in (0, 1), got {eps}")
    with reported():
        md, page = write_report(inputs, out, target_metric, target_value, eps)
    console.print(f"wrote {md} and {page}", markup=False)


@app.command(context_settings=CONTEXT)
def synthesize(
    spec: str = typer.Argument(
        ..., metavar="SPEC", help='Natural-language spec, e.g. "Synthesize a 4-qubit QFT circuit".'
    ),
    target: str | None = typer.Option(
        None, "--target", "-t", metavar="NAME", help="Target name (rubriq targets); else read from the spec."
    ),
    qubits: int | None = typer.Option(None, "--qubits", "-q", metavar="N", help="Number of qubits (with --target)."),
    param: list[str] = typer.Option([], "--param", "-p", metavar="KEY=VALUE", help="Target parameter (repeatable)."),
    model: str = typer.Option(
        "embedded", metavar="MODEL", help="Policy: model or adapter folder, hub id, 'embedded', 'tiny'."
    ),
    n: int = typer.Option(16, "--samples", "-n", metavar="N", help="Candidates to sample."),
    fmt: str = typer.Option("qasm2", "--format", metavar="FORMAT", help="qasm2 | qasm3 | python"),
    max_new_tokens: int = typer.Option(512, metavar="N", help="Tokens per candidate."),
    temperature: float = typer.Option(0.8, metavar="T", help="Sampling temperature (> 0)."),
    optimize: bool = typer.Option(
        False,
        help="Compiler post-pass (PyZX, Qiskit) on the best circuit, kept only if "
        "verified equivalent and correct with fewer T or less depth.",
    ),
    show_all: bool = typer.Option(False, "--show-all", help="List every candidate with its score or error."),
) -> None:
    """Sample N circuits for a spec, print the best correct one with its scores and drawing. The
    prompt is the one the policy was trained with (its folder's rubriq_policy.json)."""
    from rubriq.evaluation.evaluate import prompt_style_of
    from rubriq.evaluation.synthesize import SpecNotUnderstood, target_from_text

    _check_sampling(n, temperature, max_new_tokens, "--samples")
    check(temperature > 0, "--temperature", f"must be > 0 for sampling, got {temperature}")
    check(fmt in FORMATS, "--format", f"unknown format {fmt!r}; use {', '.join(FORMATS)}")
    _check_target(target, qubits)
    check(
        target is not None or (qubits is None and not param),
        "--target",
        "--qubits and --param go with --target (else the spec is read from the text)",
    )
    if target is not None:
        with reported(flag="--target"):
            tgt = _make_target(target, qubits, param)
    else:
        try:
            tgt = target_from_text(spec)
        except SpecNotUnderstood as exc:
            fail(str(exc), "SPEC")
        except ValueError as exc:  # recognized, but the size or a parameter is out of range
            fail(str(exc).replace("num_qubits", "the number of qubits"), "SPEC")
    _check_model(model)
    style = prompt_style_of(model)
    console.print(f"target: {tgt!r}; prompting {model} with its {style} {fmt} prompt", markup=False)
    from rubriq.evaluation.synthesize import synthesize as run_synthesis

    with reported():
        result = run_synthesis(
            tgt,
            model=model,
            n=n,
            fmt=fmt,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            optimize=optimize,
            style=style,
        )
    parsed = sum(c.result["parsed"] for c in result.candidates)
    if show_all:
        table = _table(
            f"{n} candidates, best reward first", "#", "reward", "F_avg", "T", "depth", "extracted by / error"
        )
        ranked = sorted(result.candidates, key=lambda c: -c.result["reward"])
        for i, c in enumerate(ranked, 1):
            r = c.result
            f = r.get("average_fidelity")
            table.add_row(
                str(i),
                f"{r['reward']:.3f}",
                "-" if f is None else f"{f:.6f}",
                str(r.get("t_count", "-")),
                str(r.get("depth", "-")),
                escape(r.get("strategy") or f"{r.get('error_type')}: {(r.get('error') or '')[:160]}"),
            )
        console.print(table)
    if result.best is None:
        console.print(
            f"no functionally correct circuit among {n} candidates ({parsed} parsed; --show-all lists "
            "them); sample more (-n) or train the policy further",
            markup=False,
        )
        raise typer.Exit(EXIT_FAILED)
    from qiskit import qasm2

    best = result.best.result
    console.print(
        f"best of {n} ({parsed} parsed): reward {best['reward']:.3f}, F_avg {best['average_fidelity']:.6f}, "
        f"T = {best['t_count']} (T0 = {tgt.t0}), depth {best['depth']}",
        markup=False,
    )
    console.print("scores: " + ", ".join(f"{k} {v:.3f}" for k, v in best["scores"].items()), markup=False)
    assert result.circuit is not None  # the best candidate's circuit
    print(qasm2.dumps(result.circuit))
    print(result.circuit.draw("text", fold=80))
    if optimize:
        if result.optimized is None:
            console.print(
                "post-pass: no compiler rewrite lowered the T-count or depth while staying correct; keeping "
                "the sampled circuit"
            )
        else:
            o = result.optimized
            console.print(
                f"post-pass {o.method}: verified equivalent ({o.verdict}), correct against the target (F_avg "
                f"{o.result['average_fidelity']:.6f}), T {best['t_count']} -> {o.result['t_count']}, "
                f"depth {best['depth']} -> {o.result['depth']}",
                markup=False,
            )
            print(qasm2.dumps(o.circuit))


def _make_target(name: str, qubits: int | None, param: list[str]):
    from rubriq.targets import make_target

    return make_target(name, qubits, **_parse_params(param))


# -- quickstart, app ------------------------------------------------------------------------------
@app.command(context_settings=CONTEXT)
def quickstart(
    config: Path | None = typer.Option(
        None, metavar="YAML", help="Training YAML (default: configs/quickstart_cpu.yaml)."
    ),
    out: Path = typer.Option(Path("runs/quickstart"), metavar="DIR", help="Output folder (report.md, PNGs, JSONL)."),
    max_steps: int | None = typer.Option(None, metavar="N", help="Override the number of GRPO steps."),
) -> None:
    """Embedded model -> SFT warm-start -> GRPO -> before/after evaluation and report (CPU)."""
    from rubriq.training.quickstart import DEFAULT_CONFIG, run

    check(max_steps is None or max_steps >= 1, "--max-steps", f"must be >= 1, got {max_steps}")
    check(config is None or config.is_file(), "--config", f"no such file: {config}")
    with reported():
        report_path = run(config or DEFAULT_CONFIG, out, max_steps=max_steps, console=console)
    final = out / "train" / "final"
    console.print(
        f"\ndone. report: {report_path}\nmodel:  {final}\nnext:\n"
        f'  rubriq synthesize "Synthesize a 3-qubit QFT circuit" --model {final} -n 4 --show-all\n'
        f"  rubriq evaluate --model {final} --dataset {out / 'data'} --split test --samples 4 "
        f"--temperature 0.8 --out runs/eval\n"
        f"  rubriq report {out} runs/eval --out runs/report",
        markup=False,
    )


@app.command("app", context_settings=CONTEXT)
def serve_app(
    host: str = typer.Option(
        "127.0.0.1", metavar="HOST", help="Interface to bind (0.0.0.0 exposes the app to your network)."
    ),
    port: int = typer.Option(7860, metavar="PORT", help="TCP port."),
    model: str = typer.Option(
        "none",
        metavar="MODEL",
        help="Policy for the Synthesize tab: embedded, a model or adapter folder, tiny (random, for tests) or none.",
    ),
    concurrency: int = typer.Option(2, metavar="N", help="Requests processed at once (the rest wait in the queue)."),
    write_space: Path | None = typer.Option(
        None, metavar="DIR", help="Write the files of a Hugging Face Space to DIR and exit."
    ),
) -> None:
    """Serve the interactive app (Score, Synthesize, Baselines tabs) in the browser."""
    check(1 <= port <= 65535, "--port", f"{port} is not a TCP port (1-65535)")
    check(concurrency >= 1, "--concurrency", f"must be >= 1, got {concurrency}")
    if model != "none":
        _check_model(model)
    try:
        from rubriq.app import launch, write_space_files
    except ImportError as exc:
        fail(f"the app needs gradio: pip install -e '.[app]' ({exc})")
    if write_space is not None:
        for path in write_space_files(write_space, model if model not in ("tiny", "none") else "embedded"):
            console.print(f"wrote {path}", markup=False)
        return
    console.print(f"RubriQ app on http://{host}:{port}/ (model: {model}); Ctrl+C stops it", markup=False)
    launch(host, port, model, block=True, concurrency=concurrency)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
