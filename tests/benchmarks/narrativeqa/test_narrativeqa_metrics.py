"""NarrativeQA's metrics on hand-checked cases, and WordNet for METEOR from local files."""

from __future__ import annotations

import math

import pytest

from chunkwise.benchmarks.narrativeqa import metrics as qm
from chunkwise.benchmarks.narrativeqa import wordnet
from chunkwise.errors import BadInput, MissingDependency


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
        wordnet.wordnet_corpus()
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
    lines = wordnet.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3" and lines[3] == "03\tnoun.Tops\t1"
    assert lines[44] == "44\tadj.ppl\t3" and lines[29] == "29\tverb.body\t2"


def test_install_wordnet_needs_local_files(tmp_path):
    with pytest.raises(MissingDependency, match="wordnet-base"):
        wordnet.install_wordnet(tmp_path / "out", source=tmp_path / "none")
    src = tmp_path / "dict"
    src.mkdir()
    for f in ("data.noun", "index.noun", "index.sense", "noun.exc"):
        (src / f).write_text("")
    target = wordnet.install_wordnet(tmp_path / "out", source=src)
    assert (target / "lexnames").read_text() == wordnet.lexnames_text()
    assert not (target / "data.noun").is_symlink()
