"""Command-line flags generated from a config dataclass, not mapped by hand.

Each field ``context_window`` becomes ``--context-window VALUE`` (help: the field's ``#:``
comment and its default); a bool field becomes ``--x`` / ``--no-x``. Flags keep their text:
:func:`flag_overrides` hands what was given to :func:`chunkwise.config.load_config` as
overrides, so a flag, a YAML key and a ``--key=value`` override go through the same converter
and fail with the same message (naming the flag).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from chunkwise.config.build import Override, fields_of
from chunkwise.config.convert import MAPPING_TYPES, describe, is_union, section_type
from chunkwise.config.docs import field_docs


def flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _metavar(tp: Any) -> str:
    if is_union(tp):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _metavar(inner[0]) if len(inner) == 1 else "VALUE"
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "{" + ",".join(str(a) for a in typing.get_args(tp)) + "}"
    if origin in MAPPING_TYPES:
        return "K=V,..."
    if origin in (list, tuple, set, frozenset):
        return "A,B,..."
    return {int: "N", float: "X"}.get(tp, "TEXT")


def _default_text(f: dataclasses.Field) -> str | None:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None or value == "" or value == [] or value == {}:
        return None
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return str(value)


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    skip: Sequence[str] = (),
    aliases: Mapping[str, Sequence[str]] | None = None,
    negations: Mapping[str, str] | None = None,
) -> None:
    """A flag for every field of dataclass ``cls`` but ``skip``. ``aliases`` gives a field
    extra spellings (``{"mapreduce_args": ["--strategy-args"]}``); ``negations`` a flag that
    sets a bool field to false (``{"save_trace": "--no-trace"}``)."""
    docs = field_docs(cls)
    types_of = fields_of(cls)
    aliases = aliases or {}
    negations = negations or {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name in skip:
            continue
        tp = types_of[f.name]
        doc = docs.get(f.name, "")
        default = _default_text(f)
        if default is not None and "default:" not in doc:
            doc = f"{doc} (default: {default})" if doc else f"default: {default}"
        names = [flag_name(f.name), *aliases.get(f.name, ())]
        help_text = doc.replace("%", "%%")
        if tp is bool:
            parser.add_argument(
                *names,
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            parser.add_argument(
                *names, dest=f.name, default=None, metavar=_metavar(tp), help=help_text
            )
        if f.name in negations:
            parser.add_argument(
                negations[f.name],
                dest=f.name,
                action="store_const",
                const=False,
                help=f"the same as --no-{f.name.replace('_', '-')}",
            )


def flag_overrides(args: argparse.Namespace, cls: type, skip: Sequence[str] = ()) -> list[Override]:
    """The flags of ``cls`` given on this command line, as overrides for ``load_config``."""
    out = []
    for name in fields_of(cls):
        value = getattr(args, name, None)
        if name not in skip and value is not None:
            out.append(Override((name,), value, flag_name(name)))
    return out


def options_help(cls: type, prefix: str = "") -> list[str]:
    """One line per option of ``cls`` (nested sections flattened as ``train.lr``): name, what
    it accepts, and its doc; for listings such as ``chunkwise train --help``."""
    lines = []
    docs = field_docs(cls)
    for name, tp in fields_of(cls).items():
        section = section_type(tp)
        if section is not None:
            lines += options_help(section, f"{prefix}{name}.")
            continue
        doc = docs.get(name, "")
        lines.append(f"{prefix}{name}: {describe(tp)}" + (f". {doc}" if doc else ""))
    return lines


__all__ = ["add_flags", "flag_name", "flag_overrides", "options_help"]
