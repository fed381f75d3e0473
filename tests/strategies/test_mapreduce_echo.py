"""The map never echoes the question (issue #49): a finding whose answer is a span the question
quotes (InfiniteBench's ``Key: "<uuid>"``) from a part that lacks it is dropped as
``question_echo`` (chunkwise.strategies.mapreduce.echo), and training keeps the kv parts
without the key that teach the map not to."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest

from chunkwise.data.synthetic import generate
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.mapreduce.echo import echoed_span, quoted_spans

KEY = "3f1c2a9e-8b7d-4c6e-a5f4-0e9d8c7b6a51"
VALUE = "9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"
OFFICIAL = f'Key: "{KEY}"\nThe value associated with the specified key is:'
HOLDER = f'{{"0d1e2f3a-4b5c-4d6e-9f7a-8b9c0d1e2f3a": "x", "{KEY}": "{VALUE}", "b": "c"}}'
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
OTHER = '{"0d1e2f3a-4b5c-4d6e-9f7a-8b9c0d1e2f3a": "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9"}'


# -- what counts as a quoted span --------------------------------------------------------------


def test_quoted_spans_of_every_quote_kind_from_ten_characters():
    assert quoted_spans(OFFICIAL) == [KEY]
    q = "In “The Long Winter Night” and «the northern gate», who said `open the way`?"
    assert quoted_spans(q) == ["the long winter night", "the northern gate", "open the way"]
    assert quoted_spans("Was it 'a quiet morning' after all?") == ["a quiet morning"]
    # short quotes are names a right answer may repeat: not spans
    assert quoted_spans('Who lives in "Paris" or "Lyon"?') == []
    # apostrophes open no quote
    assert quoted_spans("Where are the author's dogs' bowls kept now?") == []


# -- when an answer echoes one --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "chunk", "echoed"),
    [
        (KEY, OTHER, True),  # the key itself, from a part without it
        (f'"{KEY}"', OTHER, True),  # quote marks at its edges are ignored
        (KEY.upper(), OTHER, True),  # case too
        (f'Key: "{KEY}"', OTHER, True),  # mostly the span
        ("c" + KEY, OTHER, True),  # a stuttered first character: nearly the span
        (KEY[:18], OTHER, True),  # a long piece of it
        (KEY, HOLDER, False),  # the part holds the key: not an echo
        (VALUE, HOLDER, False),  # the value after the key: the right finding
        ("5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9", OTHER, False),  # another value
        (KEY[:6], OTHER, False),  # too short a piece to tell
        (f"The value of the key {KEY} is not stated in this part at all", OTHER, False),
        ("", OTHER, False),
        (None, OTHER, False),
    ],
)
def test_an_answer_echoes_a_quoted_span_its_part_lacks(answer, chunk, echoed):
    assert (echoed_span(OFFICIAL, answer, chunk) == KEY) is echoed


def test_a_piece_of_the_span_that_the_part_states_is_no_echo():
    q = 'What comes right after "the northern gate was opened"?'
    assert echoed_span(q, "northern gate", "They passed the northern gate.") is None
    assert echoed_span(q, "the northern gate was", "Nothing here.") == (
        "the northern gate was opened"
    )


# -- the map stage, with a scripted model --------------------------------------------------------


def _kv_doc() -> str:
    """An official-layout kv document (one JSON object of id pairs), the gold pair at 33 of 60."""
    rng = random.Random(7)
    pairs = [tuple(f"{rng.getrandbits(64):016x}" for _ in range(2)) for _ in range(60)]
    pairs[33] = (KEY, VALUE)
    return "JSON data:\n{" + ", ".join(f'"{k}": "{v}"' for k, v in pairs) + "}"


def _echoing_llm() -> ScriptedLLM:
    """A map that finds the value in the part holding the pair and answers the key itself in
    every other part, sure of it (the failure of issue #49); a reduce that takes the answer
    most findings give."""

    def map_reply(m: re.Match) -> str:
        if f'"{KEY}": "{VALUE}"' in m.group(1):
            return (
                f'Extracted Information: "{KEY}": "{VALUE}"\nRationale: r\n'
                f"Answer: {VALUE}\nConfidence Score: 5"
            )
        return (
            f'Extracted Information: Key: "{KEY}"\nRationale: r\nAnswer: {KEY}\nConfidence Score: 5'
        )

    def reduce_reply(m: re.Match) -> str:
        found = Counter(re.findall(r"Answer: (\S+)", m.group(0).split("\nQuestion:")[0]))
        return (
            f"Rationale: r\nAnswer: {found.most_common(1)[0][0] if found else '[NO INFORMATION]'}"
        )

    llm = ScriptedLLM(
        rules=[
            (r"===== Part of the document =====\n(.*)\n===== End of part =====", map_reply),
            (r".*", reduce_reply),  # the reduce (and any collapse)
        ],
        window=2048,
    )
    llm.chat = True
    return llm


def _run(**opts):
    llm = _echoing_llm()
    strat = get_strategy("mapreduce", chunk_tokens=150, **opts)
    doc = _kv_doc()
    chunks = strat.plan(doc, Query(OFFICIAL, "retrieval"), llm).chunks
    holders = [c.index for c in chunks if f'"{KEY}": "{VALUE}"' in c.text]
    assert len(holders) == 1 and len(chunks) >= 4  # the pair is whole inside one part
    ans = strat.answer(doc, Query(OFFICIAL, "retrieval"), llm)
    maps = [e for e in ans.trace if e.stage == "map"]
    return ans, maps, holders[0], len(chunks)


@pytest.mark.parametrize("grounding", [False, True])
def test_findings_that_answer_the_key_from_parts_without_it_are_dropped(grounding):
    ans, maps, holder, n = _run(grounding=grounding)
    others = [e.inputs[0] for e in maps if e.inputs[0] != holder]
    # named question_echo even where grounding would drop them too: the more specific reason
    assert [e.output.get("dropped") for e in maps if e.inputs[0] != holder] == (
        ["question_echo"] * (n - 1)
    )
    assert ans.stats.extra["map_question_echo"] == n - 1
    assert ans.stats.extra["question_echo_parts"] == others
    holding = next(e for e in maps if e.inputs[0] == holder)
    assert "dropped" not in holding.output and holding.output["answer"] == VALUE
    assert ans.text.strip() == VALUE


@pytest.mark.parametrize("off", [{"echo_check": False}, {"echo_check": "false"}])
def test_with_echo_check_off_the_key_survives_and_wins(off):
    ans, maps, _, _ = _run(**off)
    assert ans.stats.extra["map_question_echo"] == 0
    assert not any(e.output.get("dropped") for e in maps)
    assert ans.text.strip() == KEY  # the failure the check exists for


# -- the reduce -----------------------------------------------------------------------------------


def _keyless_doc() -> str:
    """The kv document of :func:`_kv_doc` with the gold pair taken out: no part holds the key."""
    return _kv_doc().replace(f'"{KEY}": "{VALUE}", ', "")


def _reduce_llm(reduce_answer: str, map_finding: str | None = None) -> ScriptedLLM:
    """Every map call says NO INFORMATION, or gives ``map_finding`` where it is set; the reduce
    answers ``reduce_answer`` whatever it is sent."""
    none = (
        "Extracted Information: none\nRationale: r\nAnswer: [NO INFORMATION]\nConfidence Score: 0"
    )
    found = (
        f"Extracted Information: {map_finding}\nRationale: r\nAnswer: {map_finding}\n"
        "Confidence Score: 5"
    )
    llm = ScriptedLLM(
        rules=[
            (r"===== Part of the document =====", found if map_finding else none),
            (r".*", f"Rationale: r\nAnswer: {reduce_answer}"),
        ],
        window=2048,
    )
    llm.chat = True
    return llm


def _answer(llm: ScriptedLLM, doc: str, **opts):
    strat = get_strategy("mapreduce", chunk_tokens=150, **opts)
    return strat.answer(doc, Query(OFFICIAL, "retrieval"), llm)


def test_a_reduce_sent_nothing_that_answers_the_key_says_no_information():
    ans = _answer(_reduce_llm(KEY), _keyless_doc())
    assert ans.text.strip() == "[NO INFORMATION]"
    assert ans.stats.extra["reduce_question_echo"] is True
    (red,) = [e for e in ans.trace if e.stage == "reduce"]
    assert red.output["question_echo"] == KEY and KEY in red.output["raw"]  # what it wrote


def test_a_reduce_answer_that_a_finding_holds_is_kept():
    # a finding that names the key (as text the part held) backs the same answer: not an echo
    ans = _answer(_reduce_llm(KEY, map_finding=KEY), _kv_doc(), grounding=False)
    assert ans.text.strip() == KEY and ans.stats.extra["reduce_question_echo"] is False
    # an answer that echoes nothing is never touched
    ans = _answer(_reduce_llm(VALUE), _keyless_doc())
    assert ans.text.strip() == VALUE and ans.stats.extra["reduce_question_echo"] is False


def test_with_echo_check_off_the_reduce_keeps_the_key():
    ans = _answer(_reduce_llm(KEY), _keyless_doc(), echo_check=False)
    assert ans.text.strip() == KEY and ans.stats.extra["reduce_question_echo"] is False


# -- training keeps the negatives ----------------------------------------------------------------


def test_training_keeps_the_kv_parts_without_the_key(tmp_path):
    """A tiny oracle synthesis (kv_retrieval and passkey): under ``no_information_keep: 0.15``
    only about 1 in 7 empty parts survives; ``no_information_keep_by_family: {kv_retrieval:
    1.0}`` keeps every kv part without the key, whatever the question's wording, and leaves
    passkey's subsampled."""
    from chunkwise.synth.oracle import run_oracle
    from chunkwise.train.formats import build_examples
    from chunkwise.train.recipe import DataConfig
    from chunkwise.train.tokenizer import LLAMA3_TEMPLATE, train_bpe

    counter = ScriptedLLM(window=2048)
    counter.chat = True
    run_oracle(
        counter,
        tmp_path,
        families=["kv_retrieval", "passkey"],
        lengths=[1500],
        n=4,
        mapreduce_args={"chunk_tokens": 200},
        progress=False,
    )
    path = tmp_path / "data" / "oracle.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    empty = {  # example id -> family, for every part whose target says NO INFORMATION
        f"{r['id']}:map{i}": r["meta"]["family"]
        for r in recs
        for i, m in enumerate(r["intermediate"]["map"])
        if m["no_information"]
    }
    for r in recs:  # the kv negatives: parts without the key the question asks about
        if r["meta"]["family"] == "kv_retrieval":
            (key,) = set(UUID.findall(r["question"]))
            for i, m in enumerate(r["intermediate"]["map"]):
                s, e = r["meta"]["mapreduce"]["chunks"][i]
                assert m["no_information"] is (key not in r["document"][s:e])
    n_empty = Counter(empty.values())
    assert n_empty["kv_retrieval"] >= 12 and n_empty["passkey"] >= 12

    tok = train_bpe([path.read_text(), LLAMA3_TEMPLATE], vocab_size=600)

    def kept(**keep) -> Counter:
        data = DataConfig(
            paths=[str(path)],
            format="pyramid_align",
            mode="mapreduce",
            mapreduce={"prompts": "chat", "chunk_tokens": 200},
            prompts="chat",
            window=2048,
            **keep,
        )
        examples, _ = build_examples(data, tok, "chat", [path])
        return Counter(empty[e.id] for e in examples if e.id in empty)

    plain = kept(no_information_keep=0.15)
    assert plain["kv_retrieval"] < 0.5 * n_empty["kv_retrieval"]
    ruled = kept(no_information_keep=0.15, no_information_keep_by_family={"kv_retrieval": 1.0})
    assert ruled["kv_retrieval"] == n_empty["kv_retrieval"]
    assert ruled["passkey"] == plain["passkey"] < 0.5 * n_empty["passkey"]


