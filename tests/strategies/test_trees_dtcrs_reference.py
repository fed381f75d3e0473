"""DTCRS defaults to the settings of its reference code (luoguanran/DTCRS); ``preset=v1``
keeps this project's earlier ones. One test pins each default by its behaviour.

Reference values, read from the code: ``cluster_tree_builder.py`` stops at
``len(nodes) <= reduction_dimension + 1`` for layer 0 too; ``cluster_utils.py``
``max_length_in_cluster=10000`` and re-clusters an oversized cluster with the same
sub-questions; ``query_breakdown.py`` keeps every non-empty line of the decomposition and
reads ``document_text[:125000]`` for the table of contents; ``RetrievalAugmentation.py``
retrieves with ``max_tokens=3500, top_k=10``. Scripted LLM and the hashing embedder; one
umap warm-up for the module.
"""

from __future__ import annotations

import pytest

pytest.importorskip("umap")
pytest.importorskip("sklearn")

from trees_helpers import EMB, TOPICS, Q, scripted, stage, topic_document

from chunkwise.strategies import Stats, clustering, get_strategy
from chunkwise.strategies.dtcrs import DTCRS, PRESETS, head_excerpt, parse_lines
from chunkwise.strategies.tree import TreeRun


@pytest.fixture(scope="module", autouse=True)
def warm_umap():
    return clustering.warm_up()


def one_sentence_leaves(n: int) -> str:
    """``n`` sentences, each filling one 25-token leaf on its own (two never fit)."""
    words = " ".join(TOPICS.values()).split()
    sents = [
        " ".join(words[(i * 7 + j) % len(words)] for j in range(16)).capitalize() + f" {i}."
        for i in range(n)
    ]
    return " ".join(sents) + " The secret launch code is 4711."


def test_preset_values_are_the_reference_and_v1_keeps_ours():
    ref = DTCRS()
    assert ref.preset == "reference"
    assert ref.leaf_threshold == clustering.DEFAULT_DIM + 2 == 12
    assert ref.max_cluster_tokens == 10000 and ref.recluster == "guided"
    assert ref.subquestions == "lines" and ref.max_subquestions == 0
    assert ref.min_subquestions == 1 and ref.decompose_retries == 0
    assert ref.max_context_tokens == 3500 == ref.dpr.max_context_tokens and ref.top_k == 10
    assert ref.toc_input == "head" and ref.toc_input_chars == 125000
    assert ref.toc_input_tokens == 0 and ref.global_clustering
    old = DTCRS(preset="v1")
    assert (old.leaf_threshold, old.max_cluster_tokens, old.recluster) == (2, 3500, "raptor")
    assert (old.subquestions, old.min_subquestions, old.max_subquestions) == ("numbered", 2, 5)
    assert (old.decompose_retries, old.max_context_tokens, old.top_k) == (2, 2000, 0)
    assert (old.toc_input, old.toc_input_tokens) == ("spread", 3000)
    assert DTCRS(preset="v1", max_context_tokens=900).max_context_tokens == 900  # explicit wins
    assert set(PRESETS["reference"]) == set(PRESETS["v1"])


@pytest.mark.parametrize("leaves", [11, 12])
def test_layer_zero_stop_rule(leaves):
    llm = scripted()
    strat = get_strategy("dtcrs", embedder=EMB, chunk_tokens=25, classifier=False)
    st = strat.answer(one_sentence_leaves(leaves - 1), Q, llm).stats.extra
    assert st["leaves"] == leaves
    if leaves <= 11:  # dim + 1 or fewer: no summary layer (3 of 15 QuALITY documents)
        assert st["summary_nodes"] == 0 == st["llm_calls_by_kind"]["summarize"]
        assert st["tree_stop"] == "too few leaves"
    else:
        assert st["summary_nodes"] >= 1
    st = get_strategy("dtcrs", embedder=EMB, chunk_tokens=25, classifier=False, preset="v1").answer(
        one_sentence_leaves(leaves - 1), Q, scripted()
    )
    assert st.stats.extra["summary_nodes"] >= 1  # v1: two leaves were enough


