"""Config dataclasses drive the flags: each field becomes `--field-name` with its metadata `help`
(and `choices`); lists and tuples take several values. Below the command lines, so that a builder
that parses its components' options (the release, `mmlongembed.release.composite`) needs no command line.

`--help` groups the flags by kind: the config's own options first, then those of each shared
options class it inherits (a class that names its group in ``OPTIONS_TITLE``: the options every
builder has, page rendering, the LLM steps), so a builder's own options are not buried under them."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import typing


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _declared_by(config_class: type, name: str) -> type:
    """The class of ``config_class``'s MRO that declares field ``name`` (the nearest one)."""
    return next(c for c in config_class.__mro__ if name in inspect.get_annotations(c))


def grouped_fields(config_class: type) -> list[tuple[str | None, list[dataclasses.Field]]]:
    """The config's fields by kind: its own (title None) first, then each shared options
    class's (titled by its ``OPTIONS_TITLE``), the shorter groups first (the LLM's fifteen
    options last), so that none is buried under a long one."""
    groups: dict[str | None, list[dataclasses.Field]] = {None: []}
    shared = [c.__dict__["OPTIONS_TITLE"] for c in config_class.__mro__ if "OPTIONS_TITLE" in c.__dict__]
    groups.update({title: [] for title in shared})
    for f in dataclasses.fields(config_class):
        groups[_declared_by(config_class, f.name).__dict__.get("OPTIONS_TITLE")].append(f)
    own = [(None, groups.pop(None))] if groups[None] else []
    return own + sorted(((title, fields) for title, fields in groups.items() if fields), key=lambda g: len(g[1]))


def add_dataclass_arguments(parser: argparse.ArgumentParser, config_class: type, own_title: str | None = None,
                            after_own=None) -> None:
    """A flag per field of ``config_class``, in argument groups by kind (``grouped_fields``): the
    own options under ``own_title`` (in the parser's own list without one), then
    ``after_own(parser)`` (what the command adds of its own), then the shared groups."""
    groups = grouped_fields(config_class)
    own = [f for title, fields in groups if title is None for f in fields]
    if own:
        _add_fields(parser.add_argument_group(own_title) if own_title else parser, config_class, own)
    if after_own is not None:
        after_own(parser)
    for title, fields in groups:
        if title is not None:
            _add_fields(parser.add_argument_group(title), config_class, fields)


def _add_fields(parser, config_class: type, fields: list[dataclasses.Field]) -> None:
    hints = typing.get_type_hints(config_class)
    for f in fields:
        kind = hints[f.name]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        help_text = f.metadata.get("help", "")  # the formatter appends the default
        origin, args = typing.get_origin(kind), typing.get_args(kind)
        if kind is bool:
            parser.add_argument(_flag(f.name), action=argparse.BooleanOptionalAction, default=default, help=help_text)
        elif origin in (list, tuple):
            parser.add_argument(_flag(f.name), nargs="+", type=args[0], default=default, help=help_text)
        elif args and type(None) in args:  # Optional[X]
            inner = next(a for a in args if a is not type(None))
            parser.add_argument(_flag(f.name), type=inner, default=default, help=help_text)
        else:
            choices = f.metadata.get("choices")
            parser.add_argument(_flag(f.name), type=kind, default=default, choices=choices, help=help_text)


def config_from_args(config_class: type, args: argparse.Namespace):
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(config_class)}
    for f in dataclasses.fields(config_class):
        if isinstance(values[f.name], list) and typing.get_origin(typing.get_type_hints(config_class)[f.name]) is tuple:
            values[f.name] = tuple(values[f.name])
    return config_class(**values)