def test_a_family_share_outside_zero_to_one_is_refused():
    from chunkwise.errors import BadInput
    from chunkwise.train.recipe import DataConfig

    with pytest.raises(BadInput, match=r"no_information_keep_by_family\.kv_retrieval=0 "):
        DataConfig(no_information_keep_by_family={"kv_retrieval": 0})
    assert DataConfig(no_information_keep_by_family={"kv_retrieval": 1.0})


# -- the real adapter on InfiniteBench's own kv wording ------------------------------------------


#: a document on which the shipped adapter echoes the key (3 of its 7 parts, 2026-12-06): with
#: the check off grounding drops those as ungrounded, so the trace test turns red
SEED = 0


@pytest.fixture
def mr_llm(default_mr_llm):
    """(the session's hf:default-mr, its decoding options)."""
    from chunkwise.llm import default_mr

    return default_mr_llm, default_mr.strategy_args()


@pytest.mark.slow
def test_default_mr_keeps_no_finding_that_answers_the_official_key(mr_llm):
    """An official-layout kv document of ~3K tokens asked with InfiniteBench's own question,
    decoded with the adapter's options: no finding kept answers the key, and every finding that
    echoed it from a part without it is named question_echo on its map event."""
    llm, args = mr_llm
    args = dict(args)
    window = int(args.pop("window", 4096))
    rec = generate(
        "kv_retrieval", length_tokens=3000, n=1, seed=SEED, count_tokens=llm.count_tokens
    )[0]
    question = rec["input"].strip()
    (key,) = quoted_spans(question)
    strategy = get_strategy("mapreduce", window=window, **args)
    q = Query(question, "retrieval", max_answer_tokens=50)
    chunks = strategy.plan(rec["context"], q, llm).chunks
    ans = strategy.answer(rec["context"], q, llm)
    maps = [e for e in ans.trace if e.stage == "map"]
    echoes = {
        c.index
        for c, e in zip(chunks, maps, strict=True)
        if not e.output["no_information"]
        and echoed_span(question, e.output["answer"], c.text) is not None
    }
    kept = [
        e.output for e in maps if not e.output["no_information"] and not e.output.get("dropped")
    ]
    assert not any(key in str(r["answer"]).lower() for r in kept), kept
    assert {e.inputs[0] for e in maps if e.output.get("dropped") == "question_echo"} == echoes
    assert ans.stats.extra["map_question_echo"] == len(echoes)
    assert key not in ans.text.lower(), ans.text
