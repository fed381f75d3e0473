"""The oracle teacher: exact map/collapse/reduce targets for every generated document family.

Token counting is the scripted double's word-piece split (fast); the records, prompts and
chunks come from the real ``mapreduce`` strategy and the real training formatter.
"""

from __future__ import annotations

import json
import re

import pytest

from chunkwise.cli import main
from chunkwise.data.families import CONFIDENCE, FAMILIES, get_family
from chunkwise.errors import BadInput
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import get_strategy
from chunkwise.strategies.protocol import parse_record
from chunkwise.synth.oracle import OracleTeacher, run_oracle
from chunkwise.synth.records import validate_record
from chunkwise.train.formats import expand_pyramid

NOINFO = "Extracted Information: -\nRationale: -\nAnswer: [NO INFORMATION]\nConfidence Score: 0"


def counter(window: int = 2048) -> ScriptedLLM:
    llm = ScriptedLLM(default=NOINFO, window=window)
    llm.chat = True
    return llm


@pytest.fixture(scope="module")
def built():
    llm = counter()
    teacher = OracleTeacher(llm, window=2048)
    out = {}
    for name, fam in FAMILIES.items():
        docs = fam.make(n=3, seed=5, length_tokens=2500, count_tokens=llm.count_tokens)
        recs = []
        for d in docs:
            try:
                recs.append((d, teacher.record(d)))
            except Exception as e:  # Straddle: skipped by run_oracle, counted in its stats
                if type(e).__name__ != "Straddle":
                    raise
        out[name] = recs
    return llm, teacher, out


def test_every_family_gives_valid_records_with_the_gold_answer(built):
    _, _, out = built
    for name, recs in out.items():
        assert len(recs) >= 2, name
        for doc, rec in recs:
            assert validate_record(rec) == [], (name, validate_record(rec))
            assert rec["answer"] == doc.answer
            assert rec["meta"]["family"] == name
            assert rec["intermediate"]["reduce"]["rationale"]


def test_targets_parse_back_into_the_intended_fields(built):
    _, _, out = built
    for name, recs in out.items():
        for doc, rec in recs:
            for r in rec["intermediate"]["map"]:
                back = parse_record(r["raw"])
                assert back.answer == r["answer"] and back.confidence == r["confidence"], name
                # every map target carries all four fields
                assert back.extracted_information and back.rationale and back.answer, name
                assert back.confidence is not None
                # a map call sees one part and not its number: its target must not cite one
                assert not re.search(r"\bparts? \d", r["raw"], re.I), (name, r["raw"])
            found = [r for r in rec["intermediate"]["map"] if not r["no_information"]]
            assert found, (name, doc.id)


def test_confidences_follow_the_calibration_rule(built):
    _, _, out = built
    for name, recs in out.items():
        fam = get_family(name)
        for doc, rec in recs:
            spans = rec["meta"]["mapreduce"]["chunks"]
            for r, (s, e) in zip(rec["intermediate"]["map"], spans, strict=True):
                evs = fam.evidence_in(doc, s, e)
                if not evs:
                    assert r["no_information"] and r["confidence"] == 0, name
                    continue
                assert r["confidence"] == max(ev.confidence for ev in evs), name
    # the rule itself: direct > partial > link > inferred > hedged > unreliable > retracted
    order = ["direct", "partial", "link", "inferred", "hedged", "unreliable", "retracted"]
    assert [CONFIDENCE[k] for k in order] == sorted(CONFIDENCE.values(), reverse=True)
    assert CONFIDENCE["direct"] == 5


