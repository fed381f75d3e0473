"""Training formats: labels on assistant spans only, MapReduce-aligned expansion that renders
exactly what the mapreduce strategy sends, over-long policies, bad records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chunkwise.errors import BadInput
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.mapreduce import MapReduce, to_intermediate
from chunkwise.train.fixtures import write_fixtures
from chunkwise.train.formats import (
    IGNORE,
    Encoder,
    TextExample,
    build_examples,
    expand_longalign,
    expand_pyramid,
    fit_length,
    keep_map_example,
)
from chunkwise.train.recipe import DataConfig
from chunkwise.train.tokenizer import EOT, LLAMA3_TEMPLATE, train_bpe

LONG = (
    "Extracted Information: " + "detail " * 60 + "\nRationale: r\nAnswer: 4711\nConfidence Score: 3"
)
MERGED = "Extracted Information: " + "merged " * 40 + "\nAnswer: 4711\nConfidence Score: 4"


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory) -> dict[str, Path]:
    return write_fixtures(tmp_path_factory.mktemp("fx"), records=12, seed=3)


@pytest.fixture(scope="module")
def tok(fixtures):
    texts = [line for p in fixtures.values() for line in p.read_text().splitlines()]
    return train_bpe([*texts, LLAMA3_TEMPLATE], vocab_size=600)


def doc_with(n_paras: int, words: int = 40) -> str:
    return "\n\n".join(
        " ".join(f"filler{i}w{j}" for j in range(words)) + "." for i in range(n_paras)
    )


def chat_llm(rules, window=1100):
    llm = ScriptedLLM(rules=rules, default="Answer: [NO INFORMATION]", window=window)
    llm.chat = True
    return llm


def decoded_with_collapse():
    """A MapReduce run with two collapse rounds; returns (document, query, answer, llm)."""
    llm = chat_llm(
        [
            (r"Part of the document", LONG),
            (r"Merge the findings", MERGED),
            (r"Findings from", "Rationale: all parts agree\nAnswer: 4711"),
        ]
    )
    doc, query = doc_with(400), Query("What is the code?")
    ans = get_strategy("mapreduce").answer(doc, query, llm)
    assert ans.stats.extra["collapse_rounds"] >= 2
    return doc, query, ans, llm


def spans(ids, labels):
    """Contiguous labelled runs as lists of token ids."""
    runs, cur = [], []
    for i, lab in zip(ids, labels, strict=True):
        if lab != IGNORE:
            assert lab == i
            cur.append(i)
        elif cur:
            runs.append(cur)
            cur = []
    return runs + ([cur] if cur else [])


def test_labels_cover_only_assistant_spans_multi_turn(tok):
    rec = {
        "id": "r1",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "A long document here.\n\nWho?"},
            {"role": "assistant", "content": "Ona Brisk."},
            {"role": "user", "content": "Just the name."},
            {"role": "assistant", "content": "Ona"},
        ],
    }
    [ex] = expand_longalign(rec, "f:1")
    ids, labels = Encoder(tok, "chat").encode(ex)
    runs = spans(ids.tolist(), labels.tolist())
    eot = tok.convert_tokens_to_ids(EOT)
    assert [tok.decode(r) for r in runs] == ["Ona Brisk." + EOT, "Ona" + EOT]
    assert all(r[-1] == eot for r in runs)
    # the prompt part is tokenized exactly as the hf backend tokenizes a request
    head = tok.apply_chat_template(rec["messages"][:2], tokenize=False, add_generation_prompt=True)
    n = len(tok(head, add_special_tokens=False)["input_ids"])
    assert ids[:n].tolist() == tok(head, add_special_tokens=False)["input_ids"]
    assert (labels[:n] == IGNORE).all() and labels[n] != IGNORE


def test_base_kind_labels_target_and_eos(tok):
    ex = TextExample(
        "b",
        "map",
        [
            {"role": "user", "content": "Some text.\n\nQuestion: q?\nAnswer:"},
            {"role": "assistant", "content": " 4711"},
        ],
    )
    ids, labels = Encoder(tok, "base").encode(ex)
    assert ids[0] == tok.bos_token_id
    [run] = spans(ids.tolist(), labels.tolist())
    assert run[-1] == tok.eos_token_id and tok.decode(run[:-1]) == " 4711"


def test_mapreduce_expansion_renders_exactly_the_decoding_prompts():
    doc, query, ans, llm = decoded_with_collapse()
    inter = to_intermediate(ans)
    rec = {
        "id": "x",
        "document": doc,
        "question": query.question,
        "answer": ans.text,
        "intermediate": inter,
        "meta": {"chunk_budget": ans.stats.extra["chunk_budget"]},
    }
    exs = expand_pyramid(rec, "f:1", mode="mapreduce", kind="chat", mr=MapReduce(), counter=llm)
    n_map, n_coll = len(inter["map"]), sum(len(r) for r in inter["collapse"])
    assert [e.stage for e in exs] == ["map"] * n_map + ["collapse"] * n_coll + ["reduce"]
    sent = [r.prompt[0]["content"] for r in llm.calls]
    assert [e.messages[0]["content"] for e in exs] == sent  # same prompts, same order
    assert exs[-1].messages[1]["content"] == "Answer: 4711"
    # the map targets are the records in the protocol, with their confidence
    assert exs[0].messages[1]["content"].startswith("Extracted Information: detail")
    assert exs[0].messages[1]["content"].endswith("Confidence Score: 3")


def test_chunk_sources_agree_field_span_and_rechunk():
    doc, query, ans, llm = decoded_with_collapse()
    inter = to_intermediate(ans)
    base = {"id": "x", "document": doc, "question": query.question, "answer": "4711"}
    budget = ans.stats.extra["chunk_budget"]
    from chunkwise.text import chunk_document

    chunks = chunk_document(doc, llm, budget)
    with_field = json.loads(json.dumps(inter))
    for d in with_field["map"]:
        d["chunk"] = chunks[d["sources"][0]].text
    variants = [
        {**base, "intermediate": with_field},
        {
            **base,
            "intermediate": inter,
            "meta": {"mapreduce": {"chunks": [[c.start_char, c.end_char] for c in chunks]}},
        },
        {**base, "intermediate": inter, "meta": {"mapreduce": {"chunk_budget": budget}}},
        {**base, "intermediate": inter},  # the budget rule with data.window = the decoding window
    ]
    got = [
        [
            e.messages
            for e in expand_pyramid(
                v,
                "f",
                mode="mapreduce",
                kind="chat",
                mr=MapReduce(),
                counter=llm,
                window=llm.window,
            )
        ]
        for v in variants
    ]
    assert all(g == got[0] for g in got[1:])


def test_standard_mode_matches_standard_strategy_prompt():
    llm = chat_llm([(r".", "4711")], window=100000)
    doc, query = doc_with(5), Query("What is the code?")
    get_strategy("standard").answer(doc, query, llm)
    rec = {"id": "s", "document": doc, "question": query.question, "answer": "4711"}
    [ex] = expand_pyramid(rec, "f", mode="standard", kind="chat", mr=MapReduce())
    assert ex.messages[0]["content"] == llm.calls[0].prompt[0]["content"]
    assert ex.messages[1]["content"] == "4711"


def test_expansion_counts_on_fixtures(fixtures, tok):
    recs = [json.loads(x) for x in fixtures["pyramid_align"].read_text().splitlines()]
    data = DataConfig(paths=[str(fixtures["pyramid_align"])], mode="mapreduce", max_length=4096)
    examples, stats = build_examples(data, tok, "chat", [fixtures["pyramid_align"]])
    n_map = sum(len(r["intermediate"]["map"]) for r in recs)
    n_coll = sum(len(g) for r in recs for g in r["intermediate"]["collapse"])
    assert stats.stages == {"map": n_map, "collapse": n_coll, "reduce": len(recs)}
    assert len(examples) == n_map + n_coll + len(recs)
    single = DataConfig(
        paths=data.paths, mode="mapreduce", mapreduce_format="single", max_length=4096
    )
    ex1, st1 = build_examples(single, tok, "chat", [fixtures["pyramid_align"]])
    assert len(ex1) == len(recs) and st1.stages == {"single": len(recs)}
    text = tok.decode(ex1[0].input_ids[ex1[0].labels != IGNORE].tolist())
    assert "Extracted Information:" in text and text.rstrip(EOT).endswith(
        "Answer: " + recs[0]["answer"]
    )


def test_mapreduce_record_without_intermediate_is_named(tmp_path, tok):
    path = tmp_path / "pa.jsonl"
    path.write_text(
        json.dumps({"id": "doc-7", "document": "text", "question": "q?", "answer": "a"}) + "\n"
    )
    data = DataConfig(paths=[str(path)], mode="mapreduce")
    with pytest.raises(BadInput, match=r"pa\.jsonl:1: record 'doc-7' has no intermediate"):
        build_examples(data, tok, "chat", [path])


def test_overlong_policies(fixtures, tok):
    data = DataConfig(paths=[str(fixtures["longalign"])], max_length=64, overlong="error")
    with pytest.raises(BadInput, match=r"longalign\.jsonl:1: record .* over data\.max_length=64"):
        build_examples(data, tok, "chat", [fixtures["longalign"]])
    data.overlong = "skip"
    with pytest.raises(BadInput, match="no training examples"):
        build_examples(data, tok, "chat", [fixtures["longalign"]])
    data.max_length, data.overlong = 200, "truncate"
    examples, stats = build_examples(data, tok, "chat", [fixtures["longalign"]])
    assert stats.truncated > 0 and all(len(e) <= 200 for e in examples)
    full, _ = build_examples(
        DataConfig(paths=data.paths, max_length=100000), tok, "chat", [fixtures["longalign"]]
    )
    for cut, whole in zip(examples, full, strict=True):  # targets survive truncation intact
        assert (
            cut.labels[cut.labels != IGNORE].tolist()
            == whole.labels[whole.labels != IGNORE].tolist()
        )


def test_fit_length_truncates_middle_of_prompt():
    import numpy as np

    ids = np.arange(20, dtype=np.int32)
    labels = np.array([IGNORE] * 14 + list(range(14, 20)), dtype=np.int32)
    ex = TextExample("t", "chat", [])
    new_ids, new_labels, status = fit_length(ids, labels, 12, "truncate", ex)
    assert status == "truncated" and len(new_ids) == 12
    assert new_ids.tolist() == [0, 1, 2, 11, 12, 13, *range(14, 20)]
    assert new_labels.tolist() == [IGNORE] * 6 + list(range(14, 20))
    assert fit_length(ids, labels, 5, "truncate", ex)[2] == "skip:targets_too_long"


def test_prefix_unstable_template_is_reported(tok):
    tok2 = train_bpe(["hello world"], vocab_size=300)
    tok2.chat_template = (
        "{% for m in messages %}{{ m['role'] }}:{{ m['content'] }}|"
        "{{ messages|length }}{% endfor %}{% if add_generation_prompt %}A:{% endif %}"
    )
    ex = TextExample(
        "u",
        "chat",
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
        "f:9",
    )
    with pytest.raises(BadInput, match=r"f:9: record 'u': the chat template is not prefix-stable"):
        Encoder(tok2, "chat").encode(ex)


def test_unknown_format_names_the_line(tmp_path, tok):
    path = tmp_path / "x.jsonl"
    path.write_text('{"text": "hi"}\n')
    with pytest.raises(BadInput, match=re.escape(f"{path}:1")):
        build_examples(DataConfig(paths=[str(path)]), tok, "chat", [path])


def test_no_information_keep_subsamples_only_empty_map_examples():
    """``data.no_information_keep``: map examples whose target answer is NO INFORMATION are
    kept at about that rate, the same ones every time; findings and other stages always stay."""

    def ex(i: int, stage: str, answer: str) -> TextExample:
        target = f"Extracted Information: x\nRationale: y\nAnswer: {answer}\nConfidence Score: 0"
        return TextExample(f"doc-{i}:{stage}{i}", stage, [
            {"role": "user", "content": "q"}, {"role": "assistant", "content": target}])  # fmt: skip

    empty = [ex(i, "map", "[NO INFORMATION]") for i in range(400)]
    kept = [e for e in empty if keep_map_example(e, 0.3)]
    assert 0.2 * 400 < len(kept) < 0.4 * 400
    assert kept == [e for e in empty if keep_map_example(e, 0.3)]  # stable
    assert all(keep_map_example(e, 1.0) for e in empty)
    assert all(keep_map_example(ex(i, "map", "17068"), 0.01) for i in range(50))
    assert all(keep_map_example(ex(i, "reduce", "[NO INFORMATION]"), 0.01) for i in range(50))
    with pytest.raises(
        BadInput, match=r"no_information_keep=.0. is not valid; expected a number in \(0, 1\]"
    ):
        from chunkwise.train.recipe import load_recipe

        load_recipe(Path(__file__).parents[2] / "recipes/tiny/pyramid_align-mapreduce.yaml",
                    ["--data.no_information_keep=0"])  # fmt: skip


def test_reduce_only_paths_teach_the_reduce_of_their_records_only(fixtures, tmp_path, tok):
    """``data.reduce_only_paths``: their records give one reduce example each (map and collapse
    outputs are its input, not targets); the records of ``data.paths`` still give every stage."""
    src = fixtures["pyramid_align"]
    recs = [json.loads(x) for x in src.read_text().splitlines()]
    extra = tmp_path / "extra.jsonl"  # the same records under other ids: a second file
    extra.write_text("".join(json.dumps({**r, "id": f"x-{r['id']}"}) + "\n" for r in recs))
    data = DataConfig(
        paths=[str(src)], reduce_only_paths=[str(extra)], mode="mapreduce", max_length=4096
    )
    examples, stats = build_examples(data, tok, "chat", [src, extra])
    n_map = sum(len(r["intermediate"]["map"]) for r in recs)
    n_coll = sum(len(g) for r in recs for g in r["intermediate"]["collapse"])
    assert stats.stages == {"map": n_map, "collapse": n_coll, "reduce": 2 * len(recs)}
    assert stats.reduce_only_dropped == n_map + n_coll
    extra_ex = [e for e in examples if e.id.startswith("x-")]
    assert len(extra_ex) == len(recs) and {e.stage for e in extra_ex} == {"reduce"}
    # the reduce example of a reduce-only record is the one its own file would give
    alone, _ = build_examples(
        DataConfig(paths=[str(src)], mode="mapreduce", max_length=4096), tok, "chat", [src]
    )
    mine = {e.id: e for e in alone if e.stage == "reduce"}
    for e in extra_ex:
        twin = mine[e.id.removeprefix("x-")]
        assert e.input_ids.tolist() == twin.input_ids.tolist()


def test_reduce_only_paths_are_checked(fixtures, tmp_path):
    from chunkwise.train.recipe import load_recipe, training_files

    recipe = Path(__file__).parents[2] / "recipes/tiny/pyramid_align-mapreduce.yaml"
    src = str(fixtures["pyramid_align"])
    r = load_recipe(recipe, [f"--data.paths=[{src}]", f"--data.reduce_only_paths=[{tmp_path}]"],
                    check_paths=False)  # fmt: skip
    assert r.data.reduce_only_paths == [str(tmp_path)]
    with pytest.raises(BadInput, match=r"data\.reduce_only_paths\[0\]: folder .* no \*\.jsonl"):
        training_files(r.data)
    with pytest.raises(BadInput, match="names files data.paths names too"):
        load_recipe(recipe, [f"--data.paths=[{src}]", f"--data.reduce_only_paths=[{src}]"])
    with pytest.raises(BadInput, match="reduce_only_paths needs data.mode=mapreduce"):
        load_recipe(recipe, [f"--data.paths=[{src}]", f"--data.reduce_only_paths=[{src}]",
                             "--data.mode=standard"], check_paths=False)  # fmt: skip
