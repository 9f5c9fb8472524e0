"""Command-line options declared once, on a dataclass, for typer and argparse alike.

TRL declares ``GRPOConfig`` once and ``TrlParser`` derives the command line from it; RubriQ's
command-line settings do the same: a dataclass whose fields carry their flag, metavar and help
(:func:`option`), read by :func:`typer_options` (the ``rubriq`` commands) and
:func:`add_arguments` / :func:`from_namespace` (the paper's argparse entry points), so a flag,
its default and its help exist in one place.  Written by hand because typer has no dataclass
support and ``TrlParser`` builds argparse only.

>>> import argparse, dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Demo:
...     shots: int = option(4096, "Shots per circuit.", metavar="N")
>>> parser = argparse.ArgumentParser()
>>> add_arguments(parser, Demo)
>>> from_namespace(Demo, parser.parse_args(["--shots", "8"]))
Demo(shots=8)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def option(
    default: Any,
    help: str,
    *,
    metavar: str | None = None,
    flag: str | None = None,
    short: str | None = None,
    repeatable: bool = False,
) -> Any:
    """A dataclass field that is also a command-line option: ``--field-name`` unless ``flag``
    says otherwise (``short``: a one-letter alias, e.g. ``-n``); ``repeatable``: a list option
    given once per value."""
    metadata = {"help": help, "metavar": metavar, "flag": flag, "short": short, "repeatable": repeatable}
    kwargs: dict[str, Any] = {"metadata": metadata}
    if isinstance(default, list):
        kwargs["default_factory"] = lambda: list(default)
    else:
        kwargs["default"] = default
    return dataclasses.field(**kwargs)


def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if "help" in f.metadata]


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return ...


def add_arguments(parser: argparse.ArgumentParser, cls: type, underscore_aliases: bool = False) -> None:
    """One argparse argument per option field of ``cls`` (``--field_name`` too with
    ``underscore_aliases``: the paper's spelling)."""
    for f, tp in _fields(cls):
        flags = [_flag(f)]
        if underscore_aliases and "-" in flags[0][2:]:
            flags.append("--" + flags[0][2:].replace("-", "_"))
        meta = f.metadata
        if tp is bool:
            parser.add_argument(*flags, dest=f.name, action="store_true", help=meta["help"])
            continue
        # the value type: list[str] -> str, int | None -> int, int -> int
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        base = args[0] if args else tp
        kwargs: dict[str, Any] = {"dest": f.name, "help": meta["help"], "metavar": meta["metavar"]}
        if meta["repeatable"]:
            kwargs.update(action="append", type=base, default=None)
        else:
            kwargs.update(type=base if base in (int, float, str) else str, default=_default(f))
        parser.add_argument(*flags, **kwargs)


def from_namespace(cls: type[T], namespace: argparse.Namespace) -> T:
    """``cls`` from parsed arguments (a repeatable option not given keeps its default)."""
    values = {}
    for f, _ in _fields(cls):
        value = getattr(namespace, f.name)
        values[f.name] = _default(f) if value is None and f.metadata["repeatable"] else value
    return cls(**values)


def typer_options(
    cls: type,
    into: str = "options",
    exclude: tuple[str, ...] = (),
    defaults: dict[str, Any] | None = None,
    notes: dict[str, str] | None = None,
) -> Callable[[Callable], Callable]:
    """Decorate a typer command taking ``into: cls``: the command gets one typer option per
    option field of ``cls`` (flag, metavar, help and default from the field; ``exclude``: fields
    left at their defaults, e.g. one whose flag the command already has; ``defaults``: the
    command's own defaults of some fields; ``notes``: what the command adds to a field's help)
    and is called with the dataclass built from them."""
    import typer

    defaults, notes = defaults or {}, notes or {}
    unknown = sorted((set(defaults) | set(notes)) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise TypeError(f"typer_options({cls.__name__}): no field(s) {unknown}")

    def fields() -> list[tuple[dataclasses.Field, Any]]:
        return [(f, tp) for f, tp in _fields(cls) if f.name not in exclude]

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command)
        params = [p for name, p in signature.parameters.items() if name != into]
        hints = typing.get_type_hints(command)
        annotations = {k: v for k, v in hints.items() if k != into}
        for f, tp in fields():
            meta = f.metadata
            flags = [_flag(f), *([meta["short"]] if meta.get("short") else [])]
            text = meta["help"] + (" " + notes[f.name] if f.name in notes else "")
            value = defaults[f.name] if f.name in defaults else _default(f)
            default = typer.Option(value, *flags, help=text, metavar=meta["metavar"])
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=tp))
            annotations[f.name] = tp
        names = [f.name for f, _ in fields()]

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            options = cls(**{k: kwargs.pop(k) for k in names})
            return command(**kwargs, **{into: options})

        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = annotations
        return wrapper

    return decorate
