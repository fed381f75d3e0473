"""QuALITY: reading the chosen option out of free replies, accuracy with the HARD subset, and
the official files through the registered benchmark."""

from __future__ import annotations

import json

import pytest

from chunkwise.benchmarks import get_benchmark
from chunkwise.benchmarks.quality import metrics as qm

OPTS = ["It rained all day.", "The ship sank.", "Korvin escaped.", "Nobody came."]


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        (" B", "B"),
        ("(C) Korvin escaped.", "C"),
        ("D.", "D"),
        ("The answer is A.", "A"),
        ("I think option (B) is right", "B"),
        ("Korvin escaped from the cell", "C"),  # the option's text
        ("A young girl", None),  # an article, not a choice
        ("", None),
    ],
)
def test_extract_choice(reply, letter):
    assert qm.extract_choice(reply, OPTS) == letter


def test_quality_accuracy_and_hard_subset():
    recs = [
        {"prediction": "B", "answer": "B", "difficult": 1},
        {"prediction": "A", "answer": "B", "difficult": 1},
        {"prediction": "C", "answer": "C", "difficult": 0},
        {"prediction": "nonsense", "answer": "D"},
    ]
    out = qm.quality_accuracy(recs)
    assert out["accuracy"] == 0.5 and out["n"] == 4
    assert out["hard_accuracy"] == 0.5 and out["n_hard"] == 2
    assert qm.quality_accuracy([{"prediction": "A", "answer": "A"}])["hard_accuracy"] is None


def test_official_quality_loader_and_hard_task(tmp_path):
    art = {
        "article_id": "a1",
        "set_unique_id": "a1_s",
        "title": "T",
        "article": "Once upon a time.",
        "questions": [
            {
                "question": "Who?",
                "options": ["w", "x", "y", "z"],
                "gold_label": 2,
                "difficult": 1,
                "question_unique_id": "q1",
            },
            {
                "question": "What?",
                "options": ["w", "x", "y", "z"],
                "gold_label": 4,
                "difficult": 0,
                "question_unique_id": "q2",
            },
        ],
    }
    path = tmp_path / "QuALITY.v1.0.1.htmlstripped.dev"
    path.write_text(json.dumps(art) + "\n")
    bench = get_benchmark("quality")
    spec = bench.parse_data(str(tmp_path))
    all_ = bench.load("quality", spec)
    hard = bench.load("quality_hard", spec)
    assert [e["id"] for e in all_.examples] == ["q1", "q2"]
    assert [e["id"] for e in hard.examples] == ["q1"]
    ex = all_.examples[1]
    assert ex["answer"]["letter"] == "D" and ex["doc_id"] == "a1_s"
    assert bench.score("quality_hard", "(B)", hard.examples[0]["answer"], "official", "none") == 1.0
    recs = [
        {"prediction": p, "answer": e["answer"]["letter"], "difficult": e["difficult"]}
        for p, e in zip(["B", "A"], all_.examples, strict=True)
    ]
    assert qm.quality_accuracy(recs) == {"accuracy": 0.5, "hard_accuracy": 1.0, "n": 2, "n_hard": 1}
