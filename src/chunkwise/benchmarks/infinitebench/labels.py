"""InfiniteBench's 12 tasks and their gold answers in each task's native type.

The HF ``features=`` cast turns every answer into ``list[str]``, which the official scorer does
not handle: one-element lists are unwrapped for single-answer tasks, code_run / math_find /
math_calc get ints (or a float for a fractional math_find answer), multiple choice and
code_debug get ``[option_text, letter]``. Integers written as text are read at any length
(:func:`~chunkwise.benchmarks.infinitebench.numbers.parse_int`; ``int()`` stops at 4,300 digits).
"""

from __future__ import annotations

import math
import re
from typing import Any

from chunkwise.benchmarks.infinitebench.numbers import decimal, parse_int
from chunkwise.errors import BadInput

TASKS: tuple[str, ...] = (
    "passkey",
    "number_string",
    "kv_retrieval",
    "longbook_sum_eng",
    "longbook_qa_eng",
    "longbook_qa_chn",
    "longbook_choice_eng",
    "longdialogue_qa_eng",
    "code_debug",
    "code_run",
    "math_find",
    "math_calc",
)

_STRING_ANSWER = {"passkey", "number_string", "kv_retrieval"}
_TEXT_ANSWERS = {"longbook_sum_eng", "longbook_qa_eng", "longbook_qa_chn", "longdialogue_qa_eng"}
_CHOICE = {"longbook_choice_eng", "code_debug"}


def check_task(task: str) -> None:
    if task not in TASKS:
        raise BadInput(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}")


def _single(task: str, label: Any) -> Any:
    if isinstance(label, list):
        if len(label) != 1:
            raise BadInput(f"{task}: expected one answer, got a list of {len(label)}")
        return label[0]
    return label


def _show(value: Any, limit: int = 60) -> str:
    """``repr(value)``, shortened in the middle when long (a gold answer can be huge)."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit limit, somewhere inside
        return f"of type {type(value).__name__}"
    if len(text) <= limit:
        return text
    return f"{text[: limit // 2]}...{text[-limit // 2 :]} ({len(text)} characters)"


def _as_int(task: str, value: Any) -> int:
    if isinstance(value, bool):
        raise BadInput(f"{task}: answer {_show(value)} is not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        parsed = parse_int(value)  # int() of any length (int() itself stops at 4,300 digits)
        if parsed is not None:
            return parsed
    raise BadInput(f"{task}: answer {_show(value)} is not an integer")


def _as_number(task: str, value: Any) -> int | float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise BadInput(f"{task}: answer {_show(value)} is not a finite number")
        return value
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"[+-]?\d+", s):
            parsed = parse_int(s)
            if parsed is not None:
                return parsed
        try:
            f = float(s)
        except ValueError:
            pass
        else:
            if math.isfinite(f):
                return f
    raise BadInput(f"{task}: answer {_show(value)} is not a number")


def _as_text(task: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return decimal(value)  # str() of an int stops at 4,300 digits
    if isinstance(value, float):
        return str(value)
    raise BadInput(f"{task}: answer {_show(value)} is not a string")


def _letters_for(task: str) -> str:
    return "ABCD" if task == "longbook_choice_eng" else "ABCDEFGHIJ"


def normalize_label(task: str, label: Any, options: list[str] | None = None) -> Any:
    """Bring a gold answer to the type the task's rule compares against.

    ``options`` (the record's options) turn a bare option text into ``[text, letter]`` for
    multiple choice and code_debug.
    """
    check_task(task)
    if task in _STRING_ANSWER:
        return _as_text(task, _single(task, label))
    if task == "code_run":
        return _as_int(task, _single(task, label))
    if task == "math_find":
        return _as_number(task, _single(task, label))
    if task == "math_calc":
        if isinstance(label, list) and len(label) == 1 and isinstance(label[0], list):
            label = label[0]
        if not isinstance(label, list) or not label:
            raise BadInput(f"{task}: answer must be a non-empty list of intermediate values")
        return [_as_int(task, v) for v in label]
    if task in _TEXT_ANSWERS:
        items = label if isinstance(label, list) else [label]
        if not items:
            raise BadInput(f"{task}: answer list is empty")
        return [_as_text(task, v) for v in items]
    # multiple choice / code_debug: [option text, letter]
    letters = _letters_for(task)
    if (
        isinstance(label, list)
        and len(label) == 2
        and all(isinstance(v, str) for v in label)
        and len(label[1]) == 1
        and label[1] in letters
    ):
        return list(label)
    text = _single(task, label)
    if options and isinstance(text, str) and text in options:
        idx = options.index(text)
        if idx < len(letters):
            return [text, letters[idx]]
    raise BadInput(
        f"{task}: answer {_show(label)} must be [option text, letter] (or an option text "
        "together with the record's options)"
    )


__all__ = ["TASKS", "check_task", "normalize_label"]
