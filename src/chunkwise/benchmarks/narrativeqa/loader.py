"""NarrativeQA's loader: questions over full stories (Kočiský et al., 2018) as examples.

Sources, one record shape ``{id, context, input, answer: [references], options: []}``:

* ``hub[:SPLIT]`` — ``deepmind/narrativeqa`` on the Hugging Face Hub at a pinned revision (the
  parquet conversion, :data:`HUB_REVISION`; default split ``test``). Every row repeats its whole
  story, so a split takes a few GB of memory.
* a local path: a folder or file of parquet or JSON-lines rows, in the Hub's nested layout
  (``document.text``, ``question.text``, ``answers[].text``) or flat
  (``context``/``document``, ``question``/``input``, ``answers``/``answer``).

Options after ``?``: ``min_words=N`` keeps only stories of at least N words (the Chow–Liu paper
restricts NarrativeQA to contexts over 256K tokens; at ~1.3 tokens per word that is
``min_words=197000``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from chunkwise.benchmarks.checks import UniqueIds, bad, need_id, need_object, wrong_type
from chunkwise.benchmarks.types import TaskData
from chunkwise.errors import BadInput

HUB_REPO = "deepmind/narrativeqa"
#: "Convert dataset to Parquet (#6)": data/{train,validation,test}-*.parquet
HUB_REVISION = "2e643e7"
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class DataSpec:
    kind: str  # hub | local
    split: str = "test"
    path: Path | None = None
    min_words: int = 0


def parse_data_spec(data: str) -> DataSpec:
    """``hub`` | ``hub:SPLIT`` | a local folder or file, each optionally ``?min_words=N``."""
    text = (data or "").strip()
    text, _, query = text.partition("?")
    try:
        opts = dict(parse_qsl(query, strict_parsing=bool(query)))
    except ValueError:
        raise BadInput(f"--data {data!r}: options after '?' must be key=value") from None
    unknown = set(opts) - {"min_words"}
    if unknown:
        raise BadInput(f"--data {data!r}: unknown option(s) {sorted(unknown)}; valid: min_words")
    try:
        min_words = int(opts.get("min_words", 0))
    except ValueError:
        raise BadInput(f"--data {data!r}: min_words must be an integer") from None
    if text == "hub" or text.startswith("hub:"):
        split = text.partition(":")[2] or "test"
        if split not in SPLITS:
            raise BadInput(f"--data {data!r}: unknown split {split!r}; valid: {', '.join(SPLITS)}")
        return DataSpec("hub", split=split, min_words=min_words)
    path = Path(text).expanduser()
    if text and path.exists():
        return DataSpec("local", path=path, min_words=min_words)
    raise BadInput(
        f"--data {data!r}: expected hub, hub:SPLIT, or an existing folder or file of NarrativeQA "
        "rows (parquet or JSON lines)"
    )


def _text(value: Any, where: str, field: str) -> str:
    """A string field, or the ``text`` of an object (the Hub's nested layout)."""
    if isinstance(value, Mapping):
        value = value.get("text")
        field += ".text"
    if not isinstance(value, str):
        raise wrong_type(where, repr(field), "a string (or an object with a text string)", value)
    return value


def _pick(row: Mapping[str, Any], keys: tuple[str, str], where: str) -> tuple[Any, str]:
    """(value, field name) of the first of ``keys`` the row has."""
    for key in keys:
        if row.get(key) is not None:
            return row[key], key
    raise bad(where, None, f"no {keys[0]!r} (or {keys[1]!r}) field")


def _references(row: Mapping[str, Any], where: str) -> list[str]:
    answers, key = _pick(row, ("answers", "answer"), where)
    items = [answers] if isinstance(answers, (str, Mapping)) else answers
    if not isinstance(items, list):
        raise wrong_type(where, repr(key), "a list of answers", answers)
    refs = [_text(a, where, f"{key}[{i}]") for i, a in enumerate(items)]
    refs = [r for r in refs if r.strip()]
    if not refs:
        raise bad(where, repr(key), "holds no non-empty reference answer")
    return refs


def to_example(row: Any, index: int, where: str) -> dict[str, Any]:
    """One NarrativeQA row (nested Hub layout or flat) as a benchmark example; ``where``
    (``file:line``) names the row in any error."""
    need_object(row, where)
    doc, doc_key = _pick(row, ("document", "context"), where)
    context = _text(doc, where, doc_key)
    question_value, q_key = _pick(row, ("question", "input"), where)
    question = _text(question_value, where, q_key)
    if not context.strip() or not question.strip():
        raise bad(where, None, "the story or the question is empty")
    refs = _references(row, where)
    nested = isinstance(doc, Mapping)
    doc_id = need_id(doc if nested else row, "id" if nested else "doc_id", where, required=False)
    words = doc.get("word_count") if nested else None
    if words is not None and (isinstance(words, bool) or not isinstance(words, int)):
        raise wrong_type(where, f"'{doc_key}.word_count'", "an integer", words)
    rid = need_id(row, "id", where, required=False)
    return {
        "id": rid if rid is not None else f"{doc_id or 'doc'}-{index}",
        "context": context,
        "input": question.strip(),
        "answer": refs,
        "options": [],
        "doc_id": doc_id,
        "words": words if words else len(context.split()),
    }


def _rows_from_file(path: Path) -> Iterator[tuple[str, Any]]:
    """``(where, row)``: ``file:line`` for JSON lines, ``file row N`` for parquet."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist()):
            yield f"{path} row {i + 1}", row
    else:
        from chunkwise.io import read_jsonl

        for line, rec in read_jsonl(path):
            yield f"{path}:{line}", rec


def _local_rows(path: Path, split: str) -> tuple[Iterable[tuple[str, Any]], list[str]]:
    if path.is_file():
        return _rows_from_file(path), [str(path)]
    files = sorted(path.rglob(f"{split}-*.parquet")) or sorted(path.rglob("*.parquet"))
    files = files or sorted(path.rglob("*.jsonl"))
    if not files:
        raise BadInput(f"{path}: no parquet or .jsonl files of NarrativeQA rows in it")

    def rows() -> Iterator[tuple[str, Any]]:
        for f in files:
            yield from _rows_from_file(f)

    return rows(), [str(f) for f in files]


def _hub_rows(split: str, revision: str) -> Iterable[Mapping[str, Any]]:
    try:
        import datasets

        return datasets.load_dataset(HUB_REPO, split=split, revision=revision)
    except Exception as e:  # network, auth, missing revision
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BadInput(
            f"cannot load {HUB_REPO}@{revision} split {split} from the Hugging Face Hub: {first}. "
            "Without Hub access, download its parquet files and pass --data FOLDER"
        ) from None


def load_narrativeqa(
    data: str | DataSpec, *, limit: int | None = None, revision: str | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(examples, source record) from a data spec (see the module docstring)."""
    spec = parse_data_spec(data) if isinstance(data, str) else data
    if spec.kind == "hub":
        rev = revision or HUB_REVISION
        name = f"{HUB_REPO}@{rev}:{spec.split}"
        rows: Iterable[tuple[str, Any]] = (
            (f"{name} row {i + 1}", row) for i, row in enumerate(_hub_rows(spec.split, rev))
        )
        source: dict[str, Any] = {"source": "hub", "repo": HUB_REPO, "revision": rev}
    else:
        assert spec.path is not None
        rows, files = _local_rows(spec.path, spec.split)
        source = {"source": "local", "path": str(spec.path.resolve()), "files": len(files)}
    examples = []
    ids = UniqueIds()
    total = 0
    for i, (where, row) in enumerate(rows):
        ex = to_example(row, i, where)
        ids.add(ex["id"], where)  # every row, kept or not: a fallback id can repeat a real one
        if spec.min_words and ex["words"] < spec.min_words:
            continue
        total += 1
        if limit is None or len(examples) < limit:
            examples.append(ex)
    source.update(split=spec.split, min_words=spec.min_words, total=total)
    return examples, source


def load_task(
    task: str,
    spec: DataSpec,
    *,
    limit: int | None = None,
    revision: str | None = None,
    seed: int = 0,
    count_tokens: Any = None,
) -> TaskData:
    """The one task, ``narrativeqa``."""
    if task != "narrativeqa":
        raise BadInput(f"unknown NarrativeQA task {task!r}; valid: narrativeqa")
    examples, source = load_narrativeqa(spec, limit=limit, revision=revision)
    return TaskData(task, examples, source, source["total"])


def write_jsonl(examples: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Write examples as flat JSON lines (readable back by :func:`load_narrativeqa`)."""
    from chunkwise.io import atomic_write_text

    return atomic_write_text(path, "".join(json.dumps(dict(e)) + "\n" for e in examples))


__all__ = [
    "HUB_REPO",
    "HUB_REVISION",
    "DataSpec",
    "load_narrativeqa",
    "load_task",
    "parse_data_spec",
    "to_example",
    "write_jsonl",
]
