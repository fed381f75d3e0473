"""DTCRS's question side: the classifier (does the question need several sections?) and the
decomposition into sub-questions that guide the tree, with the parsers of their replies."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from chunkwise.strategies.base import Query
from chunkwise.strategies.trees.calls import Prompts, TreeRun

if TYPE_CHECKING:
    from chunkwise.strategies.dtcrs.strategy import DTCRS

_NUMBERED = re.compile(r"^\s*(?:\(?\d+[.):]|[-*•]|Q\d+[.:]|Sub-?question\s*\d*[.:])\s*", re.I)
_YES = re.compile(r"\byes\b", re.I)


def parse_subquestions(text: str, limit: int = 0) -> list[str]:
    """Sub-questions from a numbered or bulleted list, one per line; bare lines count only
    when they end with a question mark. Duplicates (case-insensitive) are dropped.
    (``subquestions=numbered``, this project's earlier rule.)"""
    out: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        numbered = bool(_NUMBERED.match(line))
        body = _NUMBERED.sub("", line).strip().strip('"').strip()
        if not body or (not numbered and not body.endswith("?")):
            continue
        if len(body.split()) < 2:
            continue
        key = " ".join(body.lower().split())
        if key in seen:
            continue
        seen.add(key)
        out.append(body)
        if limit and len(out) >= limit:
            break
    return out


def parse_yes(text: str) -> bool:
    """The classifier's label: "yes" anywhere in the reply (the DTCRS code's rule)."""
    return bool(_YES.search(text))


def parse_lines(text: str, limit: int = 0) -> list[str]:
    """Every non-empty line is a sub-question (the reference's rule), its list marker
    ("1.", "-", "Sub-question 2:") removed; a line with nothing after its marker is skipped."""
    out = []
    for line in text.splitlines():
        body = _NUMBERED.sub("", line.strip()).strip()
        if body:
            out.append(body)
            if limit and len(out) >= limit:
                break
    return out


SUBQUESTION_PARSERS = {"lines": parse_lines, "numbered": parse_subquestions}


def classify(d: DTCRS, run: TreeRun, p: Prompts, toc: str, query: Query) -> bool:
    """Whether the question needs information from several sections (a tree), else retrieval."""
    name = "classify" if d.toc else "classify_no_toc"
    out = run.call(
        "classify",
        [p.render(name, toc=toc, question=query.question.strip())],
        p.params("classify", d.temperature),
    )[0]
    return parse_yes(out.text)


def decompose(d: DTCRS, run: TreeRun, p: Prompts, toc: str, query: Query) -> tuple[list[str], bool]:
    """Sub-questions (at least ``min_subquestions`` when the model gives them). Returns
    (sub-questions, whether the fallback had to add the original question)."""
    name = "decompose" if d.toc else "decompose_no_toc"
    prompt = p.render(name, toc=toc, question=query.question.strip())
    lead = p.templates.get("decompose_lead", "")
    parse = SUBQUESTION_PARSERS[d.subquestions]
    best: list[str] = []
    for attempt in range(1 + d.decompose_retries):
        params = p.params("decompose", d.temperature)
        if attempt:
            params = params.with_(temperature=0.7, seed=d.seed + attempt)
        out = run.call("decompose", [prompt], params)[0]
        subs = parse(lead + out.text, d.max_subquestions)
        if len(subs) > len(best):
            best = subs
        if len(best) >= d.min_subquestions:
            return best, False
    q = query.question.strip()
    merged = [*best, q] if all(s.lower() != q.lower() for s in best) else best
    return (merged[: d.max_subquestions] if d.max_subquestions else merged), True


__all__ = [
    "SUBQUESTION_PARSERS",
    "classify",
    "decompose",
    "parse_lines",
    "parse_subquestions",
    "parse_yes",
]
