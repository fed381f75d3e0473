"""QASPER's loader (Dasigi et al., 2021): one example per question, references per annotation.

Sources (``--data``):

* a local official file, ``qasper-{train,dev,test}-v0.3.json`` (paper id → ``{title,
  abstract, full_text: [{section_name, paragraphs}], qas: [{question, question_id,
  answers: [{answer: {...}}]}]}``), or a folder holding ``qasper-dev-v0.3.json``;
* a local JSON-lines file in the Hugging Face layout (``allenai/qasper``: one paper per
  line, ``full_text`` and ``qas`` stored column-wise);
* ``hub:REPO@REVISION[:SPLIT]`` — the Hugging Face layout read with ``datasets`` at a revision
  you pin (no revision is assumed: the Hub copy is a script-era dataset whose Parquet export
  lives on a conversion branch; name the commit you evaluated).

Examples: ``{id: question_id, context, input: question, answer: [references], options: [],
doc_id: paper_id}``; each reference is ``{answer, type, evidence}`` as the official evaluator
builds it (:func:`.metrics.qasper_reference`). The context is the paper as
plain text: title, abstract, then each section's name and paragraphs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from chunkwise.benchmarks.checks import (
    UniqueIds,
    bad,
    json_type,
    need_id,
    need_list,
    need_object,
    need_str,
    need_str_list,
    wrong_type,
)
from chunkwise.benchmarks.qasper.metrics import qasper_reference
from chunkwise.benchmarks.types import TaskData
from chunkwise.errors import BadInput

DEV_FILE = "qasper-dev-v0.3.json"


def paper_text(paper: Mapping[str, Any]) -> str:
    """Title, abstract and sections (name, then paragraphs) as one text."""
    parts = [str(paper.get("title") or "").strip(), "Abstract", str(paper.get("abstract") or "")]
    for name, paragraphs in _sections(paper.get("full_text") or []):
        if name:
            parts.append(name.strip())
        parts.extend(p.strip() for p in paragraphs if isinstance(p, str) and p.strip())
    return "\n\n".join(p for p in parts if p)


def _sections(full_text: Any) -> Iterable[tuple[str, list[str]]]:
    if isinstance(full_text, Mapping):  # HF column layout
        names = full_text.get("section_name") or []
        paras = full_text.get("paragraphs") or []
        yield from zip([n or "" for n in names], [list(p or []) for p in paras], strict=False)
        return
    for sec in full_text:
        yield sec.get("section_name") or "", list(sec.get("paragraphs") or [])


def _questions(qas: Any) -> Iterable[tuple[str, str, list[Mapping[str, Any]]]]:
    """(question_id, question, annotations) in either layout."""
    if isinstance(qas, Mapping):  # HF column layout
        for q, qid, ans in zip(
            qas.get("question") or [],
            qas.get("question_id") or [],
            qas.get("answers") or [],
            strict=False,
        ):
            # ans = {"answer": [ {...}, ... ], "annotation_id": [...], ...}
            yield qid, q, [{"answer": a} for a in (ans.get("answer") or [])]
        return
    for qa in qas:
        yield qa["question_id"], qa["question"], list(qa.get("answers") or [])


# -- record checks (before any example is made) ------------------------------------------------


def _check_section(sec: Any, where: str, at: str) -> None:
    need_object(sec, where, at)
    need_str(sec, "section_name", where, required=False, prefix=f"{at}.")
    paragraphs = need_list(sec, "paragraphs", where, required=False, prefix=f"{at}.")
    for j, p in enumerate(paragraphs):
        if p is not None and not isinstance(p, str):
            raise wrong_type(where, repr(f"{at}.paragraphs[{j}]"), "a string", p)


def _check_full_text(paper: Mapping[str, Any], where: str) -> None:
    full_text = paper.get("full_text")
    if full_text is None:
        return
    if isinstance(full_text, Mapping):  # HF column layout
        names = need_list(full_text, "section_name", where, required=False, prefix="full_text.")
        paras = need_list(full_text, "paragraphs", where, required=False, prefix="full_text.")
        for i, name in enumerate(names):
            if name is not None and not isinstance(name, str):
                raise wrong_type(where, repr(f"full_text.section_name[{i}]"), "a string", name)
        for i, p in enumerate(paras):
            _check_section({"paragraphs": p}, where, f"full_text.paragraphs[{i}]")
        return
    if not isinstance(full_text, list):
        raise wrong_type(where, "'full_text'", "an array of sections", full_text)
    for i, sec in enumerate(full_text):
        _check_section(sec, where, f"full_text[{i}]")


def _check_answer(a: Any, where: str, at: str) -> None:
    """One annotation's ``answer`` object, typed as the official files type it."""
    need_object(a, where, at)
    for key in ("unanswerable", "yes_no"):
        if a.get(key) is not None and not isinstance(a[key], bool):
            raise wrong_type(where, repr(f"{at}.{key}"), "true, false or null", a[key])
    need_str_list(a, "extractive_spans", where, required=False, prefix=f"{at}.")
    need_str_list(a, "evidence", where, required=False, prefix=f"{at}.")
    need_str(a, "free_form_answer", where, required=False, prefix=f"{at}.")
    try:
        qasper_reference(a)
    except BadInput:
        raise bad(
            where,
            repr(at),
            "has no answer (unanswerable, extractive_spans, free_form_answer or yes_no)",
        ) from None


