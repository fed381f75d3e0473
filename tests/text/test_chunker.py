from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkwise.errors import BadInput
from chunkwise.text import HFTokenCounter, WordPieceCounter, chunk_budget, chunk_document

WORDS = ["alpha", "beta", "gamma", "delta", "chunk", "token", "12345", "zeta", "é", "naïve"]
CJK = ["长文档", "被切分", "成块", "模型", "阅读", "答案"]


@st.composite
def english(draw):
    paras = draw(
        st.lists(
            st.lists(
                st.lists(st.sampled_from(WORDS), min_size=1, max_size=12), min_size=1, max_size=5
            ),
            min_size=1,
            max_size=6,
        )
    )
    seps = draw(st.lists(st.sampled_from([". ", "! ", "? ", "; ", ".\n"]), min_size=1, max_size=4))
    out = []
    for p in paras:
        out.append("".join(" ".join(s) + seps[i % len(seps)] for i, s in enumerate(p)))
    return "\n\n".join(out)


@st.composite
def cjk(draw):
    sents = draw(
        st.lists(st.lists(st.sampled_from(CJK), min_size=1, max_size=8), min_size=1, max_size=30)
    )
    return "".join("".join(s) + draw(st.sampled_from("。！？；")) for s in sents)


DOCS = st.one_of(
    english(),
    cjk(),
    st.text(alphabet="abcdefgh", min_size=1, max_size=400),  # no punctuation, no spaces
    st.builds(lambda n: "x" * n, st.integers(1, 3000)),  # one huge word
    st.text(min_size=0, max_size=300),  # anything, whitespace-only included
)


def chunk_or_reject(doc, counter, n):
    """Chunks of ``doc``; None when the chunker rightly refuses: one character alone takes more
    than ``n`` tokens (byte-level tokenizers) and the whole document does not fit either."""
    try:
        return chunk_document(doc, counter, n)
    except BadInput as e:
        assert "one character at a time" in str(e)
        assert counter.count_tokens(doc.strip()) > n
        assert any(counter.count_tokens(ch) > n for ch in set(doc))
        return None


def check_chunks(doc, counter, n, chunks):
    if chunks is None:
        return
    if not doc.strip():
        assert chunks == []
        return
    assert chunks, "a non-blank document gives at least one chunk"
    assert doc[: chunks[0].start_char].strip() == ""
    assert doc[chunks[-1].end_char :].strip() == ""
    for i, c in enumerate(chunks):
        assert c.index == i
        assert c.text == doc[c.start_char : c.end_char]
        assert c.text.strip() == c.text and c.text, "no empty chunks, no edge whitespace"
        assert c.tokens == counter.count_tokens(c.text)
        assert c.tokens <= n
    for a, b in pairwise(chunks):
        assert a.end_char <= b.start_char
        assert doc[a.end_char : b.start_char].strip() == "", "only whitespace between chunks"


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=DOCS, n=st.integers(1, 60))
def test_chunk_properties_real_bpe(tiny_tokenizer, doc, n):
    counter = HFTokenCounter(tiny_tokenizer)
    chunks = chunk_or_reject(doc, counter, n)
    check_chunks(doc, counter, n, chunks)
    if chunks is not None:
        assert chunk_document(doc, counter, n) == chunks  # deterministic


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=DOCS, n=st.integers(1, 80))
def test_chunk_properties_gemma(gemma_tokenizer, doc, n):
    counter = HFTokenCounter(gemma_tokenizer)
    check_chunks(doc, counter, n, chunk_or_reject(doc, counter, n))


@settings(max_examples=100, deadline=None)
@given(doc=DOCS, n=st.integers(1, 40))
def test_chunk_properties_wordpiece(doc, n):
    counter = WordPieceCounter()
    check_chunks(doc, counter, n, chunk_document(doc, counter, n))


def test_prefers_paragraph_then_sentence_boundaries():
    counter = WordPieceCounter()
    para = "One two three four five. Six seven eight nine ten."
    doc = "\n\n".join([para] * 6)
    chunks = chunk_document(doc, counter, 30)
    assert all(c.text.endswith(".") for c in chunks)
    assert all(c.text.startswith("One") for c in chunks), "cut at paragraph starts"
    # A single paragraph longer than the budget is cut at a sentence end.
    long_para = " ".join(["Alpha beta gamma delta."] * 20)
    chunks = chunk_document(long_para, counter, 18)
    assert all(c.text.endswith(".") for c in chunks)


def test_a_one_line_json_object_is_cut_between_pairs_not_inside_one(gemma_tokenizer):
    """kv_retrieval's document is one line of ``"key": "value"`` pairs with no sentence end:
    the clause level cuts after a comma, where a word cut would part a key from its value
    (the evidence audit of 2026-12-06 found every such straddling pair lost)."""
    import json
    import random
    import uuid

    from chunkwise.data.synthetic import gen_kv_retrieval

    counter = HFTokenCounter(gemma_tokenizer)
    rng = random.Random(0)
    pairs = {
        str(uuid.UUID(int=rng.getrandbits(128))): str(uuid.UUID(int=rng.getrandbits(128)))
        for _ in range(300)
    }
    doc = "JSON data:\n" + json.dumps(pairs)
    chunks = chunk_document(doc, counter, 500)
    assert len(chunks) >= 10
    for c in chunks[:-1]:
        assert c.text.endswith('",'), c.text[-60:]
    # every pair lies whole inside one chunk, on the generator's own documents too
    (ex,) = gen_kv_retrieval(length_tokens=4000, n=1, seed=3, count_tokens=counter.count_tokens)
    context = ex["context"]
    chunks = chunk_document(context, counter, 500)
    for key, value in json.loads(context.split("\n", 1)[1]).items():
        pair = f'"{key}": "{value}"'
        assert any(pair in c.text for c in chunks), pair


def test_last_chunk_is_rebalanced_not_a_sliver():
    counter = WordPieceCounter()
    doc = " ".join(f"w{i}" for i in range(105))  # 105 tokens, budget 50 -> 50, 50, 5 unbalanced
    chunks = chunk_document(doc, counter, 50)
    assert len(chunks) == 3
    assert min(c.tokens for c in chunks) >= 25
    plain = chunk_document(doc, counter, 50, rebalance=False)
    assert plain[-1].tokens == 5


def test_overlap_repeats_tokens():
    counter = WordPieceCounter()
    doc = " ".join(f"w{i}" for i in range(100))
    chunks = chunk_document(doc, counter, 20, overlap=5)
    for a, b in pairwise(chunks):
        assert b.start_char < a.end_char, "consecutive chunks overlap"
        assert a.text.split()[-5:] == b.text.split()[:5]
    assert all(c.tokens <= 20 for c in chunks)
    assert chunks[-1].text.endswith("w99")


def test_megabyte_line_without_spaces(tiny_tokenizer):
    counter = HFTokenCounter(tiny_tokenizer)
    doc = "abcdefgh" * 125_000  # 1 MB, no punctuation, no spaces
    chunks = chunk_document(doc, counter, 512)
    assert "".join(c.text for c in chunks) == doc
    assert all(c.tokens <= 512 for c in chunks)


@pytest.mark.parametrize("n", [0, -3])
def test_bad_budget(n):
    with pytest.raises(BadInput):
        chunk_document("some text", WordPieceCounter(), n)


def test_budget_helper_uses_real_output_budget():
    assert chunk_budget(8192, 400, 20, 1000, safety=0) == 6772
    assert chunk_budget(8192, 400, 20, 50, safety=0) == 7722
    with pytest.raises(BadInput, match="no room"):
        chunk_budget(1000, 600, 100, 400)
