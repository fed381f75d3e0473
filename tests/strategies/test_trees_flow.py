"""retrieval / raptor / dtcrs control flow with the scripted double and the model-free
hashing embedder: exact LLM call counts by kind, caching, routing and the ablation switches.

One umap warm-up for the module (``warm_umap``); it is reported apart from build times.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("umap")
pytest.importorskip("sklearn")

from trees_helpers import EMB, Q, kinds_seen, scripted, stage, topic_document

from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import (
    Query,
    clustering,
    get_strategy,
)
from chunkwise.strategies.dtcrs import parse_subquestions, parse_yes, spread_excerpt
from chunkwise.strategies.tree import CALL_KINDS, Tree


@pytest.fixture(scope="module", autouse=True)
def warm_umap():
    return clustering.warm_up()


def test_retrieval_one_answer_call_under_budget():
    llm = scripted()
    strat = get_strategy("retrieval", embedder=EMB, chunk_tokens=40, max_context_tokens=120)
    ans = strat.answer(topic_document(), Q, llm)
    assert ans.text == "4711"
    st = ans.stats.extra
    assert st["llm_calls_by_kind"] == {**dict.fromkeys(CALL_KINDS, 0), "answer": 1}
    assert ans.stats.llm_calls == 1 == len(llm.calls)
    assert st["context_tokens"] <= 120 and st["retrieved"] >= 1
    assert st["summary_nodes"] == 0 and not st["index_cached"]
    again = strat.answer(topic_document(), Q, llm)
    assert again.stats.extra["index_cached"] and again.stats.extra["build_seconds"] == 0


def test_raptor_builds_once_and_counts_every_call():
    llm = scripted()
    strat = get_strategy(
        "raptor", embedder=EMB, chunk_tokens=20, max_context_tokens=200, max_cluster_tokens=400
    )
    doc = topic_document()
    ans = strat.answer(doc, Q, llm)
    st = ans.stats.extra
    n_sum = st["summary_nodes"]
    assert st["leaves"] > clustering.DEFAULT_DIM + 1  # enough leaves to cluster
    assert n_sum >= 1 and n_sum == sum(st["tree_nodes_per_layer"][1:])
    assert st["llm_calls_by_kind"] == {
        **dict.fromkeys(CALL_KINDS, 0),
        "summarize": n_sum,
        "answer": 1,
    }
    assert kinds_seen(llm) == st["llm_calls_by_kind"]
    assert ans.stats.llm_calls == n_sum + 1
    assert [e.stage for e in ans.trace].count("summarize") == n_sum
    assert not st["tree_cached"] and st["build_seconds"] >= 0
    assert "umap_warmup_seconds" in st and ans.text == "4711"
    # the same document again: the tree is reused, only the answer is asked
    before = len(llm.calls)
    again = strat.answer(doc, Query("Which topic comes first?"), llm)
    assert len(llm.calls) - before == 1
    a = again.stats.extra
    assert a["tree_cached"] and a["summary_nodes"] == 0 and a["build_seconds"] == 0
    assert a["tree_summary_nodes"] == n_sum
    assert a["llm_calls_by_kind"]["summarize"] == 0


def test_raptor_is_deterministic_and_the_disk_cache_round_trips(tmp_path):
    doc = topic_document()
    counts = []
    for _ in range(2):
        llm = scripted()
        strat = get_strategy("raptor", embedder=EMB, chunk_tokens=20, cache_dir=str(tmp_path))
        counts.append(strat.answer(doc, Q, llm).stats.extra)
        if len(counts) == 1:
            files = list(tmp_path.glob("*.json"))
            assert len(files) == 1
            tree = Tree.from_json(files[0].read_text())
            assert tree.summary_nodes == counts[0]["summary_nodes"]
    assert counts[1]["tree_cached"]  # a new strategy instance found the tree on disk
    assert counts[1]["tree_summary_nodes"] == counts[0]["summary_nodes"]


def test_raptor_traversal_option():
    llm = scripted()
    strat = get_strategy("raptor", embedder=EMB, chunk_tokens=20, retrieval="traversal", top_k=2)
    ans = strat.answer(topic_document(), Q, llm)
    st = ans.stats.extra
    assert st["retrieval"] == "traversal"
    assert st["retrieved"] <= 2 * (st["tree_layers"] + 1)


def test_raptor_short_document_has_no_summary_layer():
    llm = scripted()
    ans = get_strategy("raptor", embedder=EMB).answer("One sentence. Two sentences.", Q, llm)
    assert ans.stats.extra["summary_nodes"] == 0 and ans.stats.extra["tree_stop"] == "too few nodes"
    assert len(llm.calls) == 1


def dtcrs(**kw):
    opts = dict(embedder=EMB, chunk_tokens=25, max_context_tokens=200, toc_input_tokens=200)
    opts.update(kw)
    return get_strategy("dtcrs", **opts)


def test_dtcrs_complex_question_builds_one_node_per_subquestion():
    llm = scripted()
    strat = dtcrs()
    ans = strat.answer(topic_document(), Q, llm)
    st = ans.stats.extra
    assert st["route"] == "tree"
    assert len(st["subquestions"]) == 3 and not st["decomposition_fallback"]
    assert st["first_layer_components"] == 3
    assert st["first_layer_clusters"] == 3 == st["summary_nodes"]  # one summary per topic
    assert st["tree_nodes_per_layer"][1:] == [3]
    assert st["llm_calls_by_kind"] == {
        "toc": 1,
        "classify": 1,
        "decompose": 1,
        "summarize": 3,
        "answer": 1,
    }
    assert kinds_seen(llm) == st["llm_calls_by_kind"]
    assert ans.stats.llm_calls == 7 and ans.text == "4711"
    # a second question: the table of contents is reused, the tree is built again
    again = strat.answer(topic_document(), Query("How do the topics relate?"), llm)
    k = again.stats.extra["llm_calls_by_kind"]
    assert k["toc"] == 0 and again.stats.extra["toc_cached"]
    assert k["classify"] == 1 and k["decompose"] == 1 and k["summarize"] == 3


def test_dtcrs_simple_question_goes_to_retrieval():
    llm = scripted(classify=" no")
    ans = dtcrs().answer(topic_document(), Q, llm)
    st = ans.stats.extra
    assert st["route"] == "retrieval" and st["summary_nodes"] == 0
    assert st["llm_calls_by_kind"] == {
        **dict.fromkeys(CALL_KINDS, 0),
        "toc": 1,
        "classify": 1,
        "answer": 1,
    }
    assert ans.stats.llm_calls == 3 and ans.text == "4711"


def test_dtcrs_ablation_switches():
    doc = topic_document()
    llm = scripted(classify=" no")
    st = dtcrs(classifier="false").answer(doc, Q, llm).stats.extra  # strings are coerced
    assert st["route"] == "tree" and st["llm_calls_by_kind"]["classify"] == 0

    llm = scripted()
    st = dtcrs(toc=False).answer(doc, Q, llm).stats.extra
    assert st["llm_calls_by_kind"]["toc"] == 0
    assert all("Table of contents" not in r.prompt for r in llm.calls)

    llm = scripted()
    st = dtcrs(decomposition=False).answer(doc, Q, llm).stats.extra
    assert st["llm_calls_by_kind"]["decompose"] == 0
    assert st["subquestions"] == [Q.question] and st["first_layer_components"] == 1

    llm = scripted()
    st = dtcrs(global_clustering=False, chunk_tokens=10).answer(doc, Q, llm).stats.extra
    assert st["ablation"]["global_clustering"] is False
    assert st["summary_nodes"] >= 3


def test_dtcrs_decomposition_retries_then_falls_back():
    llm = scripted(decompose=" What about apples in the orchard?")
    # preset v1 (this project's earlier rule); the reference takes every line, no retries
    st = dtcrs(decompose_retries=2, preset="v1").answer(topic_document(), Q, llm).stats.extra
    assert st["llm_calls_by_kind"]["decompose"] == 3
    assert st["decomposition_fallback"]
    assert st["subquestions"] == ["What about apples in the orchard?", Q.question]
    retries = [r for r in llm.calls if stage(r.prompt) == "decompose"]
    assert retries[0].params.temperature == 0 and retries[1].params.temperature > 0


def test_stats_carry_tokens_and_build_seconds():
    llm = scripted()
    st = dtcrs().answer(topic_document(), Q, llm).stats
    d = st.to_dict()
    for key in (
        "llm_calls",
        "prompt_tokens",
        "completion_tokens",
        "summary_nodes",
        "build_seconds",
        "umap_warmup_seconds",
        "llm_calls_by_kind",
        "tokens_by_kind",
    ):
        assert key in d, key
    assert d["prompt_tokens"] > 0 and sum(d["tokens_by_kind"].values()) == (
        d["prompt_tokens"] + d["completion_tokens"]
    )


def test_chat_models_get_instructions():
    llm = ScriptedLLM(
        rules=[
            (r"table of contents for the document", "1. Apples\n2. Rockets"),
            (r'Reply "Yes"', "Yes"),
            (r"sub-questions", "1. What about apples?\n2. What about rockets?"),
            (r"Summarize the passages", "A summary."),
        ],
        default="4711",
    )
    llm.chat = True
    st = dtcrs().answer(topic_document(), Q, llm).stats.extra
    assert st["prompt_kind"] == "chat" and st["first_layer_components"] == 2
    assert all(isinstance(r.prompt, list) for r in llm.calls)


def test_parsers():
    text = "1. What is A?\n2) What is B?\n- What is C?\nnoise line\nWhat is D?\n1. What is A?"
    assert parse_subquestions(text) == ["What is A?", "What is B?", "What is C?", "What is D?"]
    assert parse_subquestions(text, limit=2) == ["What is A?", "What is B?"]
    assert parse_yes(" Yes, several.") and not parse_yes(" no") and not parse_yes("eyes")


def test_spread_excerpt_covers_the_whole_document():
    llm = scripted()
    doc = topic_document(sentences_per_topic=40)
    ex = spread_excerpt(doc, llm, 150)
    assert llm.count_tokens(ex) <= 150
    assert re.search(r"apples", ex) and re.search(r"violins", ex)
    assert spread_excerpt("Short text.", llm, 150) == "Short text."
