"""Generated documents with ground truth as a benchmark: the document families of
:mod:`chunkwise.data.families` (passkey, kv_retrieval, multi-hop chains, conflicting evidence,
extractive QA over real text, ...), scored by each family's own rule against its known answer.

``--benchmark generated --tasks passkey,kv_retrieval --data heldout:4000 --limit 20`` reads 20
documents per family of about 4,000 tokens, built from the held-out seeds (``HELDOUT_SEED +
length``, the seeds ``bench/mr_trained.py`` reads and no training recipe writes);
``train:4000`` builds from the training seed instead (for checking what a model was taught).
Every reference is the generator's ground truth, never a model's output. The question reaches
the strategy exactly as the oracle teacher and ``bench/mr_trained.py`` ask it
(:meth:`Doc.query`), so a model trained on oracle records is asked in the words it learned.

Importing this module registers the benchmark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from chunkwise.data.families import FAMILIES, HELDOUT_SEED, TRAIN_SEED, Doc, get_family
from chunkwise.errors import BadInput
from chunkwise.eval.benchmarks import Benchmark, register_benchmark

TASKS = tuple(FAMILIES)
PROMPT_VERSION = "generated-1"
SPLITS = {"heldout": HELDOUT_SEED, "train": TRAIN_SEED}
_SPEC = re.compile(r"^(heldout|train):(\d+)$")


@dataclass(frozen=True)
class GeneratedSpec:
    split: str
    length: int
    #: documents are sized with the model's tokenizer: the runner loads them after the model
    needs_tokenizer = True

    def seed(self) -> int:
        """The family seed: the held-out split offsets by the length, as bench/mr_trained.py
        does, so each length reads other documents."""
        return SPLITS[self.split] + (self.length if self.split == "heldout" else 0)

    def __str__(self) -> str:
        return f"{self.split}:{self.length}"


def parse_data_spec(data: str) -> GeneratedSpec:
    m = _SPEC.match((data or "").strip())
    if not m or int(m.group(2)) < 200:
        raise BadInput(
            f"--data {data!r}: the generated benchmark takes heldout:<tokens> or "
            "train:<tokens> (document length in tokens, at least 200), e.g. heldout:4000"
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
):
    from chunkwise.data.longqa import TaskData

    if task not in TASKS:
        raise BadInput(f"unknown generated task {task!r}; valid: {', '.join(TASKS)}")
    if count_tokens is None:
        raise BadInput("the generated benchmark sizes its documents with the model's tokenizer")
    n = 20 if limit is None else limit
    if n < 1:
        raise BadInput(f"--limit must be at least 1 for generated documents, got {n}")
    docs = get_family(task).make(
        n=n, seed=spec.seed() + seed, length_tokens=spec.length, count_tokens=count_tokens
    )
    examples = [to_example(d) for d in docs]
    source = {"split": spec.split, "length": spec.length, "seed": spec.seed() + seed}
    return TaskData(task, examples, source, len(examples))


def to_example(doc: Doc) -> dict[str, Any]:
    """A runner example; the ground truth keeps what the family's query and scorer need."""
    return {
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


def _doc(task: str, example_answer: dict[str, Any], question: str = "") -> Doc:
    return Doc(
        id="",
        family=task,
        context="",
        question=question,
        answer=str(example_answer["answer"]),
        task=str(example_answer.get("task") or "retrieval"),
        answer_prefix=str(example_answer.get("answer_prefix") or ""),
        max_answer_tokens=int(example_answer.get("max_answer_tokens") or 0),
    )


def build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    """The family's own query (question, task kind, answer prefix, answer budget) for either
    prompt kind: the question text already says what to answer."""
    if kind not in ("chat", "base"):
        raise BadInput(f"prompt kind must be chat or base, got {kind!r}")
    return _doc(task, example["answer"], example["input"]).query()


def score(task: str, prediction: str, ground_truth: Any, scorer: str, extract: str) -> float:
    return get_family(task).score(_doc(task, ground_truth), prediction)


def _generated() -> Benchmark:
    return Benchmark(
        name="generated",
        tasks=TASKS,
        parse_data=parse_data_spec,
        load=load_task,
        build_query=build_query,
        score=score,
        scorers=("official",),  # each family's own rule (Family.score)
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={t: t.replace("_", " ") for t in TASKS},
        default_data="heldout:4000",
    )


register_benchmark("generated", _generated)

__all__ = ["TASKS", "GeneratedSpec", "load_task", "parse_data_spec", "score", "to_example"]
