"""Ragas-style answer relevance with a scripted judge and the hashing embedder."""

from __future__ import annotations

import json
import math

import pytest

from chunkwise.benchmarks.answer_relevance import (
    AnswerRelevance,
    looks_noncommittal,
    main,
    parse_judgement,
    summarize,
)
from chunkwise.embed import HashingEmbedder
from chunkwise.llm.scripted import ScriptedLLM


def chat_judge(rules, default="Question: What?\nNoncommittal: no"):
    llm = ScriptedLLM(rules=rules, default=default)
    llm.chat = True
    return llm


def test_relevant_answer_scores_higher_than_an_off_topic_one():
    judge = chat_judge(
        [
            (
                r"Answer: Paris is the capital",
                "Question: What is the capital of France?\nNoncommittal: no",
            ),
            (r"Answer: Bananas are yellow", "Question: What colour are bananas?\nNoncommittal: no"),
        ]
    )
    ar = AnswerRelevance(judge, HashingEmbedder(), k=3)
    good = ar.score("What is the capital of France?", "Paris is the capital of France.")
    bad = ar.score("What is the capital of France?", "Bananas are yellow.")
    assert good.score == pytest.approx(1.0)
    assert bad.score < 0.3
    assert len(good.questions) == 3 and len(good.similarities) == 3
    # k > 1 samples: each of the k requests has its own seed
    reqs = judge.calls[:3]
    assert [r.params.seed for r in reqs] == [0, 1, 2]
    assert all(r.params.temperature > 0 for r in reqs)


def test_noncommittal_scores_zero_from_the_judge_or_the_phrase_floor():
    judge = chat_judge([], default="Question: Where is it?\nNoncommittal: yes")
    ar = AnswerRelevance(judge, HashingEmbedder(), k=2)
    r = ar.score("Where is it?", "It might be somewhere around there, perhaps.")
    assert r.noncommittal and r.score == 0.0 and r.skipped is None
    n = len(judge.calls)
    r = ar.score("Where is it?", "I don't know.")
    assert r.score == 0.0 and r.skipped and len(judge.calls) == n  # judge not asked
    assert ar.score("Where is it?", "").score == 0.0


def test_one_noncommittal_verdict_of_k_zeroes_the_score():
    replies = iter(["Question: Where?\nNoncommittal: no", "Question: Where?\nNoncommittal: yes"])
    judge = chat_judge([(r"^", lambda m: next(replies))])
    r = AnswerRelevance(judge, HashingEmbedder(), k=2).score("Where?", "In the attic.")
    assert r.noncommittal and r.score == 0.0


def test_no_generated_question_is_nan_and_summarized_apart():
    judge = ScriptedLLM(default="")  # a base-model judge that writes nothing
    ar = AnswerRelevance(judge, HashingEmbedder(), k=1)
    r = ar.score("Who?", "Marie Curie.")
    assert math.isnan(r.score)
    s = summarize([r, ar.score("Who?", "unknown")])
    assert s == {"answer_relevance": 0.0, "n": 2, "scored": 1, "no_question": 1, "noncommittal": 1}


def test_base_judge_gets_a_completion_scaffold_and_greedy_when_k_is_1():
    judge = ScriptedLLM(default=" Who discovered radium?\nAnswer: more")
    ar = AnswerRelevance(judge, HashingEmbedder(), k=1)
    r = ar.score("Who discovered radium?", "Marie Curie discovered radium.")
    prompt = judge.calls[0].prompt
    assert isinstance(prompt, str) and prompt.endswith("Question it answers:")
    assert judge.calls[0].params.temperature == 0 and judge.calls[0].params.stop == ("\n",)
    assert r.questions == ["Who discovered radium?"] and r.score == pytest.approx(1.0)


def test_phrases_and_parsing():
    assert looks_noncommittal("The text does not say.")
    assert looks_noncommittal("Unknown")
    assert not looks_noncommittal("The Unknown Soldier")
    assert not looks_noncommittal("In 1879.")
    assert parse_judgement("Question: Why?\nNoncommittal: Yes", "chat") == ("Why?", True)
    assert parse_judgement("Why so?\nmore", "base") == ("Why so?", False)


def test_command_line_over_a_predictions_file(tmp_path, capsys, monkeypatch):
    path = tmp_path / "p.jsonl"
    lines = [
        {
            "id": 1,
            "question": "Who discovered radium?",
            "prediction": "Marie Curie discovered radium.",
        },
        {"id": 2, "question": "Who discovered radium?", "prediction": "I don't know"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    import chunkwise.llm.scripted as scripted

    monkeypatch.setitem(
        scripted.SCRIPTS, "radium", lambda: ScriptedLLM(default=" Who discovered radium?")
    )
    per = tmp_path / "per.jsonl"
    rc = main(
        [
            str(path),
            "--judge",
            "scripted:radium",
            "--embedder",
            "hashing",
            "--k",
            "1",
            "--per-example",
            str(per),
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["n"] == 2
        and out["noncommittal"] == 1
        and out["answer_relevance"] == pytest.approx(50.0)
    )
    assert [json.loads(x)["id"] for x in per.read_text().splitlines()] == [1, 2]
