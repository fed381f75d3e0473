"""Record checks the benchmark loaders run on every record before any model call.

A loader reads a file of records and turns each into a benchmark example ``{id, context,
input, answer, options}``. A record of the wrong shape must end the run at once, as one
:class:`~chunkwise.errors.BadInput` naming where it is (``file:line``) and which field is
wrong, not as a traceback halfway through the predictions. Each helper here takes a
``where`` (``file:line``, or ``file: paper 'p1'`` for a file that is one JSON object) and a
field path for nested values (``qas[2].question_id``)::

    where = f"{path}:{line}"
    rec = need_object(rec, where)
    context = need_str(rec, "input", where)
    ids.add(need_id(rec, "id", where), where)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from chunkwise.errors import BadInput

#: what to do about a bad record, said once at the end of each message
FIX = "fix or delete that record"


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type (object, array, string, number, boolean, null)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return type(value).__name__


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bad(where: str, field: str | None, problem: str) -> BadInput:
    """A :class:`BadInput` ``"<where>: <field> <problem>; fix or delete that record"``."""
    head = f"{where}: {field!s} " if field else f"{where}: "
    return BadInput(f"{head}{problem}; {FIX}")


def wrong_type(where: str, field: str, want: str, value: Any) -> BadInput:
    return bad(where, field, f"must be {want}, got {json_type(value)} {_shown(value)}")


def need_object(
    value: Any, where: str, field: str | None = None, what: str = "the record"
) -> dict[str, Any]:
    """``value`` if it is a JSON object: the field at path ``field``, or (None) the record
    itself, called ``what`` in the error."""
    if not isinstance(value, dict):
        name = repr(field) if field else what
        raise bad(where, None, f"{name} must be a JSON object, got {json_type(value)}")
    return value


def _get(rec: Mapping[str, Any], key: str, where: str, path: str, required: bool) -> Any:
    if key not in rec or rec[key] is None:
        if required:
            reason = "is missing" if key not in rec else "is null"
            raise bad(where, repr(path), reason)
        return None
    return rec[key]


def need_str(
    rec: Mapping[str, Any],
    key: str,
    where: str,
    *,
    required: bool = True,
    default: str = "",
    prefix: str = "",
) -> str:
    """``rec[key]`` as a string; missing or null gives ``default`` unless ``required``.
    ``prefix`` (``qas[2].``) puts the field in its place in the record."""
    value = _get(rec, key, where, prefix + key, required)
    if value is None:
        return default
    if not isinstance(value, str):
        raise wrong_type(where, repr(prefix + key), "a string", value)
    return value


def need_list(
    rec: Mapping[str, Any], key: str, where: str, *, required: bool = True, prefix: str = ""
) -> list[Any]:
    """``rec[key]`` as a list (missing or null: ``[]`` unless ``required``)."""
    value = _get(rec, key, where, prefix + key, required)
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong_type(where, repr(prefix + key), "an array", value)
    return value


def need_str_list(
    rec: Mapping[str, Any], key: str, where: str, *, required: bool = True, prefix: str = ""
) -> list[str]:
    """``rec[key]`` as a list of strings."""
    items = need_list(rec, key, where, required=required, prefix=prefix)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise wrong_type(where, repr(f"{prefix}{key}[{i}]"), "a string", item)
    return items


def need_id(
    rec: Mapping[str, Any], key: str, where: str, *, required: bool = True, prefix: str = ""
) -> str | int | None:
    """``rec[key]`` as an example id: a non-empty string or an integer (None if absent and
    not ``required``)."""
    value = _get(rec, key, where, prefix + key, required)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise wrong_type(where, repr(prefix + key), "a string or an integer", value)
    if isinstance(value, str) and not value.strip():
        raise bad(where, repr(prefix + key), "is empty")
    return value


class UniqueIds:
    """Example ids seen so far; a second one is an error naming both places."""

    def __init__(self) -> None:
        self.first: dict[Hashable, str] = {}

    def add(self, rid: Hashable, where: str, key: str = "id") -> None:
        if rid in self.first:
            raise BadInput(
                f"{where}: duplicate {key} {rid!r} (first at {self.first[rid]}); ids must be "
                f"unique: {FIX}"
            )
        self.first[rid] = where


def check_examples(examples: Any, what: str) -> None:
    """The runner's side of the example contract, for examples any loader made: a list of
    objects with a unique ``id`` (string or integer), string ``context`` and ``input``, and
    ``options`` a list of strings. ``what`` (``"qasper qasper"``) names the task."""
    if not isinstance(examples, list):
        raise BadInput(f"{what}: the loader gave {json_type(examples)}, not a list of examples")
    ids = UniqueIds()
    for i, ex in enumerate(examples):
        where = f"{what} example #{i}"
        need_object(ex, where)
        rid = need_id(ex, "id", where)
        where = f"{what} example {rid!r}"
        ids.add(rid, where)
        need_str(ex, "context", where)
        need_str(ex, "input", where, required=False)
        need_str_list(ex, "options", where, required=False)
        if "answer" not in ex:
            raise bad(where, "'answer'", "is missing")


__all__ = [
    "FIX",
    "UniqueIds",
    "bad",
    "check_examples",
    "json_type",
    "need_id",
    "need_list",
    "need_object",
    "need_str",
    "need_str_list",
    "wrong_type",
]
