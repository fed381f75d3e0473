"""QASPER / QuALITY / NarrativeQA metrics on hand-checked cases, the loaders, and the
registered benchmarks."""

from __future__ import annotations

import json
import math

import pytest

from chunkwise.errors import BadInput, MissingDependency
from chunkwise.eval import qa_metrics as qm

# --------------------------------------------------------------------------------------------
# QASPER


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
    assert qm.token_f1(prediction, reference) == pytest.approx(expected)


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


# --------------------------------------------------------------------------------------------
# QuALITY

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


# --------------------------------------------------------------------------------------------
# NarrativeQA


def test_bleu_hand_checked():
    # unigram precision 3/3; brevity penalty exp(1 - 6/3)
    assert qm.bleu("the cat sat", "the cat sat on the mat", 1) == pytest.approx(math.exp(-1))
    assert qm.bleu("the cat sat on the mat", "the cat sat on the mat", 4) == pytest.approx(1.0)
    # unsmoothed BLEU-4 (AllenNLP weights 0,0,0,1) is 0 without a shared 4-gram
    assert qm.bleu("the cat sat", "the cat sat on the mat", 4) == 0.0
    assert qm.bleu("the cat sat", "the cat sat on the mat", 4, "raptor") > 0.0
    assert qm.bleu("", "anything", 1) == 0.0


def test_rouge_l_hand_checked():
    # LCS "he ... his father" = 3 of 4 tokens each side
    assert qm.rouge_l("He killed his father", "He murdered his father.") == pytest.approx(0.75)
    assert qm.rouge_l("x " * 150 + "his father", "his father") == 0.0  # cut at 100 words


def test_narrativeqa_takes_the_max_over_references():
    s = qm.narrativeqa_scores(
        "his father", ["He murdered his father.", "His father"], ["rouge_l", "bleu1"]
    )
    assert s["rouge_l"] == pytest.approx(1.0)
    assert s["bleu1"] == pytest.approx(0.5)  # "his" vs "His" differ in case: 1 of 2 unigrams
    with pytest.raises(BadInput):
        qm.narrativeqa_scores("x", ["y"], ["nope"])


def test_meteor_with_local_wordnet():
    try:
        qm.wordnet_corpus()
    except MissingDependency as e:
        pytest.skip(str(e))
    # exact match of 6 unigrams in one chunk: Fmean 1, penalty 0.5 * (1/6)^3
    assert qm.meteor("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(
        1 - 0.5 * (1 / 6) ** 3
    )
    # partial match (the value nltk gives with WordNet 3.0 loaded from the local files)
    assert qm.meteor("a cat was sitting on the mat", "the cat sat on the mat") == pytest.approx(
        0.6147540983606558
    )
    out = qm.narrativeqa_evaluate([("his father", ["His father"]), ("", ["x"])])
    assert out["n"] == 2 and 0 < out["meteor"] < 1


def test_lexnames_matches_wordnet_3():
    lines = qm.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3" and lines[3] == "03\tnoun.Tops\t1"
    assert lines[44] == "44\tadj.ppl\t3" and lines[29] == "29\tverb.body\t2"


def test_install_wordnet_needs_local_files(tmp_path):
    with pytest.raises(MissingDependency, match="wordnet-base"):
        qm.install_wordnet(tmp_path / "out", source=tmp_path / "none")
    src = tmp_path / "dict"
    src.mkdir()
    for f in ("data.noun", "index.noun", "index.sense", "noun.exc"):
        (src / f).write_text("")
    target = qm.install_wordnet(tmp_path / "out", source=src)
    assert (target / "lexnames").read_text() == qm.lexnames_text()
    assert not (target / "data.noun").is_symlink()


# --------------------------------------------------------------------------------------------
# loaders and benchmarks

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
    from chunkwise.data.qasper import load_qasper

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


def test_leval_option_split_and_gold_letter():
    from chunkwise.data.leval import gold_letter, split_options

    q, opts = split_options("Why?\n\n (A) one\n (B) two\n wrapped\n (C) three \n (D) four")
    assert q == "Why?" and opts == ["one", "two wrapped", "three", "four"]
    assert gold_letter("(C) three", opts) == "C" and gold_letter("four", opts) == "D"


def test_leval_benchmark_on_shared_data(shared_dir):
    from chunkwise.eval import qa_benchmarks
    from chunkwise.eval.benchmarks import get_benchmark

    bench = get_benchmark("leval")
    spec = bench.parse_data(str(shared_dir / "data" / "leval"))
    td = bench.load("quality", spec, limit=3)
    assert td.total == 202 and len(td.examples) == 3
    ex = td.examples[0]
    q = bench.build_query("quality", ex, "base", None)
    assert q.task == "multiple_choice" and len(q.options) == 4
    gold = ex["answer"]
    assert bench.score("quality", f"({gold['letter']})", gold, "official", "none") == 1.0
    td = bench.load("scientific_qa", spec, limit=2)
    ex = td.examples[0]
    assert bench.score("scientific_qa", ex["answer"][0], ex["answer"], "official", "none") == 1.0
    assert qa_benchmarks.score_answer("narrative_qa", "his father", ["His father"], "bleu1") > 0


def test_official_quality_loader_and_hard_task(tmp_path):
    from chunkwise.eval import qa_benchmarks  # noqa: F401  (registers)
    from chunkwise.eval.benchmarks import get_benchmark

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
