"""QuALITY from the official release files (nyu-mll/quality, v1.0.1), with the HARD flag.

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

from chunkwise.errors import BadInput

DEV_FILE = "QuALITY.v1.0.1.htmlstripped.dev"
LETTERS = "ABCD"


def _resolve(path: str | Path) -> Path:
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / DEV_FILE
    if not p.is_file():
        raise BadInput(
            f"QuALITY data {path!s}: expected the official {DEV_FILE} file (or a folder holding it)"
        )
    return p


def load_quality(
    path: str | Path, *, hard_only: bool = False, limit: int | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Examples (all, or only the HARD ones) and a source record."""
    p = _resolve(path)
    examples: list[dict[str, Any]] = []
    from chunkwise.io import read_jsonl

    for line_no, art in read_jsonl(p):  # bad lines (any way) are one-line BadInput
        doc_id = str(art.get("set_unique_id") or art.get("article_id"))
        for k, q in enumerate(art.get("questions") or []):
            options = [str(o) for o in q.get("options") or []]
            gold = q.get("gold_label")
            if len(options) != 4 or not isinstance(gold, int) or not 1 <= gold <= 4:
                raise BadInput(
                    f"{p}:{line_no} question {k}: need 4 options and gold_label 1-4 "
                    f"(got {len(options)} options, gold_label {gold!r})"
                )
            difficult = int(q.get("difficult") or 0)
            if hard_only and not difficult:
                continue
            letter = LETTERS[gold - 1]
            examples.append(
                {
                    "id": q.get("question_unique_id") or f"{doc_id}-{k}",
                    "context": art["article"],
                    "input": q["question"].strip(),
                    "options": options,
                    "answer": {"letter": letter, "text": options[gold - 1], "options": options},
                    "difficult": difficult,
                    "doc_id": doc_id,
                }
            )
    total = len(examples)
    if limit is not None:
        examples = examples[:limit]
    return examples, {
        "source": "local",
        "path": str(p.resolve()),
        "hard_only": hard_only,
        "total": total,
    }


__all__ = ["DEV_FILE", "load_quality"]
