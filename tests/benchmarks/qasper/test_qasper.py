"""QASPER: the official evaluator's rules on hand-checked cases, and the loader's two layouts."""

from __future__ import annotations

import json

import pytest

from chunkwise.benchmarks import qa_metrics
from chunkwise.benchmarks.qasper import metrics as qm
from chunkwise.errors import BadInput


def ann(**kw):
    base = {
        "unanswerable": False,
        "extractive_spans": [],
        "yes_no": None,
        "free_form_answer": "",
        "evidence": [],
        "highlighted_evidence": [],
    }
    base.update(kw)
    return {"answer": base}


def test_qasper_references_follow_the_official_precedence():
    assert qm.qasper_reference(ann(unanswerable=True, extractive_spans=["x"])) == {
        "answer": "Unanswerable",
        "type": "none",
        "evidence": [],
    }
    r = qm.qasper_reference(ann(extractive_spans=["BERT", "ELMo"], free_form_answer="ignored"))
    assert (r["answer"], r["type"]) == ("BERT, ELMo", "extractive")
    assert qm.qasper_reference(ann(free_form_answer="A CNN."))["type"] == "abstractive"
    assert qm.qasper_reference(ann(yes_no=True))["answer"] == "Yes"
    assert qm.qasper_reference(ann(yes_no=False)) == {
        "answer": "No",
        "type": "boolean",
        "evidence": [],
    }
    with pytest.raises(BadInput):
        qm.qasper_reference(ann())


@pytest.mark.parametrize(
    ("prediction", "reference", "expected"),
    [
        ("BERT and ELMo", "BERT, ELMo", 0.8),  # "bert and elmo" vs "bert elmo": P 2/3, R 1
        ("The BERT model.", "BERT", 2 / 3),  # article and punctuation dropped: P 1/2, R 1
        ("Unanswerable", "Unanswerable", 1.0),
        ("Yes, they do", "Yes", 0.5),  # P 1/3, R 1
        ("no", "Yes", 0.0),
        ("", "Yes", 0.0),
        ("a the an", "the", 0.0),  # only articles: nothing left to match
    ],
)
def test_token_f1_hand_checked(prediction, reference, expected):
    assert qa_metrics.token_f1(prediction, reference) == pytest.approx(expected)


def test_qasper_max_over_references_and_by_type():
    refs = [
        qm.qasper_reference(ann(extractive_spans=["BiLSTM encoder"])),
        qm.qasper_reference(ann(free_form_answer="a bidirectional LSTM")),
        qm.qasper_reference(ann(unanswerable=True)),
    ]
    f, kind = qm.qasper_answer_f1("bidirectional LSTM", refs)
    assert f == pytest.approx(1.0) and kind == "abstractive"
    f, kind = qm.qasper_answer_f1("Unanswerable", refs)
    assert f == 1.0 and kind == "none"
    # ties keep the first reference's type
    tie = [
        qm.qasper_reference(ann(extractive_spans=["blue"])),
        qm.qasper_reference(ann(free_form_answer="blue")),
    ]
    assert qm.qasper_answer_f1("blue", tie) == (1.0, "extractive")


def test_qasper_evaluate_counts_missing_predictions_as_zero():
    gold = {
        "q1": [ann(extractive_spans=["BERT", "ELMo"]), ann(unanswerable=True)],
        "q2": [ann(yes_no=True)],
        "q3": [ann(free_form_answer="three layers")],
    }
    out = qm.qasper_evaluate(gold, {"q1": "Unanswerable", "q2": "yes"})
    assert out["answer_f1"] == pytest.approx(2 / 3)
    assert out["missing_predictions"] == 1
    assert out["answer_f1_by_type"] == {"none": 1.0, "boolean": 1.0}
    ev = qm.qasper_evaluate(
        {"q": [ann(free_form_answer="x", evidence=["p1", "p2"])]}, {"q": "x"}, {"q": ["p1"]}
    )
    assert ev["evidence_f1"] == pytest.approx(2 / 3)


def test_plain_string_references_get_a_type():
    assert qm.as_references("Unanswerable")[0]["type"] == "none"
    assert qm.as_references(["No"])[0]["type"] == "boolean"
    assert qm.as_references("relu, selu")[0]["type"] == "abstractive"


PAPER = {
    "title": "A Paper",
    "abstract": "We study things.",
    "full_text": [{"section_name": "Introduction", "paragraphs": ["Para one.", "Para two."]}],
    "qas": [
        {
            "question": "What do they study?",
            "question_id": "q1",
            "answers": [ann(extractive_spans=["things"]), ann(unanswerable=True)],
        }
    ],
}


def test_qasper_loader_official_and_hf_layouts(tmp_path):
    from chunkwise.benchmarks.qasper.loader import load_qasper

    off = tmp_path / "qasper-dev-v0.3.json"
    off.write_text(json.dumps({"p1": PAPER}))
    ex, src = load_qasper(str(tmp_path))
    assert src["total"] == 1 and ex[0]["id"] == "q1" and ex[0]["doc_id"] == "p1"
    assert ex[0]["context"].startswith("A Paper\n\nAbstract\n\nWe study things.\n\nIntroduction")
    assert [r["type"] for r in ex[0]["answer"]] == ["extractive", "none"]

    hf = {
        "id": "p1",
        "title": "A Paper",
        "abstract": "We study things.",
        "full_text": {"section_name": ["Introduction"], "paragraphs": [["Para one.", "Para two."]]},
        "qas": {
            "question": ["What do they study?"],
            "question_id": ["q1"],
            "answers": [
                {"answer": [PAPER["qas"][0]["answers"][0]["answer"]], "annotation_id": ["a"]}
            ],
        },
    }
    jl = tmp_path / "dev.jsonl"
    jl.write_text(json.dumps(hf) + "\n")
    ex2, _ = load_qasper(str(jl))
    assert ex2[0]["context"] == ex[0]["context"] and ex2[0]["answer"][0]["answer"] == "things"
    with pytest.raises(BadInput, match="pinned revision"):
        load_qasper("hub:allenai/qasper")
