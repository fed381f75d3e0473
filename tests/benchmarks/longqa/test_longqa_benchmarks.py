"""LongQA (HELMET-style) and NarrativeQA benchmarks: loaders, scorers, and a scripted run."""

from __future__ import annotations

import json

import pytest

from chunkwise.benchmarks import get_benchmark
from chunkwise.benchmarks.longqa import metrics
from chunkwise.errors import BadInput

STORY = "Once upon a time Marie lived in Paris. She discovered radium in her small shed."


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture()
def longqa_dir(tmp_path):
    write_jsonl(
        tmp_path / "longbook_qa_eng.jsonl",
        [
            {
                "id": 0,
                "context": STORY,
                "input": "What did Marie discover?",
                "answer": ["radium"],
                "options": [],
            },
        ],
    )
    write_jsonl(
        tmp_path / "longbook_choice_eng.jsonl",
        [
            {
                "id": 0,
                "context": STORY,
                "input": "Where did Marie live?",
                "answer": ["Paris"],
                "options": ["Rome", "Paris", "Oslo", "Lima"],
            },
        ],
    )
    (tmp_path / "narrativeqa").mkdir()
    write_jsonl(
        tmp_path / "narrativeqa" / "test.jsonl",
        [
            {
                "document": {"id": "d1", "text": STORY, "word_count": 15},
                "question": {"text": "Where was the shed?"},
                "answers": [{"text": "In Paris"}, {"text": "Paris"}],
            },
            {
                "document": {"id": "d1", "text": STORY, "word_count": 15},
                "question": {"text": "Who lived in Paris?"},
                "answers": [{"text": "Marie"}],
            },
        ],
    )
    return tmp_path


def test_longqa_loads_three_tasks_from_a_folder(longqa_dir):
    b = get_benchmark("longqa")
    spec = b.parse_data(str(longqa_dir))
    qa = b.load("en_qa", spec).examples
    assert qa[0]["answer"] == ["radium"]
    mc = b.load("en_mc", spec).examples
    assert mc[0]["answer"] == {
        "letter": "B",
        "text": "Paris",
        "options": ["Rome", "Paris", "Oslo", "Lima"],
    }
    nqa = b.load("narrativeqa", spec, limit=1)
    assert nqa.total == 2 and len(nqa.examples) == 1
    assert (
        nqa.examples[0]["answer"] == ["In Paris", "Paris"] and nqa.examples[0]["context"] == STORY
    )
    q = b.build_query("en_mc", mc[0], "base")
    assert q.task == "multiple_choice" and q.options[1] == "Paris"
    with pytest.raises(BadInput):
        b.parse_data("/no/such/folder")


def test_scorers():
    gold_mc = {"letter": "B", "text": "Paris", "options": ["Rome", "Paris", "Oslo", "Lima"]}
    assert metrics.score("en_mc", "B", gold_mc) == 1.0
    assert metrics.score("en_mc", "The answer is (B).", gold_mc, "exact_match") == 1.0
    assert metrics.score("en_mc", "Rome", gold_mc) == 0.0
    assert metrics.score("en_qa", "Radium.", ["radium"], "exact_match") == 1.0
    assert metrics.score("en_qa", "she found radium", ["radium"], "exact_match") == 0.0
    assert 0 < metrics.score("en_qa", "she found radium", ["radium"]) < 1  # ROUGE-L F1
    assert metrics.score("narrativeqa", "In Paris", ["Paris", "In Paris"]) == pytest.approx(1.0)
    with pytest.raises(BadInput):
        metrics.score("en_qa", "x", ["y"], "bleu")


def test_narrativeqa_sources_and_filters(longqa_dir, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from chunkwise.benchmarks.narrativeqa.loader import load_narrativeqa, parse_data_spec

    rows = [
        json.loads(x) for x in (longqa_dir / "narrativeqa" / "test.jsonl").read_text().splitlines()
    ]
    folder = tmp_path / "pq" / "data"
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "test-00000-of-00001.parquet")
    ex, src = load_narrativeqa(str(tmp_path / "pq"))
    assert [e["input"] for e in ex] == ["Where was the shed?", "Who lived in Paris?"]
    assert src["source"] == "local" and src["files"] == 1
    ex, src = load_narrativeqa(str(tmp_path / "pq") + "?min_words=100")
    assert ex == [] and src["total"] == 0
    flat = tmp_path / "flat.jsonl"
    write_jsonl(flat, [{"id": "a", "context": STORY, "question": "Who?", "answers": ["Marie"]}])
    assert load_narrativeqa(str(flat))[0][0]["answer"] == ["Marie"]
    spec = parse_data_spec("hub:validation?min_words=5")
    assert (spec.kind, spec.split, spec.min_words) == ("hub", "validation", 5)
    for bad in ("hub:dev", "hub?max=3", "/nope"):
        with pytest.raises(BadInput):
            parse_data_spec(bad)
    write_jsonl(flat, [{"id": "a", "context": STORY, "question": "Who?", "answers": []}])
    with pytest.raises(BadInput, match=r"flat.jsonl:1: .answers. holds no non-empty reference"):
        load_narrativeqa(str(flat))


def test_chain_of_agents_runs_through_the_runner(longqa_dir, tmp_path):
    from chunkwise.eval.runner import EvalConfig, run_eval
    from chunkwise.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(
        rules=[(r"Earlier notes", " Marie discovered radium in Paris."), (r"^Notes:", " radium")],
        window=2048,
    )
    cfg = EvalConfig(
        model="scripted:test",
        strategy="chain_of_agents",
        strategy_args={"memory_tokens": "32", "ordering": "chowliu", "embedder": "hashing"},
        benchmark="longqa",
        tasks=["en_qa", "narrativeqa"],
        data=str(longqa_dir),
        output=str(tmp_path / "run"),
        scorer="exact_match",
    )
    res = run_eval(cfg, llm=llm, progress=False)
    assert res is not None
    lines = [
        json.loads(x)
        for x in (tmp_path / "run" / "predictions" / "en_qa.jsonl").read_text().splitlines()
    ]
    assert lines[0]["prediction"] == "radium" and lines[0]["stats"]["ordering"] == "chowliu"


def test_narrativeqa_metrics_as_scorers():
    assert metrics.score("narrativeqa", "his father", ["His father"], "bleu1") == pytest.approx(0.5)
    assert metrics.score("narrativeqa", "a b c d", ["a b c d"], "bleu4") == pytest.approx(1.0)
    with pytest.raises(BadInput):
        metrics.score("en_mc", "B", {"letter": "B", "options": ["x", "y"]}, "bleu1")
    from chunkwise.benchmarks.narrativeqa.wordnet import wordnet_corpus
    from chunkwise.errors import MissingDependency

    try:
        wordnet_corpus()
    except MissingDependency as e:
        pytest.skip(str(e))
    assert (
        metrics.score("narrativeqa", "the cat sat on the mat", ["the cat sat on the mat"], "meteor")
        > 0.99
    )