def test_kv_empty_records_restate_the_key_so_the_decision_follows_it(built):
    """A kv_retrieval map target with the pair and one without share ``"KEY":`` and part ways
    only after it (the model copies the key first, then decides)."""
    _, _, out = built
    for doc, rec in out["kv_retrieval"]:
        key = doc.meta["key"]
        maps = rec["intermediate"]["map"]
        empty = [r["extracted_information"] for r in maps if r["no_information"]]
        found = [r["extracted_information"] for r in maps if not r["no_information"]]
        assert empty and found, doc.id
        assert all(e == f'"{key}": not in this part.' for e in empty), empty
        assert found == [f'"{key}": "{doc.answer}"']
    # other families keep the shared sentence
    passkey = [r for _, rec in out["passkey"] for r in rec["intermediate"]["map"]]
    assert any(r["extracted_information"].startswith("Nothing in this part") for r in passkey)


def test_conflicting_evidence_reduce_picks_the_plain_statement(built):
    _, _, out = built
    kinds = set()
    for doc, rec in out["conflicting"]:
        plain, weak = doc.evidence
        kinds.add(weak.kind)
        assert rec["answer"] == plain.answer != weak.answer
        maps = {r["answer"]: r["confidence"] for r in rec["intermediate"]["map"]}
        assert maps[plain.answer] == 5 and maps[weak.answer] == CONFIDENCE[weak.kind] < 5
        why = rec["intermediate"]["reduce"]["rationale"]
        assert plain.answer in why and weak.answer in why
    assert kinds == {"hedged", "unreliable", "retracted"}


def test_conflicting_documents_cover_every_order_and_kind_at_every_length():
    """Each six documents hold every (weak kind, plain first or last) pair, so a training set
    of a dozen per length has plain statements at the end of documents, not only weak ones."""
    llm = counter()
    fam = FAMILIES["conflicting"]
    for length in (2000, 4000):
        docs = fam.make(n=6, seed=0, length_tokens=length, count_tokens=llm.count_tokens)
        pairs = {(d.evidence[1].kind, d.evidence[0].start > d.evidence[1].start) for d in docs}
        assert pairs == {
            (k, last) for k in ("hedged", "unreliable", "retracted") for last in (0, 1)
        }


def test_training_renders_exactly_the_prompts_decoding_sends(built):
    _, teacher, out = built
    for name in ("passkey", "conflicting", "multihop"):
        doc, rec = out[name][0]
        live = counter()
        get_strategy("mapreduce", window=2048, prompts="chat").answer(
            doc.context, doc.query(), live
        )
        sent = [c.prompt[0]["content"] for c in live.calls[:-1]]  # every map call
        examples = expand_pyramid(
            rec, "mem", mode="mapreduce", kind="chat", mr=teacher.strategy, window=2048
        )
        trained = [ex.messages[0]["content"] for ex in examples if ex.stage == "map"]
        assert trained == sent, name
        reduce = next(ex for ex in examples if ex.stage == "reduce").messages[1]["content"]
        assert reduce.startswith("Rationale: ") and reduce.endswith(f"Answer: {doc.answer}")


def test_collapse_targets_when_records_do_not_fit():
    llm = counter(window=1024)
    teacher = OracleTeacher(llm, window=1024)
    doc = get_family("math_find").make(
        n=1, seed=3, length_tokens=12000, count_tokens=llm.count_tokens
    )[0]
    rec = teacher.record(doc)
    rounds = rec["intermediate"]["collapse"]
    assert rounds and rec["answer"] == doc.answer
    assert all(r["confidence"] == CONFIDENCE["partial"] for r in rounds[-1])
    assert validate_record(rec) == []


def test_run_oracle_is_resumable_and_counts(tmp_path):
    llm = counter()
    stats = run_oracle(
        llm, tmp_path, families=["passkey", "kv_retrieval"], lengths=[1500], n=2, progress=False
    )
    assert stats["records"] == 4 and stats["by_family"] == {"passkey": 2, "kv_retrieval": 2}
    again = run_oracle(
        llm, tmp_path, families=["passkey", "kv_retrieval"], lengths=[1500], n=2, progress=False
    )
    lines = (tmp_path / "data" / "oracle.jsonl").read_text().splitlines()
    assert len(lines) == 4 and again["records"] == 4
    assert again["new_examples_by_stage"] == {}


