"""Config dataclasses drive the flags: each field becomes `--field-name` with its metadata `help`
(and `choices`); lists and tuples take several values. Below the command lines, so that a builder
that parses its components' options (the release, `mmlongembed.composite`) needs no command line."""

from __future__ import annotations

import argparse
import dataclasses
import typing


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_dataclass_arguments(parser: argparse.ArgumentParser, config_class: type) -> None:
    hints = typing.get_type_hints(config_class)
    for f in dataclasses.fields(config_class):
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
