"""Pyramid shapes: grouping by 3, carried remainders, window-limited groups, one-leaf pyramids."""

from __future__ import annotations

import pytest
from synth_helpers import SUMMARY_CUE, synth_llm

from chunkwise.embed import HashingEmbedder
from chunkwise.errors import BadInput
from chunkwise.llm import Request
from chunkwise.synth.prompting import SynthPrompts
from chunkwise.synth.pyramid import PyramidError, summary_calls_per_leaf
from chunkwise.synth.pyramid_builder import PyramidBuilder, PyramidConfig, plan_sizes
from chunkwise.synth.summaries import clean_summary, summary_problem


def doc_of(n_leaves: int, words: int = 70) -> str:
    """``n_leaves`` paragraphs that each fill one leaf of a 100-token chunk budget."""
    paras = []
    for i in range(n_leaves):
        sents = [
            f"Paragraph {i} sentence {j} talks about topic{i} and item{j} at length."
            for j in range(words // 10)
        ]
        paras.append(" ".join(sents))
    return "\n\n".join(paras)


def build(doc: str, window: int = 2048, chunk_tokens: int = 100, **kw):
    llm = synth_llm(window)
    builder = PyramidBuilder(
        llm,
        SynthPrompts.for_llm(llm),
        HashingEmbedder(),
        PyramidConfig(window=window, chunk_tokens=chunk_tokens, **kw),
    )
    return builder.build(doc), builder, llm


def children(p, node_id):
    return p.by_id[node_id].children


@pytest.mark.parametrize(
    ("n", "levels", "calls", "root_children"),
    [
        (1, 1, 0, []),
        (2, 2, 1, ["0.0", "0.1"]),
        (3, 2, 1, ["0.0", "0.1", "0.2"]),
        (4, 3, 2, ["1.0", "0.3"]),  # 3 leaves summarized, the 4th carried up to the root
        (10, 4, 5, ["2.0", "0.9"]),
        (28, 5, 14, ["3.0", "0.27"]),
    ],
)
def test_shapes_without_window_limit(n, levels, calls, root_children):
    p, builder, _ = build(doc_of(n))
    assert len(p.leaves) == n
    assert p.levels == levels
    assert builder.report.summary_calls == calls == len(p.summary_nodes())
    assert p.root.children == root_children
    # every non-root node has exactly one parent; every leaf is under the root
    parents = [c for node in p.nodes for c in node.children]
    assert sorted(parents) == sorted(node.id for node in p.nodes if node.id != p.root_id)
    assert p.root.leaves == (0, n - 1)
    assert all(len(node.children) <= 3 for node in p.nodes)
    if n >= 2:
        assert summary_calls_per_leaf(p) <= 0.6
    # spans: a parent covers exactly its children's spans
    for node in p.summary_nodes():
        kids = [p.by_id[c] for c in node.children]
        assert node.leaves == (kids[0].leaves[0], kids[-1].leaves[1])
        assert node.level == 1 + max(k.level for k in kids)


def test_one_leaf_pyramid_is_its_own_root():
    p, builder, llm = build("A single short sentence about a lighthouse keeper and his cat.")
    assert p.levels == 1 and p.root_id == "0.0" and p.root.level == 0
    assert llm.calls == [] and builder.report.summary_calls == 0
    assert p.root.sentences and p.root.sentences[0].importance == 1.0


def test_empty_document_raises_reason():
    with pytest.raises(PyramidError, match="empty_document"):
        build("   \n\n  ")


def _prompt_tokens(llm, req: Request) -> int:
    return llm.prompt_tokens(req.prompt)


def test_window_limited_groups_shrink_and_every_prompt_fits():
    # leaves of ~240 tokens; a window where two leaves (plus the key-sentence list) fit but not three
    llm = synth_llm(900)
    prompts = SynthPrompts.for_llm(llm)
    builder = PyramidBuilder(
        llm, prompts, HashingEmbedder(), PyramidConfig(window=900, chunk_tokens=260)
    )
    p = builder.build(doc_of(10, words=200))
    assert len(p.leaves) == 10
    level1 = [node for node in p.nodes if node.level == 1]
    assert level1 and all(len(node.children) <= 2 for node in level1)
    assert any(len(node.children) == 2 for node in level1)
    budget = 900 - prompts.params("summary").max_new_tokens
    assert all(_prompt_tokens(llm, r) <= budget for r in llm.calls)
    assert p.root.leaves == (0, 9) and p.levels >= 3


def test_window_fitting_one_leaf_summarizes_singletons_and_converges():
    # leaves of ~360 tokens; a window where one fits but not two
    llm = synth_llm(800)
    prompts = SynthPrompts.for_llm(llm)
    builder = PyramidBuilder(
        llm, prompts, HashingEmbedder(), PyramidConfig(window=800, chunk_tokens=400)
    )
    p = builder.build(doc_of(5, words=300))
    assert len(p.leaves) == 5
    level1 = [
        node
        for node in p.nodes
        if node.level == 1 and all(c.startswith("0.") for c in node.children)
    ]
    assert any(len(node.children) == 1 for node in level1)  # a lone leaf summarized to shrink it
    assert p.root.leaves == (0, len(p.leaves) - 1)
    budget = 800 - prompts.params("summary").max_new_tokens
    assert all(_prompt_tokens(llm, r) <= budget for r in llm.calls)


def test_plan_sizes_groups_of_three_under_budget():
    assert plan_sizes([10] * 7, 100) == [[0, 1, 2], [3, 4, 5], [6]]
    assert plan_sizes([40, 40, 40, 40], 100) == [[0, 1], [2, 3]]
    assert plan_sizes([90, 20, 20, 20], 100) == [[0], [1, 2, 3]]
    assert plan_sizes([200, 10], 100) == [[0], [1]]  # an oversized item still gets a group
    assert plan_sizes([], 100) == []
    assert plan_sizes([1] * 5, 100, fanout=2) == [[0, 1], [2, 3], [4]]


def test_summary_rules():
    kids = "The harbor master counts the boats every morning and writes the numbers in a ledger."
    assert summary_problem("", kids) == "empty"
    assert summary_problem("Boats.", kids) == "too_short"
    assert summary_problem("1234 5678 !!!! #### harbor", kids) == "not_words"
    assert summary_problem("the boats the boats the boats the boats the boats", kids) == "looping"
    assert (
        summary_problem("Quantum chromodynamics explains gluon confinement inside protons.", kids)
        == "unrelated"
    )
    assert summary_problem("The harbor master counts boats each morning in a ledger.", kids) is None
    assert (
        summary_problem("The harbor master is a key sentence of the text above.", kids)
        == "scaffold"
    )
    assert clean_summary("- the harbor master\n- counts boats") == "The harbor master counts boats"


def test_garbage_summaries_fall_back_to_extractive_and_are_counted():
    llm = synth_llm(2048, summary=" @@@@ #### 1234 !!!!")
    builder = PyramidBuilder(
        llm,
        SynthPrompts.for_llm(llm),
        HashingEmbedder(),
        PyramidConfig(window=2048, chunk_tokens=100),
    )
    p = builder.build(doc_of(4))
    assert all(node.origin == "extractive" for node in p.summary_nodes())
    assert builder.report.repairs["summary_extractive_fallback"] == 2
    assert builder.report.repairs["summary_rejected_not_words"] == 4  # first try + one retry each
    for node in p.summary_nodes():
        assert node.text.strip() and node.sentences
    summary_prompts = [r for r in llm.calls if SUMMARY_CUE in r.prompt]
    assert len(summary_prompts) == 4


def test_settings_that_cannot_work_are_rejected_up_front():
    llm = synth_llm(2048)
    with pytest.raises(BadInput, match="window"):
        PyramidBuilder(llm, SynthPrompts.for_llm(llm), HashingEmbedder(), PyramidConfig(window=300))
    with pytest.raises(BadInput, match="chunk-tokens"):
        PyramidBuilder(
            llm,
            SynthPrompts.for_llm(llm),
            HashingEmbedder(),
            PyramidConfig(window=1024, chunk_tokens=5000),
        )
    with pytest.raises(BadInput, match="fanout"):
        PyramidBuilder(llm, SynthPrompts.for_llm(llm), HashingEmbedder(), PyramidConfig(fanout=1))


def test_trim_loop_keeps_the_start_of_a_looping_summary():
    from chunkwise.synth.summaries import trim_loop

    text = (
        "The harbor master counts the boats every morning. He writes the numbers down. "
        "He writes the numbers down. He writes the numbers down."
    )
    assert trim_loop(text) == (
        "The harbor master counts the boats every morning. He writes the numbers down."
    )
    # a 3-gram repeated across different sentences stops the text before its 4th use
    grams = "Boats come in. The boats come in early. The boats come in late. The boats come in."
    assert trim_loop(grams) == "Boats come in. The boats come in early. The boats come in late."
    assert trim_loop("the boats " * 5) == ""  # one sentence that loops on its own


def test_a_looping_summary_is_trimmed_without_another_call():
    kids_loop = (
        " The paragraph talks about topic0 and item0 at length. It mentions item1 too."
        " It mentions item1 too. It mentions item1 too. It mentions item1 too."
    )
    llm = synth_llm(2048, summary=kids_loop)
    builder = PyramidBuilder(
        llm,
        SynthPrompts.for_llm(llm),
        HashingEmbedder(),
        PyramidConfig(window=2048, chunk_tokens=100),
    )
    p = builder.build(doc_of(4))
    assert builder.report.repairs["summary_loop_trimmed"] == len(p.summary_nodes()) == 2
    assert builder.report.summary_calls == 2  # no retries
    for node in p.summary_nodes():
        assert node.origin == "llm" and node.text.count("It mentions item1 too.") == 1
