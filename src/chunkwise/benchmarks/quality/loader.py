"""QuALITY's loader: the official release files (nyu-mll/quality, v1.0.1), with the HARD flag.

The official files are JSON lines, one article per line: ``{article_id, set_unique_id,
title, article, questions: [{question, options: [4 strings], gold_label (1-based),
difficult (0/1), question_unique_id}]}``. Use the ``htmlstripped`` dev file (test labels are
hidden). A question's HARD flag (``difficult == 1``) marks questions most speed-validation
annotators got wrong; the ``quality_hard`` task keeps only those.

Examples: ``{id: question_unique_id, context: article, input: question, options,
answer: {letter, text, options}, difficult, doc_id: article_id}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chunkwise.benchmarks.checks import (
    UniqueIds,
    bad,
    need_id,
    need_list,
    need_object,
    need_str,
    need_str_list,
    wrong_type,
)
from chunkwise.benchmarks.quality.metrics import LETTERS
from chunkwise.benchmarks.types import TaskData
from chunkwise.errors import BadInput

DEV_FILE = "QuALITY.v1.0.1.htmlstripped.dev"


def _resolve(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / DEV_FILE
    if not p.is_file():
        raise BadInput(
            f"QuALITY data {path!s}: expected the official {DEV_FILE} file (or a folder holding it)"
        )
    return p


def _question(q: Any, where: str, k: int, doc_id: str, article: str) -> dict[str, Any]:
    """One checked question of an article as an example."""
    at = f"questions[{k}]"
    need_object(q, where, at)
    options = need_str_list(q, "options", where, prefix=f"{at}.")
    gold = q.get("gold_label")
    if len(options) != 4:
        raise bad(where, f"'{at}.options'", f"has {len(options)} options, not 4")
    if isinstance(gold, bool) or not isinstance(gold, int) or not 1 <= gold <= 4:
        raise wrong_type(where, repr(f"{at}.gold_label"), "1, 2, 3 or 4", gold)
    difficult = q.get("difficult")
    if difficult is not None and difficult not in (0, 1):  # True/False compare equal too
        raise wrong_type(where, repr(f"{at}.difficult"), "0 or 1", difficult)
    qid = need_id(q, "question_unique_id", where, required=False, prefix=f"{at}.")
    return {
        "id": qid if qid is not None else f"{doc_id}-{k}",
        "context": article,
        "input": need_str(q, "question", where, prefix=f"{at}.").strip(),
        "options": options,
        "answer": {"letter": LETTERS[gold - 1], "text": options[gold - 1], "options": options},
        "difficult": int(difficult or 0),
        "doc_id": doc_id,
    }


def article_examples(art: Any, where: str) -> list[dict[str, Any]]:
    """The examples of one article line, every field checked (a BadInput names ``where``)."""
    need_object(art, where)
    doc_id = need_id(art, "set_unique_id", where, required=False) or need_id(
        art, "article_id", where, required=False
    )
    article = need_str(art, "article", where)
    questions = need_list(art, "questions", where)
    return [_question(q, where, k, str(doc_id or where), article) for k, q in enumerate(questions)]


def load_quality(
    path: str | Path, *, hard_only: bool = False, limit: int | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Examples (all, or only the HARD ones) and a source record. Every line is checked
    before any example is returned: a malformed one is a BadInput naming ``file:line``."""
    p = _resolve(path)
    examples: list[dict[str, Any]] = []
    ids = UniqueIds()
    from chunkwise.io import read_jsonl

    for line_no, art in read_jsonl(p):  # bad lines (any way) are one-line BadInput
        where = f"{p}:{line_no}"
        for ex in article_examples(art, where):
            ids.add(ex["id"], where)
            if ex["difficult"] or not hard_only:
                examples.append(ex)
    total = len(examples)
    if limit is not None:
        examples = examples[:limit]
    return examples, {
        "source": "local",
        "path": str(p.resolve()),
        "hard_only": hard_only,
        "total": total,
    }


def parse_data_spec(text: str) -> str:
    """A ``--data`` value checked before any model is loaded: the official file or its folder."""
    text = (text or "").strip()
    if not text or not Path(text).expanduser().exists():
        raise BadInput(
            f"--data {text!r} for quality: the official QuALITY.v1.0.1.htmlstripped.dev "
            "file or a folder holding it"
        )
    return text


def load_task(
    task: str,
    spec: str,
    *,
    limit: int | None = None,
    revision: str | None = None,
    seed: int = 0,
    count_tokens: Any = None,
) -> TaskData:
    """``quality`` (every question) or ``quality_hard`` (the HARD ones)."""
    examples, source = load_quality(spec, hard_only=task == "quality_hard", limit=limit)
    return TaskData(task, examples, source, source["total"])


__all__ = ["DEV_FILE", "article_examples", "load_quality", "load_task", "parse_data_spec"]
