"""Files that survive being killed, and JSON read with limits; one module per job:

* :mod:`~chunkwise.io.atomic`: whole-file writes that leave the old file or the new one,
  never half of either (:func:`atomic_write_text`, :func:`atomic_write_json`, ...).
* :mod:`~chunkwise.io.json_input`: :func:`parse_json`, the one JSON parser for input (every
  failure a one-line :class:`JSONInputError`), and :func:`read_json`.
* :mod:`~chunkwise.io.json_output`: :func:`dumps_json`, which writes only standard JSON.
* :mod:`~chunkwise.io.jsonl`: :func:`read_jsonl`, naming ``file:line`` for a bad line.
* :mod:`~chunkwise.io.appender`: :class:`JsonlAppender`, kill-safe resumable JSONL appends,
  and :func:`pending`.
* :mod:`~chunkwise.io.paths`: checks, before any work, that an output can be written.

Every name below is importable from ``chunkwise.io``.
"""

from __future__ import annotations

from chunkwise.io.appender import JsonlAppender, pending
from chunkwise.io.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text, fsync_dir
from chunkwise.io.json_input import MAX_JSON_DEPTH, JSONInputError, parse_json, read_json
from chunkwise.io.json_output import dumps_json
from chunkwise.io.jsonl import MAX_LINE_BYTES, iter_lines, read_jsonl
from chunkwise.io.paths import check_output_dir, check_output_file

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "JSONInputError",
    "JsonlAppender",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "check_output_dir",
    "check_output_file",
    "dumps_json",
    "fsync_dir",
    "iter_lines",
    "parse_json",
    "pending",
    "read_json",
    "read_jsonl",
]