#: (question_id, question, annotations, the question's field path, each answer's path)
_Row = tuple[Any, Any, list[Any], str, list[str]]


def _hf_questions(qas: Mapping[str, Any], where: str) -> list[_Row]:
    n = len(need_list(qas, "question_id", where, prefix="qas."))
    columns = {k: need_list(qas, k, where, prefix="qas.") for k in ("question", "answers")}
    for key, col in columns.items():
        if len(col) != n:
            raise bad(where, f"'qas.{key}'", f"has {len(col)} entries, qas.question_id has {n}")
    out = []
    for i, (qid, q, ans) in enumerate(zip(qas["question_id"], *columns.values(), strict=True)):
        at = f"qas.answers[{i}]"
        need_object(ans, where, at)
        notes = need_list(ans, "answer", where, required=False, prefix=f"{at}.")
        paths = [f"{at}.answer[{k}]" for k in range(len(notes))]
        out.append((qid, q, [{"answer": a} for a in notes], f"qas[{i}]", paths))
    return out


def _official_questions(qas: Any, where: str) -> list[_Row]:
    if not isinstance(qas, list):
        raise wrong_type(where, "'qas'", "an array of questions", qas)
    out = []
    for i, qa in enumerate(qas):
        at = f"qas[{i}]"
        need_object(qa, where, at)
        for key in ("question_id", "question"):
            if key not in qa:
                raise bad(where, repr(f"{at}.{key}"), "is missing")
        notes = need_list(qa, "answers", where, required=False, prefix=f"{at}.")
        for k, note in enumerate(notes):
            need_object(note, where, f"{at}.answers[{k}]")
            if "answer" not in note:
                raise bad(where, repr(f"{at}.answers[{k}].answer"), "is missing")
        paths = [f"{at}.answers[{k}].answer" for k in range(len(notes))]
        out.append((qa["question_id"], qa["question"], notes, at, paths))
    return out


def check_paper(paper: Any, where: str) -> None:
    """Raise a :class:`BadInput` naming ``where`` and the field when ``paper`` is not a QASPER
    paper in either layout (see the module docstring)."""
    need_object(paper, where, what="the paper")
    need_str(paper, "title", where, required=False)
    need_str(paper, "abstract", where, required=False)
    _check_full_text(paper, where)
    qas = paper.get("qas")
    if qas is None:
        return
    rows = (
        _hf_questions(qas, where) if isinstance(qas, Mapping) else _official_questions(qas, where)
    )
    for qid, q, notes, at, paths in rows:
        if not isinstance(qid, str) or not qid.strip():
            raise wrong_type(where, repr(f"{at}.question_id"), "a non-empty string", qid)
        need_str({"question": q}, "question", where, prefix=f"{at}.")
        for note, path in zip(notes, paths, strict=True):
            _check_answer(note["answer"], where, path)


