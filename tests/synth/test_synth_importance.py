"""Importance: leaf centrality, LLM picks, upward propagation, marking in summary prompts."""

from __future__ import annotations

import re

import numpy as np
from synth_helpers import SUMMARY_CUE, synth_llm

from chunkwise.embed import HashingEmbedder
from chunkwise.synth import importance as imp
from chunkwise.synth.prompting import SynthPrompts
from chunkwise.synth.pyramid_builder import PyramidBuilder, PyramidConfig

EMB = HashingEmbedder(2048)


def test_centrality_prefers_sentences_the_document_repeats():
    texts = [
        "The harbor master counts the fishing boats every morning.",
        "Every morning the harbor master counts fishing boats at the pier.",
        "Fishing boats are counted by the harbor master in the morning.",
        "Quantum gluons confine quarks inside heavy protons.",
        "Ok.",
    ]
    sc = imp.centrality(EMB.encode(texts), texts)
    assert sc.shape == (5,) and sc.min() >= 0 and sc.max() == 1.0
    assert min(sc[:3]) > sc[3]  # the outlier topic ranks below the repeated theme
    assert sc[4] < sc[0]


def test_centrality_edge_cases():
    assert imp.centrality(np.zeros((0, 4)), []).shape == (0,)
    assert imp.centrality(
        EMB.encode(["one sentence only here"]), ["one sentence only here"]
    ).tolist() == [1.0]


def test_parent_sentence_drawn_from_important_child_ranks_high():
    children = [
        "The treaty was signed in Vienna in 1815 by four great powers.",  # important
        "Lunch was served at noon in the garden.",
        "The weather that day was mild and cloudy.",
    ]
    child_imp = np.array([1.0, 0.1, 0.1], dtype=np.float32)
    parent = [
        "Four great powers signed the treaty in Vienna in 1815.",  # draws on the important one
        "Lunch was served in the garden at noon.",  # draws on an unimportant one
        "Dragons breathe fire over distant mountains.",  # supported by nothing
    ]
    scores = imp.propagate(EMB.encode(parent), EMB.encode(children), child_imp)
    assert scores[0] > scores[1] > scores[2]
    assert scores[0] > 0.3 and scores[2] < 0.05
    # raising the other child's importance raises the sentence that draws on it
    flipped = imp.propagate(EMB.encode(parent), EMB.encode(children), np.array([0.1, 1.0, 0.1]))
    assert flipped[1] > flipped[0]


def test_propagate_degenerate_inputs():
    assert imp.propagate(np.zeros((0, 8)), np.ones((2, 8)), np.ones(2)).shape == (0,)
    assert imp.propagate(np.ones((2, 8)), np.zeros((0, 8)), np.zeros(0)).tolist() == [0.0, 0.0]


def test_top_k_and_picks():
    assert imp.top_k([0.1, 0.9, 0.5, 0.9], 0.5, 8) == [1, 3]
    assert imp.top_k([0.3], 0.2, 8) == [0]
    assert imp.top_k([], 0.2, 8) == []
    assert imp.top_k([0.5] * 100, 0.2, 8) == list(range(8))
    assert imp.parse_picks("numbers 2, 5 and 2 and 99", 6) == [1, 4]
    assert imp.parse_picks("none of them", 6) == []
    assert imp.apply_picks(np.array([0.4, 0.8]), [0]).tolist() == [1.0, 0.4000000059604645]


def _doc() -> str:
    important = "The secret council met in the northern tower to sign the harbor treaty."
    filler = [
        "Gulls circled over the grey water.",
        "A cart rolled past the bakery.",
        "Rain fell on the cobblestones.",
        "The bell rang twice at noon.",
    ]
    # the treaty theme recurs in each paragraph, so centrality makes its sentences important
    paras = []
    for i in range(3):
        paras.append(
            " ".join(
                [
                    *filler,
                    important.replace("northern", ["northern", "eastern", "old"][i]),
                    f"The harbor treaty was signed by council member {i}.",
                ]
            )
        )
    return "\n\n".join(paras)


def test_marked_sentences_reach_the_summary_prompt_and_carry_importance_up():
    llm = synth_llm(2048)
    builder = PyramidBuilder(
        llm, SynthPrompts.for_llm(llm), EMB, PyramidConfig(window=2048, chunk_tokens=90)
    )
    p = builder.build(_doc())
    assert len(p.leaves) == 3 and p.levels == 2
    prompt = next(r.prompt for r in llm.calls if SUMMARY_CUE in r.prompt)
    keys = re.search(r"Key sentences:\n(.*?)\n\n", prompt, re.S).group(1)
    assert "treaty" in keys and "Gulls" not in keys
    # the scripted summarizer keeps the first two key sentences: they are treaty sentences,
    # so the root's sentences inherit high importance
    root = p.root
    assert root.origin == "llm" and all("treaty" in t for t in root.sentence_texts())
    assert min(s.importance for s in root.sentences) > 0.3
    # importance is kept per node
    d = p.to_dict()
    assert all(len(s) == 3 for n in d["nodes"] for s in n["sentences"])


def test_llm_rated_importance_uses_picks_and_survives_garbage():
    llm = synth_llm(2048)
    llm._compiled.insert(
        0, (re.compile(r"most important sentences above are$", re.S), lambda m: " 2 and 3")
    )
    builder = PyramidBuilder(
        llm,
        SynthPrompts.for_llm(llm),
        EMB,
        PyramidConfig(window=2048, chunk_tokens=90, importance="llm"),
    )
    p = builder.build(_doc())
    leaf = p.leaves[0]
    assert [s.importance for s in leaf.sentences][1:3] == [1.0, 1.0]
    assert all(s.importance <= 0.5 for k, s in enumerate(leaf.sentences) if k not in (1, 2))
    bad = synth_llm(2048)
    bad._compiled.insert(
        0, (re.compile(r"most important sentences above are$", re.S), lambda m: " none")
    )
    b2 = PyramidBuilder(
        bad,
        SynthPrompts.for_llm(bad),
        EMB,
        PyramidConfig(window=2048, chunk_tokens=90, importance="llm"),
    )
    b2.build(_doc())
    assert b2.report.repairs["importance_unparsed"] == 3
