"""L-Eval's long-document subsets (OpenLMLab/LEval ``LEval-data/``) as benchmark examples.

Each line of an L-Eval file is one document with several questions: ``{input: document,
instructions: [questions], outputs: [gold answers], source, evaluation}``. One example is
made per question: ``{id: "<subset>-<doc>-<question>", context, input, answer, options,
doc_id}``.

* ``quality`` (QuALITY, multiple choice): the four options are written into the question
  as ``(A) ...`` lines; they are split off into ``options`` and the gold answer becomes its
  letter (``answer = {"letter", "text"}``). L-Eval keeps no difficulty flag, so the HARD
  subset cannot be formed from it (the official QuALITY files have ``difficult``).
* ``scientific_qa`` (QASPER): one gold string per question, scored as one QASPER reference
  (type inferred: "Unanswerable" → none, yes/no → boolean, else abstractive).
* ``narrative_qa`` (NarrativeQA), when present: the gold string(s) as references.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput

SUBSETS = ("quality", "scientific_qa", "narrative_qa")
_OPTION = re.compile(r"^\s*\(([A-D])\)\s*(.*?)\s*$")


def split_options(instruction: str) -> tuple[str, list[str]]:
    """(question, options) from an L-Eval QuALITY instruction with ``(A) ...`` lines.

    An option may wrap over several lines; every line until the next ``(X)`` belongs to it.
    """
    question_lines: list[str] = []
    options: list[str] = []
    letters: list[str] = []
    for line in instruction.splitlines():
        m = _OPTION.match(line)
        if m:
            letters.append(m.group(1))
            options.append(m.group(2))
        elif options:
            if line.strip():
                options[-1] = f"{options[-1]} {line.strip()}".strip()
        else:
            question_lines.append(line)
    if letters and letters != list("ABCD"[: len(letters)]):
        raise BadInput(f"options out of order ({''.join(letters)}) in {instruction[:80]!r}")
    return "\n".join(question_lines).strip(), options


def gold_letter(output: str, options: list[str]) -> str:
    m = re.match(r"^\s*\(([A-D])\)", output)
    if m:
        return m.group(1)
    norm = " ".join(output.split()).lower()
    for i, o in enumerate(options):
        if " ".join(o.split()).lower() == norm:
            return "ABCD"[i]
    raise BadInput(f"cannot tell which option the gold answer {output[:80]!r} is")


def load_leval(
    subset: str, path: str | Path, *, limit: int | None = None, docs: int | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Examples of one subset from an L-Eval JSON-lines file (or a folder holding
    ``<subset>.jsonl``). ``docs`` keeps the first N documents; ``limit`` the first N
    examples. Returns (examples, source record)."""
    if subset not in SUBSETS:
        raise BadInput(f"unknown L-Eval subset {subset!r}; valid: {', '.join(SUBSETS)}")
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / f"{subset}.jsonl"
    if not p.is_file():
        raise BadInput(f"L-Eval file {p} not found (expected {subset}.jsonl)")
    examples: list[dict[str, Any]] = []
    n_docs = 0
    from chunkwise.io import read_jsonl

    for line_no, rec in read_jsonl(p):  # bad lines (any way) are one-line BadInput
        if docs is not None and n_docs >= docs:
            break
        doc_id = f"{subset}-{n_docs}"
        n_docs += 1
        questions, outputs = rec.get("instructions") or [], rec.get("outputs") or []
        if len(questions) != len(outputs):
            raise BadInput(f"{p}:{line_no}: {len(questions)} questions, {len(outputs)} answers")
        for k, (q, a) in enumerate(zip(questions, outputs, strict=True)):
            ex: dict[str, Any] = {
                "id": f"{doc_id}-{k}",
                "context": rec["input"],
                "doc_id": doc_id,
                "options": [],
            }
            if subset == "quality":
                question, options = split_options(q)
                if len(options) != 4:
                    raise BadInput(f"{p}:{line_no} question {k}: {len(options)} options, not 4")
                try:
                    letter = gold_letter(a, options)
                except BadInput as e:
                    raise BadInput(f"{p}:{line_no} question {k}: {e}") from None
                ex.update(
                    input=question,
                    options=options,
                    answer={"letter": letter, "text": options["ABCD".index(letter)]},
                )
            else:
                ex.update(input=q.strip(), answer=a if isinstance(a, list) else [a])
            examples.append(ex)
    total = len(examples)
    if limit is not None:
        examples = examples[:limit]
    return examples, {"source": "leval", "path": str(p.resolve()), "docs": n_docs, "total": total}


__all__ = ["SUBSETS", "gold_letter", "load_leval", "split_options"]
