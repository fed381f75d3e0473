"""Where synthesis documents come from: ``--docs SOURCE``.

* a ``.jsonl``/``.json`` file in LongAlign's format (``{"messages": [{role, content}, ...]}``):
  the document is the longest user turn. Lines with a ``text``/``document``/``context``/``input``
  field instead are read too. The id is the line's ``id`` field when it has one, else a hash of
  the document (so a rerun finds the same ids whatever the order).
* a folder: every ``*.txt``/``*.md`` file under it (sorted); the id is the relative path.
  Other files are reported as ``not_a_text_file``, undecodable ones as ``not_utf8_text``.
* a ``datasets`` folder written by ``save_to_disk``, or a hub dataset id (``--text-column``
  names the column; by default the first of text/document/context/content/input present).

Every item is a :class:`SourceDoc` or a :class:`SourceSkip` (input that cannot be used, with a
reason): bad input is counted, never fatal, except a source that does not exist at all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io import parse_json

TEXT_KEYS = ("text", "document", "context", "content", "input")
TEXT_SUFFIXES = (".txt", ".md")


@dataclass
class SourceDoc:
    source_id: str
    text: str
    origin: str  # file:line, path, or dataset:row — for messages


@dataclass
class SourceSkip:
    source_id: str
    reason: str
    origin: str


def doc_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _from_record(rec: dict[str, Any], text_column: str | None) -> str | None:
    if text_column:
        v = rec.get(text_column)
        return v if isinstance(v, str) else None
    msgs = rec.get("messages") or rec.get("conversations")
    if isinstance(msgs, list):
        users = [
            m.get("content", m.get("value"))
            for m in msgs
            if isinstance(m, dict) and m.get("role", m.get("from")) in ("user", "human")
        ]
        users = [u for u in users if isinstance(u, str)]
        return max(users, key=len) if users else None
    for k in TEXT_KEYS:
        if isinstance(rec.get(k), str):
            return rec[k]
    return None


def _jsonl(path: Path, text_column: str | None) -> Iterator[SourceDoc | SourceSkip]:
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            origin = f"{path}:{lineno}"
            if not raw.strip():
                continue
            try:
                rec = parse_json(raw)  # any failure, deep nesting included, is a ValueError
            except ValueError:
                yield SourceSkip(f"line-{lineno}", "bad_json_line", origin)
                continue
            if not isinstance(rec, dict):
                yield SourceSkip(f"line-{lineno}", "bad_json_line", origin)
                continue
            text = _from_record(rec, text_column)
            rid = rec.get("id", rec.get("_id"))
            if text is None:
                yield SourceSkip(
                    str(rid) if rid is not None else f"line-{lineno}",
                    "no_document_in_record",
                    origin,
                )
                continue
            sid = str(rid) if isinstance(rid, (str, int)) and str(rid).strip() else doc_hash(text)
            yield SourceDoc(sid, text, origin)


def _folder(root: Path) -> Iterator[SourceDoc | SourceSkip]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    for p in files:
        rel = p.relative_to(root).as_posix()
        if p.suffix.lower() not in TEXT_SUFFIXES:
            yield SourceSkip(rel, "not_a_text_file", str(p))
            continue
        try:
            data = p.read_bytes()
            if b"\x00" in data:
                raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            yield SourceSkip(rel, "not_utf8_text", str(p))
            continue
        except OSError:
            yield SourceSkip(rel, "unreadable_file", str(p))
            continue
        yield SourceDoc(rel, text, str(p))


def _dataset(ds: Any, name: str, text_column: str | None) -> Iterator[SourceDoc | SourceSkip]:
    cols = list(ds.column_names)
    col = text_column or next((c for c in TEXT_KEYS if c in cols), None)
    if col is None and "messages" not in cols:
        raise BadInput(
            f"dataset {name} has no text column (columns: {', '.join(cols)}); "
            "name one with --text-column"
        )
    if col is not None and col not in cols:
        raise BadInput(f"dataset {name} has no column {col!r} (columns: {', '.join(cols)})")
    has_id = "id" in cols

    def rows() -> Iterator[SourceDoc | SourceSkip]:
        for i, row in enumerate(ds):
            text = row[col] if col is not None else _from_record(row, None)
            if not isinstance(text, str):
                yield SourceSkip(f"row-{i}", "no_document_in_record", f"{name}[{i}]")
                continue
            sid = str(row["id"]) if has_id and row["id"] is not None else doc_hash(text)
            yield SourceDoc(sid, text, f"{name}[{i}]")

    return rows()


def _is_saved_dataset(path: Path) -> bool:
    """A ``datasets.save_to_disk`` folder (a Dataset or a DatasetDict)."""
    return any(
        (path / n).exists() for n in ("dataset_info.json", "state.json", "dataset_dict.json")
    )


def count_source(source: str) -> int | None:
    """How many items :func:`iter_source` will yield for a local file or plain folder (for a
    progress bar's total); None for datasets and hub ids (not worth opening twice)."""
    path = Path(source).expanduser()
    if path.is_file() and path.suffix.lower() in (".jsonl", ".json"):
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    if path.is_dir() and not _is_saved_dataset(path):
        return sum(1 for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
    return None


def iter_source(
    source: str, *, text_column: str | None = None, split: str = "train"
) -> Iterator[SourceDoc | SourceSkip]:
    """Documents of ``source`` (see the module docstring), in a stable order."""
    path = Path(source).expanduser()
    if path.is_file():
        if path.suffix.lower() in (".jsonl", ".json"):
            return _jsonl(path, text_column)
        raise BadInput(
            f"--docs {source}: expected a .jsonl file, a folder of .txt files, or a "
            "dataset (save_to_disk folder or hub id)"
        )
    if path.is_dir():
        if _is_saved_dataset(path):
            import datasets

            ds = datasets.load_from_disk(str(path))
            if isinstance(ds, datasets.DatasetDict):
                if split not in ds:
                    raise BadInput(f"--docs {source}: no split {split!r} (has {', '.join(ds)})")
                ds = ds[split]
            return _dataset(ds, str(path), text_column)
        return _folder(path)
    if "/" in source and not source.startswith((".", "/")):
        return _hub(source, text_column, split)
    raise BadInput(f"--docs {source}: no such file or folder, and not a hub dataset id (org/name)")


def _hub(name: str, text_column: str | None, split: str) -> Iterator[SourceDoc | SourceSkip]:
    import datasets

    try:
        ds = datasets.load_dataset(name, split=split)
    except Exception as e:  # network, missing dataset, bad split: one clear line
        raise BadInput(
            f"--docs {name}: cannot load the hub dataset ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}); offline, pass a local "
            "save_to_disk folder or JSONL instead"
        ) from None
    return _dataset(ds, name, text_column)
