"""QASPER (Dasigi et al., 2021): one benchmark example per question, references per annotation.

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
builds it (:func:`chunkwise.eval.qa_metrics.qasper_reference`). The context is the paper as
plain text: title, abstract, then each section's name and paragraphs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.eval.qa_metrics import qasper_reference

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


def paper_examples(paper_id: str, paper: Mapping[str, Any], where: str = "") -> list[dict]:
    context = paper_text(paper)
    out = []
    for qid, question, notes in _questions(paper.get("qas") or []):
        try:
            refs = [qasper_reference(a) for a in notes]
        except BadInput as e:
            raise BadInput(f"{where}paper {paper_id} question {qid}: {e}") from None
        if not refs:
            continue
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
    """Examples and a source record (see the module docstring for ``data``)."""
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
    if path.suffix == ".jsonl":
        from chunkwise.io import read_jsonl

        for line_no, rec in read_jsonl(path):  # bad lines (any way) are one-line BadInput
            examples += paper_examples(str(rec.get("id")), rec, f"{path}:{line_no}: ")
    else:
        from chunkwise.io import read_json

        papers = read_json(path)
        if not isinstance(papers, Mapping):
            raise BadInput(f"{path}: expected an object of paper id -> paper")
        for pid, paper in papers.items():
            examples += paper_examples(pid, paper, f"{path}: ")
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
    for rec in ds:
        examples += paper_examples(str(rec.get("id")), rec, f"{repo}@{revision}: ")
        if limit and len(examples) >= limit:
            break
    return examples[:limit] if limit else examples, {
        "source": "hub",
        "repo": repo,
        "revision": revision,
        "split": split,
        "total": len(examples),
    }


__all__ = ["DEV_FILE", "load_qasper", "paper_examples", "paper_text"]
