"""What every ``rubriq`` command shares: the root typer app and its console script
(:func:`main`), the two consoles, one-line errors (:func:`fail`, :func:`check`,
:func:`reported`), the one table style (:func:`new_table`), library noise
(:func:`quiet_libraries`) and the option checks several commands make."""

from __future__ import annotations

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
from rich.table import Table
from typer.exceptions import TyperException  # typer's own (vendored) click: usage errors

from rubriq import __version__
from rubriq.models.sampling import SamplingSpec

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


def command_group(name: str, help: str) -> typer.Typer:
    """``rubriq NAME ...``: a group of subcommands under the CLI (shown with its help when called
    without one)."""
    group = typer.Typer(help=help, no_args_is_help=True, context_settings=CONTEXT)
    app.add_typer(group, name=name)
    return group


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


def new_table(title: str | None, *columns: str, keep_whole: tuple[str, ...] = ()) -> Table:
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
        "httpx2",  # the openai client's HTTP library: a line per request at INFO
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
def param_dict(items: list[str]) -> dict:
    """`key=value` pairs (rubriq.targets.parse_params), errors reported against --param."""
    from rubriq.targets import TargetError, parse_params

    try:
        return parse_params(items)
    except TargetError as exc:
        fail(str(exc), "--param")


def packaged(path: str | Path) -> Path:
    """``path`` as given when it exists; else, for a path the docs write from the repository's root
    (``rubriq/examples/...``, ``configs/...``), the copy shipped inside the installed package, so
    that the README's commands also run from an empty folder after ``pip install rubriq``.

    >>> packaged("configs/quickstart_cpu.yaml").is_file(), packaged("no/such.yaml")
    (True, PosixPath('no/such.yaml'))
    """
    import rubriq

    path = Path(path)
    if path.exists() or path.is_absolute():
        return path
    root = Path(rubriq.__file__).resolve().parent
    parts = path.parts
    if parts[:2] == ("rubriq", "examples") or parts[:1] == ("configs",):
        shipped = root.joinpath(*parts[1:]) if parts[0] == "rubriq" else root / "configs" / Path(*parts[1:])
        if shipped.exists():
            return shipped
    return path


def read_input(path: str, flag: str = "FILE", allow_empty: bool = True) -> str:
    from rubriq.extract.files import InputError, read_text_file

    if path == "-":
        return sys.stdin.read()
    try:
        return read_text_file(packaged(path), allow_empty=allow_empty)
    except InputError as exc:
        fail(str(exc), flag)


def check_target(name: str | None, qubits: int | None, flag: str = "--target") -> None:
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


def check_model(model: str, flag: str = "--model") -> None:
    from rubriq.evaluation.evaluate import check_policy
    from rubriq.models import ModelUnavailable

    try:
        check_policy(model)
    except ModelUnavailable as exc:
        fail(str(exc), flag)


def check_sampling(spec: SamplingSpec, samples_flag: str = "--samples") -> None:
    """The sampling options (:class:`~rubriq.models.sampling.SamplingSpec`'s flags) of
    ``evaluate``, ``synthesize`` and ``optimize``: samples >= 1, temperature >= 0 (> 0 for more
    than one sample), top-p in (0, 1], top-k >= 0, max_new_tokens >= 1, one line naming the flag."""
    samples, temperature = spec.samples, spec.temperature
    check(samples >= 1, samples_flag, f"must be >= 1, got {samples}")
    check(temperature >= 0, "--temperature", f"must be >= 0, got {temperature}")
    check(
        temperature > 0 or samples == 1,
        samples_flag,
        f"{samples} samples need --temperature > 0 (greedy decoding gives one distinct completion)",
    )
    check(0 < spec.top_p <= 1, "--top-p", f"must be in (0, 1], got {spec.top_p}")
    check(spec.top_k is None or spec.top_k >= 0, "--top-k", f"must be >= 0 (0: all tokens), got {spec.top_k}")
    check(spec.max_new_tokens >= 1, "--max-new-tokens", f"must be >= 1, got {spec.max_new_tokens}")
