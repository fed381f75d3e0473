"""The generated benchmark's loader: documents of a family at a length, each an example whose
ground truth keeps what the family's query and scorer need. The spec names the seeds and the
wording (:mod:`chunkwise.data.families.wordings`):

* ``heldout:LENGTH`` — held-out seeds, worded with the training templates (the seen cell);
* ``heldout-templates:LENGTH`` — the same held-out seeds (the same filler, keys and
  positions) worded only with held-out templates, which no training record uses;
* ``train:LENGTH`` — the training seed, training templates (what a model was taught).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chunkwise.benchmarks.types import TaskData
from chunkwise.data.families import FAMILIES, HELDOUT_SEED, TRAIN_SEED, Doc, get_family
from chunkwise.data.families.wordings import wordings_digest
from chunkwise.errors import BadInput

TASKS = tuple(FAMILIES)
#: spec name -> (seed base, template selection)
SPLITS = {
    "heldout": (HELDOUT_SEED, "train"),
    "heldout-templates": (HELDOUT_SEED, "heldout"),
    "train": (TRAIN_SEED, "train"),
}
_SPEC = re.compile(r"^([a-z-]+):(\d+)$")


@dataclass(frozen=True)
class GeneratedSpec:
    split: str
    length: int
    #: documents are sized with the model's tokenizer: the runner loads them after the model
    needs_tokenizer = True

    def seed(self) -> int:
        """The family seed: the held-out seeds offset by the length, as bench/mr_trained.py
        does, so each length reads other documents."""
        base, _ = SPLITS[self.split]
        return base + (self.length if base == HELDOUT_SEED else 0)

    @property
    def templates(self) -> str:
        """Which templates word the documents (``train`` or ``heldout``)."""
        return SPLITS[self.split][1]

    def __str__(self) -> str:
        return f"{self.split}:{self.length}"


def parse_data_spec(data: str) -> GeneratedSpec:
    m = _SPEC.match((data or "").strip())
    if not m or m.group(1) not in SPLITS or int(m.group(2)) < 200:
        raise BadInput(
            f"--data {data!r}: the generated benchmark takes heldout:<tokens>, "
            "heldout-templates:<tokens> or train:<tokens> (document length in tokens, at least "
            "200), e.g. heldout:4000"
        )
    return GeneratedSpec(m.group(1), int(m.group(2)))


def load_task(
    task: str,
    spec: GeneratedSpec,
    *,
    limit: int | None = None,
    revision: str | None = None,
    seed: int = 0,
    count_tokens: Any = None,
) -> TaskData:
    if task not in TASKS:
        raise BadInput(f"unknown generated task {task!r}; valid: {', '.join(TASKS)}")
    if count_tokens is None:
        raise BadInput("the generated benchmark sizes its documents with the model's tokenizer")
    n = 20 if limit is None else limit
    if n < 1:
        raise BadInput(f"--limit must be at least 1 for generated documents, got {n}")
    docs = get_family(task).make(
        n=n,
        seed=spec.seed() + seed,
        length_tokens=spec.length,
        count_tokens=count_tokens,
        templates=spec.templates,
    )
    examples = [to_example(d) for d in docs]
    source = {
        "split": spec.split,
        "length": spec.length,
        "seed": spec.seed() + seed,
        "templates": spec.templates,
        "wordings": wordings_digest(),
    }
    return TaskData(task, examples, source, len(examples))


def to_example(doc: Doc) -> dict[str, Any]:
    """A runner example; the ground truth keeps what the family's query and scorer need."""
    ex: dict[str, Any] = {
        "id": doc.id,
        "context": doc.context,
        "input": doc.question,
        "answer": {
            "answer": doc.answer,
            "task": doc.task,
            "answer_prefix": doc.answer_prefix,
            "max_answer_tokens": doc.max_answer_tokens,
        },
        "options": [],
    }
    # where the generator put the evidence (an unanswerable variant: none); a family that
    # records no evidence per document (math_find: every number is a candidate) leaves it
    # unknown
    if doc.evidence or doc.meta.get("unanswerable"):
        ex["evidence"] = [[ev.start, ev.end] for ev in doc.evidence]
    return ex


__all__ = ["TASKS", "GeneratedSpec", "load_task", "parse_data_spec", "to_example"]