def test_unanswerable_variants_teach_the_reduce_to_say_no_information(tmp_path):
    """With every part empty the reduce target is [NO INFORMATION] with a rationale that says
    so; the variant is its document with the evidence cut out and no seam left behind."""
    llm = counter()
    fams = ["passkey", "kv_retrieval", "conflicting", "math_find"]
    stats = run_oracle(
        llm, tmp_path, families=fams, lengths=[1500], n=4, progress=False, unanswerable=0.5
    )
    assert stats["unanswerable"] == 6  # 2 each, math_find none (every part holds candidates)
    recs = [json.loads(x) for x in (tmp_path / "data" / "oracle.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r for r in recs}
    variants = [r for r in recs if r["id"].endswith("-none")]
    assert len(variants) == 6 and not any(r["meta"]["family"] == "math_find" for r in variants)
    for r in variants:
        orig = by_id[r["id"].removesuffix("-none")]
        doc = next(
            d
            for d in get_family(r["meta"]["family"]).make(
                n=4, seed=0, length_tokens=1500, count_tokens=llm.count_tokens
            )
            if d.id == orig["id"]
        )
        assert validate_record(r) == [] and r["answer"] == "[NO INFORMATION]"
        assert all(m["no_information"] for m in r["intermediate"]["map"])
        red = r["intermediate"]["reduce"]
        assert red["answer"] == "[NO INFORMATION]" and red["rationale"].startswith("No part")
        for ev in doc.evidence:
            assert ev.text.strip() not in r["document"]
        assert r["document"].count("\n\n") == orig["document"].count("\n\n")
        assert ", , " not in r["document"] and ", }" not in r["document"]
    with pytest.raises(BadInput, match="fraction"):
        run_oracle(llm, tmp_path, families=fams, lengths=[1500], n=1, unanswerable=1.5)


def test_cli_oracle_teacher_and_bad_input(tmp_path, capsys):
    out = tmp_path / "o"
    rc = main(
        ["synth", "--teacher", "oracle", "--model", "scripted:echo", "--out", str(out),
         "--families", "conflicting", "--lengths", "1500", "--n", "1", "--no-progress"]
    )  # fmt: skip
    assert rc == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["records"] == 1
    assert main(["synth", "--teacher", "oracle", "--model", "scripted:echo", "--out",
                 str(out), "--families", "nope"]) == 2  # fmt: skip
    assert "unknown document family 'nope'" in capsys.readouterr().err
    from chunkwise.data.families import HELDOUT_FAMILY, TRAIN_LENGTHS
    from chunkwise.synth.oracle import parse_families, parse_lengths

    assert HELDOUT_FAMILY not in parse_families("train") and len(parse_families("train")) == 7
    assert parse_lengths("train") == list(TRAIN_LENGTHS) and parse_lengths("2k,4000") == [
        2000,
        4000,
    ]
    assert main(["synth", "--out", str(out)]) == 2
    assert "--docs is required" in capsys.readouterr().err


def test_held_out_documents_are_never_training_documents():
    from chunkwise.data.families import HELDOUT_SEED, TRAIN_SEED

    count = counter().count_tokens
    for name, fam in FAMILIES.items():
        train = fam.make(n=2, seed=TRAIN_SEED, length_tokens=1500, count_tokens=count)
        held = fam.make(n=2, seed=HELDOUT_SEED + 1500, length_tokens=1500, count_tokens=count)
        assert {d.context for d in train}.isdisjoint(d.context for d in held), name
        assert {d.answer for d in train} != {d.answer for d in held}, name


def test_held_out_questions_are_never_asked_in_training():
    """What `make default-mr` trains on (TRAIN_SEED and seed 1 at TRAIN_LENGTHS) never asks a
    held-out document's question with its answer. extractive_qa is the family where this can
    fail: its documents are all cut from one text, and before the sentence split 41 of 50
    held-out questions at 4K had been trained on (with 16 distinct answers among 50).
    math_find is exempt: its answers are small numbers that recur by chance, its lists never."""
    from chunkwise.data.families import HELDOUT_SEED, TRAIN_LENGTHS, TRAIN_SEED

    count = counter().count_tokens
    for name, fam in FAMILIES.items():
        if name == "math_find":
            continue
        trained = {
            (d.question, d.answer)
            for seed in (TRAIN_SEED, TRAIN_SEED + 1)
            for length in TRAIN_LENGTHS
            for d in fam.make(n=12, seed=seed, length_tokens=length, count_tokens=count)
        }
        held = fam.make(n=40, seed=HELDOUT_SEED + 4000, length_tokens=4000, count_tokens=count)
        assert len(held) == 40, name
        assert not trained & {(d.question, d.answer) for d in held}, name
        assert len({(d.question, d.answer) for d in held}) == len(held), name
        if name == "extractive_qa":  # 40 questions, not 16
            assert len({d.question for d in held}) == len(held)


def test_span_split_keeps_training_and_held_out_sentences_apart():
    import random

    from chunkwise.data.families import reference_sections, span_questions, span_split

    text = "\n\n".join(reference_sections(random.Random(0)))  # the whole reference
    train = span_questions(text, random.Random(1), 10_000, wrapped=True, split="train")
    held = span_questions(text, random.Random(1), 10_000, wrapped=True, split="heldout")
    both = span_questions(text, random.Random(1), 10_000, wrapped=True)
    assert 0.15 < len(held) / len(both) < 0.35  # about 1 sentence in 4 (60 of 246) held out
    assert len(held) >= 50  # enough for bench/mr_trained.py's n = 50 distinct questions
    assert {q for q, _ in train}.isdisjoint(q for q, _ in held)
    assert {q for q, _ in both} == {q for q, _ in train} | {q for q, _ in held}
    # a sentence's split does not depend on how the text wraps it
    words = "Every name here is bound to one object in the block".split()
    assert span_split(words) == span_split(" \n ".join(words).split())
    with pytest.raises(BadInput, match="span split"):
        span_questions(text, random.Random(1), 1, split="test")


@pytest.mark.slow  # the embedded tokenizer (no weights): what `make default-mr` counts with
def test_every_target_fits_the_budget_decoding_gives_its_call(monkeypatch):
    """A target longer than its call's max_new_tokens teaches an output decoding always cuts
    before the answer (kv_retrieval's quoted reduce rationale was 118 tokens against 96)."""
    from chunkwise.llm.default_mr import counting_llm
    from chunkwise.synth.oracle import OracleLLM, TargetOverBudget

    llm = counting_llm()
    args = {"prompts": "chat", "chunk_tokens": 500}
    teacher = OracleTeacher(llm, window=4096, mapreduce_args=args)
    made = 0
    for fam in FAMILIES.values():
        for doc in fam.make(n=2, seed=11, length_tokens=3000, count_tokens=llm.count_tokens):
            try:
                teacher.record(doc)  # raises TargetOverBudget on any call's target
                made += 1
            except Exception as e:
                if type(e).__name__ != "Straddle":
                    raise
    assert made >= len(FAMILIES)

    real_target = OracleLLM.target

    def padded(self, prompt):
        stage, text = real_target(self, prompt)
        return stage, text.replace("Rationale: ", "Rationale: " + "very " * 400, 1)

    monkeypatch.setattr(OracleLLM, "target", padded)
    doc = get_family("passkey").make(
        n=1, seed=11, length_tokens=1500, count_tokens=llm.count_tokens
    )
    with pytest.raises(TargetOverBudget, match="cut before its answer"):
        teacher.record(doc[0])


def _cuts(orig: str, variant: str, near: int) -> list[str]:
    """Each stretch of ``orig`` starting at most four characters before ``near`` whose removal
    leaves ``variant`` (equal text on both sides of a cut makes several)."""
    d = len(orig) - len(variant)
    starts = range(max(0, near - 4), near + 1)
    return [orig[s : s + d] for s in starts if d > 0 and orig[:s] + orig[s + d :] == variant]


def test_extractive_qa_variants_cut_the_quoted_sentence_and_are_made_only_when_named(tmp_path):
    """extractive_qa's quoted phrase occurs once, so its variant (the whole sentence that
    opens with the phrase cut out, spaces included) leaves the question unanswered; it is
    made only when --unanswerable-families names it, so older recipes keep their data."""
    llm = counter()
    fams = ["extractive_qa", "passkey"]
    default = run_oracle(
        llm, tmp_path / "d", families=fams, lengths=[1500], n=4, progress=False, unanswerable=0.5
    )
    assert default["unanswerable"] == 2  # passkey's two
    config_file = tmp_path / "d" / "config.json"
    config = json.loads(config_file.read_text())
    assert config.pop("unanswerable_families") is None
    config_file.write_text(json.dumps(config))  # a folder from before the option resumes
    again = run_oracle(
        llm, tmp_path / "d", families=fams, lengths=[1500], n=4, progress=False, unanswerable=0.5
    )
    assert again["records_in_file"] == 10 and again["new_examples_by_stage"] == {}

    named = run_oracle(
        llm, tmp_path / "n", families=fams, lengths=[1500], n=4, progress=False,
        unanswerable=0.5, unanswerable_families=["extractive_qa"],
    )  # fmt: skip
    assert named["unanswerable"] == 2
    recs = [
        json.loads(x) for x in (tmp_path / "n" / "data" / "oracle.jsonl").read_text().splitlines()
    ]
    by_id = {r["id"]: r for r in recs}
    variants = [r for r in recs if r["id"].endswith("-none")]
    assert {r["meta"]["family"] for r in variants} == {"extractive_qa"}
    docs = {
        d.id: d
        for d in get_family("extractive_qa").make(
            n=4, seed=0, length_tokens=1500, count_tokens=llm.count_tokens
        )
    }
    for r in variants:
        orig = by_id[r["id"].removesuffix("-none")]
        (ev,) = docs[orig["id"]].evidence
        phrase = re.search(r'"(.+)"', r["question"]).group(1)  # type: ignore[union-attr]
        assert " ".join(orig["document"].split()).count(phrase) == 1
        assert phrase not in " ".join(r["document"].split())
        sentences = [c.strip(" ") for c in _cuts(orig["document"], r["document"], ev.start)]
        assert any(  # one stretch, from the phrase to its sentence's end
            x.startswith(ev.text) and x.endswith(".") and "." not in x[:-1] for x in sentences
        ), sentences
        assert validate_record(r) == [] and r["answer"] == "[NO INFORMATION]"
        assert all(m["no_information"] for m in r["intermediate"]["map"])
        assert r["intermediate"]["reduce"]["answer"] == "[NO INFORMATION]"

    with pytest.raises(BadInput, match="settings"):  # the named set is part of the run
        run_oracle(
            llm, tmp_path / "n", families=fams, lengths=[1500], n=4, progress=False,
            unanswerable=0.5,
        )  # fmt: skip
    with pytest.raises(BadInput, match="math_find has no unanswerable variant"):
        run_oracle(
            llm, tmp_path / "m", families=["math_find", "passkey"], lengths=[1500], n=1,
            unanswerable=0.5, unanswerable_families=["math_find"],
        )  # fmt: skip
    with pytest.raises(BadInput, match="not in --families"):
        run_oracle(
            llm, tmp_path / "m", families=["passkey"], lengths=[1500], n=1,
            unanswerable=0.5, unanswerable_families=["extractive_qa"],
        )  # fmt: skip
