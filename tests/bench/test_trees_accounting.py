"""What a question paid and what a cache spared it, as bench/trees.py reads the stats;
and ``chunkwise answer --json`` printing a tree strategy's whole stats. Scripted LLM and the
hashing embedder (no model); one umap warm-up for the module."""

from __future__ import annotations

import json
from statistics import mean

import pytest

pytest.importorskip("umap")
pytest.importorskip("sklearn")

from bench_loader import load_bench
from chunkwise.cli import main
from chunkwise.strategies import Query, clustering, get_strategy
from strategies.trees_helpers import EMB, Q, scripted, topic_document


@pytest.fixture(scope="module", autouse=True)
def warm_umap():
    return clustering.warm_up()


@pytest.fixture(scope="module")
def bench():
    return load_bench("trees")


def by_question(m) -> str:
    return " no" if "comes first" in m.string else " yes"


def test_dtcrs_per_question_view_adds_back_toc_and_leaf_embeddings(bench):
    strat = get_strategy("dtcrs", embedder=EMB, chunk_tokens=25)
    llm = scripted(classify=by_question)
    doc = topic_document()
    questions = (Q, Query("Which topic comes first?"), Query("How do the topics relate?"))
    rows = [bench.accounting(strat.answer(doc, q, llm).stats.to_dict()) for q in questions]
    first, simple, second = rows
    assert first["route"] == "tree" == second["route"] and simple["route"] == "retrieval"
    assert first["reused_seconds"] == 0.0 and not first["toc_cached"]
    assert simple["calls_by_kind"]["summarize"] == 0 == simple["reused_summary_calls"]
    assert second["toc_cached"] and second["leaves_cached"]
    ((_, toc_s),) = strat._tocs.values()
    ((_, leaf_s),) = strat._leaves.values()
    (idx,) = strat.dpr._index.values()
    # the routed question reused the table of contents; the second tree question reused it
    # and the leaf embeddings
    assert simple["reused_seconds"] == round(toc_s, 3)
    assert second["reused_seconds"] == round(round(toc_s, 3) + leaf_s, 3)
    view = bench.per_question_view(rows)
    n1, n2 = first["calls_by_kind"]["summarize"], second["calls_by_kind"]["summarize"]
    assert n1 >= 1 and view["summary_calls"] == round(mean([n1, 0, n2]), 3)
    assert view["build_seconds"] == round(
        mean(r["build_seconds"] + r["reused_seconds"] for r in rows), 3
    )
    # a later routed question also reuses the retrieval index
    again = bench.accounting(strat.answer(doc, questions[1], llm).stats.to_dict())
    assert again["reused_seconds"] == round(round(toc_s, 3) + idx.seconds, 3)


def test_raptor_per_question_view_charges_the_whole_tree_to_every_question(bench):
    strat = get_strategy("raptor", embedder=EMB, chunk_tokens=20)
    llm = scripted()
    doc = topic_document()
    rows = [
        bench.accounting(strat.answer(doc, q, llm).stats.to_dict())
        for q in (Q, Query("Which topic comes first?"))
    ]
    built, reused = rows
    n = built["calls_by_kind"]["summarize"]
    assert n >= 1 and reused["calls_by_kind"]["summarize"] == 0
    assert reused["reused_summary_calls"] == n and reused["reused_seconds"] > 0
    assert reused["reused_seconds"] == built["tree_build_seconds"]
    view = bench.per_question_view(rows)
    assert view["summary_calls"] == n
    assert view["build_seconds"] == round(built["build_seconds"], 3)


def test_answer_json_prints_the_whole_stats(tmp_path, capsys):
    doc = tmp_path / "doc.txt"
    doc.write_text(topic_document())
    code = main(
        [
            "answer",
            "--model",
            "scripted:passkey",
            "--strategy",
            "raptor",
            "--strategy-args",
            f"embedder={EMB},chunk_tokens=20",
            "--doc",
            str(doc),
            "--question",
            "What is the secret launch code?",
            "--json",
        ]
    )
    assert code == 0
    stats = json.loads(capsys.readouterr().out)["stats"]
    for key in ("llm_calls", "summary_nodes", "llm_calls_by_kind", "leaves", "tree_layers"):
        assert key in stats, key
    assert stats["llm_calls_by_kind"]["summarize"] == stats["summary_nodes"] >= 1
    assert stats["llm_calls"] == stats["summary_nodes"] + 1