def test_every_nonempty_line_is_a_subquestion_without_retries():
    reply = (
        " What about apples?\n2. What about rockets?\n\n  - violins and bows\n"
        "Orchard harvest timing\n5. Launch pad fuel\n6) concert tuning\nthe end"
    )
    llm = scripted(decompose=reply.replace("\n\n", "\n"))
    # 41 leaves: a few per component for the 7-component mixture
    st = (
        get_strategy("dtcrs", embedder=EMB, chunk_tokens=25)
        .answer(topic_document(40), Q, llm)
        .stats.extra
    )
    assert st["subquestions"] == [
        "What about apples?",
        "What about rockets?",
        "violins and bows",
        "Orchard harvest timing",
        "Launch pad fuel",
        "concert tuning",
        "the end",
    ]
    assert st["llm_calls_by_kind"]["decompose"] == 1 and not st["decomposition_fallback"]
    assert st["first_layer_components"] == 7
    assert parse_lines("1.\n\n2. x\n") == ["x"]
    # v1 kept only list items and questions, at most 5, and retried when under 2
    old = get_strategy("dtcrs", embedder=EMB, chunk_tokens=25, preset="v1")
    st = old.answer(topic_document(), Q, scripted(decompose=reply.replace("\n\n", "\n")))
    assert len(st.stats.extra["subquestions"]) == 5


def test_retrieval_budget_is_3500_tokens_at_most_10_nodes():
    llm = scripted()
    llm.window = 16000
    st = (
        get_strategy("dtcrs", embedder=EMB, chunk_tokens=25)
        .answer(topic_document(40), Q, llm)
        .stats.extra
    )
    assert st["context_budget"] == 3500 and st["retrieved"] <= 10
    llm = scripted(classify=" no")
    llm.window = 16000
    simple = get_strategy("dtcrs", embedder=EMB).answer(topic_document(), Q, llm).stats.extra
    assert simple["route"] == "retrieval" and simple["context_budget"] == 3500


def test_table_of_contents_reads_the_first_125k_characters():
    head = "Aardvark chapter opens here. " + "Plain filler sentence in the middle. " * 3500
    doc = head[:125000] + " Zebrafinch appears only after the cut. " * 50
    llm = scripted()
    llm.window = 60000
    strat = DTCRS(embedder=EMB)
    run = TreeRun(llm, Stats(), [])
    strat.table_of_contents(doc, run, strat._prompts(llm, "qa"))
    (call,) = [r for r in llm.calls if stage(r.prompt) == "toc"]
    assert "Aardvark" in call.prompt and "Zebrafinch" not in call.prompt
    assert len(call.prompt) > 120000  # the whole head, not a 3,000-token excerpt
    # never more than fits the window, keeping the head
    cut = head_excerpt(doc, llm, 125000, 500)
    assert llm.count_tokens(cut) <= 500 and cut.startswith("Aardvark")
    # v1: an evenly spaced excerpt of 3,000 tokens, reaching past the head
    llm2 = scripted()
    llm2.window = 60000
    old = DTCRS(embedder=EMB, preset="v1")
    old.table_of_contents(doc, TreeRun(llm2, Stats(), []), old._prompts(llm2, "qa"))
    assert "Zebrafinch" in llm2.calls[0].prompt


def test_oversized_first_layer_clusters_are_reclustered_by_the_subquestions(monkeypatch):
    calls = []
    real = clustering.guided_clusters

    def spy(*args, **kwargs):
        calls.append((len(args[0]), kwargs.get("mode")))
        return real(*args, **kwargs)

    monkeypatch.setattr(clustering, "guided_clusters", spy)
    llm = scripted()
    strat = get_strategy(
        "dtcrs", embedder=EMB, chunk_tokens=25, max_cluster_tokens=80, classifier=False
    )
    st = strat.answer(topic_document(), Q, llm).stats.extra
    assert calls[0][1] == "global"
    assert len(calls) > 1 and all(mode == "hierarchical" for _, mode in calls[1:])
    assert all(n < calls[0][0] for n, _ in calls[1:])  # a cluster's members, re-guided
    assert st["oversized_splits"] > 0
    assert st["first_layer_clusters"] > st["first_layer_components"]


def test_global_clustering_false_changes_the_first_layer():
    """The hierarchical scheme splits a guided cluster of more than dim + 1 chunks again.
    Two sub-questions over three topics leave one cluster holding two topics' chunks."""
    doc = topic_document(sentences_per_topic=40)
    two = " What about apples and orchard harvest?\n2. What about rockets launch orbit?"
    runs = {}
    for flag in (True, False):
        strat = get_strategy(
            "dtcrs", embedder=EMB, chunk_tokens=25, classifier=False, global_clustering=flag
        )
        runs[flag] = strat.answer(doc, Q, scripted(decompose=two)).stats.extra
    ref, abl = runs[True], runs[False]
    assert ref["leaves"] >= 30 and ref["first_layer_components"] == 2
    assert ref["first_layer_mode"] == "global" and abl["first_layer_mode"] == "hierarchical"
    assert ref["first_layer_clusters"] == 2
    assert abl["first_layer_clusters"] > ref["first_layer_clusters"]
    assert abl["summary_nodes"] > ref["summary_nodes"]
