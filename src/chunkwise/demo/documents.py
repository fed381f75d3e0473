"""The demo's documents: generated families with ground truth (:mod:`chunkwise.data.families`).

Two disjoint sets, both written as JSON lines (id, family, length, seed, question, answer,
document) so a reader can open what the models read:

* ``train.jsonl``: the size's training families at its training lengths, from the training
  seed — what the oracle teacher turns into (X, Q, M, A) records;
* ``heldout.jsonl``: every evaluation task at the evaluation length from the held-out seeds
  (exactly the documents ``chunkwise eval --benchmark generated --data heldout:<length>``
  reads), including families no training document comes from.

Every reference answer is the generator's ground truth (for extractive QA over Python's
reference text, a span of that text), never a model's output.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chunkwise.benchmarks.generated.loader import GeneratedSpec
from chunkwise.data.families import TRAIN_SEED, Doc, get_family
from chunkwise.demo.sizes import DemoSize
from chunkwise.io import atomic_write_text


def document_sets(
    size: DemoSize, seed: int, count_tokens: Callable[[str], int]
) -> dict[str, list[tuple[Doc, int, int]]]:
    """``{"train": [...], "heldout": [...]}`` of ``(document, length, family seed)``."""
    train = [
        (doc, length, TRAIN_SEED + seed)
        for fam in size.train_families
        for length in size.train_lengths
        for doc in get_family(fam).make(
            n=size.train_docs, seed=TRAIN_SEED + seed, length_tokens=length,
            count_tokens=count_tokens,
        )
    ]  # fmt: skip
    spec = GeneratedSpec("heldout", size.eval_length)
    heldout = [
        (doc, size.eval_length, spec.seed() + seed)
        for fam in size.eval_tasks
        for doc in get_family(fam).make(
            n=size.eval_n, seed=spec.seed() + seed, length_tokens=size.eval_length,
            count_tokens=count_tokens,
        )
    ]  # fmt: skip
    return {"train": train, "heldout": heldout}


def write_documents(folder: Path, sets: dict[str, list[tuple[Doc, int, int]]]) -> dict[str, Any]:
    """One JSONL file per set; returns the counts by family."""
    folder.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    for name, docs in sets.items():
        rows = [
            {
                "id": doc.id,
                "family": doc.family,
                "length": length,
                "seed": seed,
                "question": doc.question,
                "answer": doc.answer,
                "context": doc.context,
            }
            for doc, length, seed in docs
        ]
        atomic_write_text(
            folder / f"{name}.jsonl",
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
        )
        summary[name] = dict(Counter(r["family"] for r in rows))
    return summary


__all__ = ["document_sets", "write_documents"]
