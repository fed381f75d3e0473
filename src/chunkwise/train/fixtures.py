"""Tiny, deterministic LongAlign and Pyramid-Align records for CPU recipes and tests.

Documents are a few paragraphs about made-up towns; each question has an answer stated in one
paragraph and repeated in a second one, so the Pyramid-Align records have two informative map
records and, for every other record, a collapse round that merges them. Map records carry
their ``chunk`` text (one paragraph each). Nothing here is real data; it exists so that
``recipes/tiny/*.yaml`` train offline in seconds.

    python -m chunkwise.train.fixtures tests/fixtures/train [--records 48] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from chunkwise.strategies.protocol import NO_INFO, Record

TOWNS = [
    "Arvel",
    "Bressa",
    "Corlin",
    "Dunmere",
    "Elsworth",
    "Fennick",
    "Galdor",
    "Hollin",
    "Istra",
    "Jorvik",
    "Kestrel",
    "Lunden",
    "Marrow",
    "Norwick",
    "Orlan",
    "Pellham",
]
PEOPLE = [
    "Ona Brisk",
    "Tal Verin",
    "Mira Holt",
    "Edo Sarn",
    "Lia Ferro",
    "Ruben Kaal",
    "Sela Moor",
    "Ivo Trent",
    "Nadia Pell",
    "Oren Vask",
    "Tessa Lind",
    "Bram Okoro",
]
PRODUCTS = [
    "blue glass",
    "salted fish",
    "woollen cloth",
    "copper bells",
    "pear cider",
    "clay pipes",
    "rope",
    "honey cakes",
    "paper lanterns",
    "iron nails",
]
RIVERS = ["Seln", "Ardo", "Milra", "Quen", "Tasso", "Velo"]
DIRECTIONS = ["north", "south", "east", "west"]
MONTHS = ["March", "May", "July", "September", "November"]
FILLER = [
    "The roads around {town} are narrow and lined with stone walls.",
    "Visitors often remark on the quiet of {town} in the early morning.",
    "Most houses in {town} have red tiled roofs.",
    "The market square of {town} fills with carts on most days.",
    "Travellers reach {town} by a road that follows the {river} river.",
    "Children in {town} learn to swim in the {river} river.",
    "Winters in {town} are long, and the summers are mild.",
    "A small chapel stands on the hill above {town}.",
]


def _facts(rng: random.Random, town: str) -> dict[str, str]:
    return {
        "mayor": rng.choice(PEOPLE),
        "product": rng.choice(PRODUCTS),
        "river": rng.choice(RIVERS),
        "direction": rng.choice(DIRECTIONS),
        "month": rng.choice(MONTHS),
        "year": str(rng.randint(1520, 1890)),
    }


QUESTIONS = {
    "mayor": (
        "Who is the mayor of {town}?",
        "The mayor of {town} is {mayor}.",
        "{mayor}, who leads {town} as mayor, opened a new library there.",
    ),
    "product": (
        "What is {town} known for making?",
        "{town} is known for its {product}.",
        "Merchants travel far to buy the {product} made in {town}.",
    ),
    "year": (
        "In what year was the old bridge in {town} built?",
        "The old bridge in {town} was built in {year}.",
        "Since {year}, the old stone bridge has carried carts into {town}.",
    ),
    "month": (
        "In which month does {town} hold its festival?",
        "Every {month}, {town} holds a festival with music and lanterns.",
        "Each year the streets of {town} fill with dancers in {month}.",
    ),
}


def _paragraph(rng: random.Random, town: str, facts: dict[str, str], extra: str | None) -> str:
    lines = rng.sample(FILLER, 3)
    text = [s.format(town=town, **facts) for s in lines]
    if extra:
        text.insert(rng.randint(0, len(text)), extra)
    return " ".join(text)


def make_example(rng: random.Random, idx: int) -> dict[str, Any]:
    """One document with a question, its answer, and the paragraphs that state it."""
    town = rng.choice(TOWNS)
    facts = _facts(rng, town)
    key = rng.choice(sorted(QUESTIONS))
    q, fact, echo = QUESTIONS[key]
    n = rng.randint(5, 8)
    first, second = sorted(rng.sample(range(n), 2))
    paras = []
    for i in range(n):
        extra = fact if i == first else echo if i == second else None
        paras.append(
            _paragraph(rng, town, facts, extra.format(town=town, **facts) if extra else None)
        )
    answer = {
        "mayor": facts["mayor"],
        "product": facts["product"],
        "year": facts["year"],
        "month": facts["month"],
    }[key]
    return {
        "town": town,
        "question": q.format(town=town),
        "answer": answer,
        "sentence": fact.format(town=town, **facts),
        "echo": echo.format(town=town, **facts),
        "paragraphs": paras,
        "hits": (first, second),
        "index": idx,
    }


def longalign_record(ex: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    doc = "\n\n".join(ex["paragraphs"])
    msgs = [
        {"role": "user", "content": f"{doc}\n\n{ex['question']}"},
        {"role": "assistant", "content": ex["sentence"]},
    ]
    if rng.random() < 0.3:  # a follow-up turn: both assistant turns are targets
        msgs += [
            {"role": "user", "content": "Answer with just the name, number or thing."},
            {"role": "assistant", "content": ex["answer"]},
        ]
    return {"messages": msgs}


def pyramid_record(ex: dict[str, Any]) -> dict[str, Any]:
    first, second = ex["hits"]
    maps = []
    for i, para in enumerate(ex["paragraphs"]):
        if i in (first, second):
            strong = i == first
            rec = Record(
                extracted_information=ex["sentence"] if strong else ex["echo"],
                rationale="This part states it directly."
                if strong
                else "This part mentions it in passing.",
                answer=ex["answer"],
                confidence=5.0 if strong else 3.0,
                sources=[i],
            )
        else:
            rec = Record(
                extracted_information="",
                rationale=f"This part does not touch on the question about {ex['town']}.",
                answer=NO_INFO,
                confidence=0.0,
                no_information=True,
                sources=[i],
            )
        d = rec.to_dict()
        d["chunk"] = para
        maps.append(d)
    collapse: list[list[dict]] = []
    if ex["index"] % 2:
        merged = Record(
            extracted_information=f"{ex['sentence']} {ex['echo']}",
            rationale="Both parts agree; the direct statement has the higher confidence.",
            answer=ex["answer"],
            confidence=5.0,
            sources=[first, second],
        )
        collapse.append([merged.to_dict()])
    return {
        "id": f"pa-{ex['index']:04d}",
        "source_id": f"doc-{ex['index']:04d}",
        "document": "\n\n".join(ex["paragraphs"]),
        "question": ex["question"],
        "intermediate": {
            "map": maps,
            "collapse": collapse,
            "reduce": {"rationale": "The findings agree on one answer.", "answer": ex["answer"]},
        },
        "answer": ex["answer"],
        "meta": {
            "node_level": 0,
            "node_ids": [first],
            "levels": 1,
            "model": "fixture",
            "prompt_version": "mr-chat-1",
            "task": "qa",
        },
    }


def write_fixtures(out_dir: str | Path, records: int = 48, seed: int = 0) -> dict[str, Path]:
    """Write ``longalign.jsonl`` and ``pyramid_align.jsonl`` under ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    exs = [make_example(rng, i) for i in range(records)]
    paths = {"longalign": out / "longalign.jsonl", "pyramid_align": out / "pyramid_align.jsonl"}
    with open(paths["longalign"], "w", encoding="utf-8") as f:
        for ex in exs:
            f.write(json.dumps(longalign_record(ex, rng), ensure_ascii=False) + "\n")
    with open(paths["pyramid_align"], "w", encoding="utf-8") as f:
        for ex in exs:
            f.write(json.dumps(pyramid_record(ex), ensure_ascii=False) + "\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write tiny LongAlign / Pyramid-Align fixtures.")
    ap.add_argument("out_dir")
    ap.add_argument("--records", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    for name, path in write_fixtures(a.out_dir, a.records, a.seed).items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
