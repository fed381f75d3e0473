"""L-Eval's loader: the long-document subsets (OpenLMLab/LEval ``LEval-data/``) as examples.

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

from chunkwise.benchmarks.checks import (
    bad,
    need_list,
    need_object,
    need_str,
    need_str_list,
    wrong_type,
)
from chunkwise.benchmarks.types import TaskData
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


def _outputs(rec: dict[str, Any], where: str) -> list[str | list[str]]:
    """The gold answers: one string (or list of strings) per question."""
    outputs = need_list(rec, "outputs", where)
    for k, a in enumerate(outputs):
        if a == []:
            raise bad(where, f"'outputs[{k}]'", "is an empty list (no gold answer)")
        for j, item in enumerate(a if isinstance(a, list) else [a]):
            if not isinstance(item, str):
                at = f"outputs[{k}][{j}]" if isinstance(a, list) else f"outputs[{k}]"
                raise wrong_type(where, repr(at), "a string", item)
    return outputs


def _quality_example(q: str, a: Any, where: str, k: int) -> dict[str, Any]:
    try:
        question, options = split_options(q)
    except BadInput as e:
        raise bad(where, f"'instructions[{k}]'", str(e)) from None
    if len(options) != 4:
        raise bad(where, f"'instructions[{k}]'", f"has {len(options)} options (A)-(D), not 4")
    if not isinstance(a, str):
        raise wrong_type(where, repr(f"outputs[{k}]"), "a string (the gold option)", a)
    try:
        letter = gold_letter(a, options)
    except BadInput as e:
        raise bad(where, f"'outputs[{k}]'", str(e)) from None
    answer = {"letter": letter, "text": options["ABCD".index(letter)]}
    return {"input": question, "options": options, "answer": answer}


def document_examples(subset: str, rec: Any, where: str, doc_id: str) -> list[dict[str, Any]]:
    """The examples of one L-Eval line (checked first: a malformed one is a BadInput naming
    ``where`` and the field)."""
    need_object(rec, where)
    context = need_str(rec, "input", where)
    questions = need_str_list(rec, "instructions", where)
    outputs = _outputs(rec, where)
    if len(questions) != len(outputs):
        raise bad(where, None, f"{len(questions)} instructions but {len(outputs)} outputs")
    out = []
    for k, (q, a) in enumerate(zip(questions, outputs, strict=True)):
        ex: dict[str, Any] = {"id": f"{doc_id}-{k}", "context": context, "doc_id": doc_id}
        if subset == "quality":
            ex.update(_quality_example(q, a, where, k))
        else:
            ex.update(input=q.strip(), options=[], answer=a if isinstance(a, list) else [a])
        out.append(ex)
    return out


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
        examples += document_examples(subset, rec, f"{p}:{line_no}", f"{subset}-{n_docs}")
        n_docs += 1
    total = len(examples)
    if limit is not None:
        examples = examples[:limit]
    return examples, {"source": "leval", "path": str(p.resolve()), "docs": n_docs, "total": total}


def parse_data_spec(text: str) -> Path:
    """The folder of L-Eval files ``--data`` names; there is no default."""
    text = (text or "").strip()
    if text in ("", "hub", "default"):
        raise BadInput(
            "the leval benchmark needs --data: a folder of L-Eval files (quality.jsonl, "
            "scientific_qa.jsonl, narrative_qa.jsonl from OpenLMLab/LEval LEval-data/)"
        )
    path = Path(text).expanduser()
    if not path.is_dir():
        raise BadInput(f"--data {text!r}: not a folder of L-Eval files ({path})")
    return path


def load_task(
    task: str,
    spec: Path,
    *,
    limit: int | None = None,
    revision: str | None = None,
    seed: int = 0,
    count_tokens: Any = None,
) -> TaskData:
    """One subset's examples; QuALITY's gold answers carry their options for the scorer."""
    examples, source = load_leval(task, spec, limit=limit)
    for ex in examples:
        if task == "quality":
            ex["answer"] = {**ex["answer"], "options": ex["options"]}
    return TaskData(task, examples, source, source["total"])


__all__ = [
    "SUBSETS",
    "document_examples",
    "gold_letter",
    "load_leval",
    "load_task",
    "parse_data_spec",
    "split_options",
]