def paper_examples(
    paper_id: str, paper: Mapping[str, Any], where: str = "", ids: UniqueIds | None = None
) -> list[dict]:
    """The examples of one paper (checked first: see :func:`check_paper`). ``where``: the
    paper's place, ``file:line`` or ``file: paper 'id'``; ``ids`` the question ids seen in
    earlier papers (a repeat is an error)."""
    where = where.rstrip(": ") or f"paper {paper_id!r}"
    check_paper(paper, where)
    ids = ids if ids is not None else UniqueIds()
    context = paper_text(paper)
    out = []
    for qid, question, notes in _questions(paper.get("qas") or []):
        refs = [qasper_reference(a) for a in notes]
        if not refs:
            continue
        ids.add(qid, where, "question_id")
        out.append(
            {
                "id": qid,
                "context": context,
                "input": question,
                "answer": refs,
                "options": [],
                "doc_id": paper_id,
            }
        )
    return out


def load_qasper(data: str, *, limit: int | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Examples and a source record (see the module docstring for ``data``). Every paper is
    checked before any example is returned: a malformed one is a :class:`BadInput` naming
    ``file:line`` (or the paper id in an official file) and the field."""
    text = (data or "").strip()
    if text.startswith("hub:"):
        return _from_hub(text[4:], limit)
    path = Path(text).expanduser()
    if path.is_dir():
        path = path / DEV_FILE
    if not path.is_file():
        raise BadInput(
            f"QASPER data {data!r}: expected an official qasper-*-v0.3.json file, a folder "
            f"holding {DEV_FILE}, a JSON-lines file in the Hugging Face layout, or "
            "hub:REPO@REVISION[:SPLIT]"
        )
    examples: list[dict] = []
    ids = UniqueIds()
    if path.suffix == ".jsonl":
        from chunkwise.io import read_jsonl

        for line_no, rec in read_jsonl(path):  # bad lines (any way) are one-line BadInput
            where = f"{path}:{line_no}"
            paper_id = need_id(rec, "id", where)
            examples += paper_examples(str(paper_id), rec, where, ids)
    else:
        from chunkwise.io import read_json

        papers = read_json(path)
        if not isinstance(papers, Mapping):
            raise BadInput(
                f"{path}: expected an object of paper id -> paper, got {json_type(papers)}"
            )
        for pid, paper in papers.items():
            examples += paper_examples(pid, paper, f"{path}: paper {pid!r}", ids)
    total = len(examples)
    return examples[:limit] if limit else examples, {
        "source": "local",
        "path": str(path.resolve()),
        "total": total,
    }


def _from_hub(spec: str, limit: int | None) -> tuple[list[dict], dict[str, Any]]:
    repo, _, rest = spec.partition("@")
    revision, _, split = rest.partition(":")
    if not repo or not revision:
        raise BadInput(
            f"hub:{spec}: name the dataset and a pinned revision, hub:REPO@REVISION[:SPLIT]"
        )
    split = split or "validation"
    try:
        import datasets

        ds = datasets.load_dataset(repo, split=split, revision=revision)
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise BadInput(
            f"cannot load {repo}@{revision} ({split}) from the Hub: {first}. Without Hub "
            f"access pass the official {DEV_FILE} instead"
        ) from None
    examples: list[dict] = []
    ids = UniqueIds()
    for i, rec in enumerate(ds):
        where = f"{repo}@{revision} ({split}) row {i}"
        examples += paper_examples(str(need_id(rec, "id", where)), rec, where, ids)
        if limit and len(examples) >= limit:
            break
    return examples[:limit] if limit else examples, {
        "source": "hub",
        "repo": repo,
        "revision": revision,
        "split": split,
        "total": len(examples),
    }


def parse_data_spec(text: str) -> str:
    """A ``--data`` value checked before any model is loaded (see the module docstring)."""
    text = (text or "").strip()
    if not text or text == "hub":
        raise BadInput(
            "--data for qasper: the official qasper-dev-v0.3.json (or a folder holding it), a "
            "JSON-lines file in the Hugging Face layout, or hub:REPO@REVISION[:SPLIT]"
        )
    if not text.startswith("hub:") and not Path(text).expanduser().exists():
        raise BadInput(f"--data {text!r}: no such file or folder")
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
    """The one task's examples; ``revision`` pins a ``hub:REPO`` that names none."""
    if revision and spec.startswith("hub:") and "@" not in spec:
        spec = f"{spec}@{revision}"
    examples, source = load_qasper(spec, limit=limit)
    return TaskData(task, examples, source, source["total"])


__all__ = [
    "DEV_FILE",
    "load_qasper",
    "load_task",
    "paper_examples",
    "paper_text",
    "parse_data_spec",
]
