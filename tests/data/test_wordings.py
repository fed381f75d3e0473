"""The generated families' wordings (data/families/wordings.yaml, issue #49): every template
gives exact evidence spans, the wording is drawn apart from the document's content, the
original wording is the one before #49 byte for byte, and no held-out template reaches a
training record."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from typing import Any

import pytest

from chunkwise.data import synthetic
from chunkwise.data.families import FAMILIES, HELDOUT_SEED, Doc, wordings
from chunkwise.errors import BadInput

LENGTH = 800


def count(text: str) -> int:
    return len(text) // 4


def make(family: str, seed: int, templates: str, n: int = 6, length: int = LENGTH) -> list[Doc]:
    return FAMILIES[family].make(
        n=n, seed=seed, length_tokens=length, count_tokens=count, templates=templates
    )


def _used(docs: list[Doc]) -> set[str]:
    return {t for d in docs for t in d.meta["template_ids"].values()}


def _wanted(family: str, templates: str) -> set[str]:
    return {t.id for slot in _slots(family) for t in wordings.templates_of(family, slot, templates)}


def _slots(family: str) -> list[str]:
    if family == "conflicting":
        return ["question", *wordings.CONFLICT_KINDS]
    return ["question", "needle"] if family in ("passkey", "number_string") else ["question"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("templates", ["train", "heldout"])
def test_every_template_is_used_and_its_evidence_is_an_exact_span(family, templates):
    """Documents of several seeds until every template of the selection has worded one: each
    evidence span is the document's own text, each template id recorded is of the selection."""
    docs: list[Doc] = []
    for seed in range(200):  # conflicting: 8 styles x 4 kinds, a few seeds per template
        docs += make(family, seed, templates)
        if _used(docs) >= _wanted(family, templates):
            break
    assert _used(docs) == _wanted(family, templates), family
    for d in docs:
        assert d.meta["template_split"] == templates
        for ev in d.evidence:
            assert d.context[ev.start : ev.end] == ev.text, (d.id, ev.text)
        if family not in ("math_find", "multihop", "variable_tracking"):  # evidence per chunk
            assert d.evidence, d.id
        assert d.question.strip(), d.id


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_wording_leaves_the_content_alone(family):
    """Train, held-out and original wording of one seed: the same answers, evidence kinds and
    text outside the evidence and question (filler, keys, positions), other words."""
    by = {t: make(family, 3, t) for t in wordings.SELECTIONS}

    def content(d: Doc) -> tuple[Any, ...]:
        rest, at = [], 0
        for ev in sorted(d.evidence, key=lambda e: e.start):
            rest.append(d.context[at : ev.start])
            at = ev.end
        rest.append(d.context[at:])
        return d.answer, [ev.kind for ev in d.evidence], [ev.answer for ev in d.evidence], rest

    train, held, orig = by["train"], by["heldout"], by["original"]
    assert [content(d) for d in train] == [content(d) for d in orig], family
    assert [content(d) for d in held] == [content(d) for d in orig], family
    assert {d.question for d in held}.isdisjoint(d.question for d in train), family


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_same_seed_same_documents_and_each_document_its_own_draw(family):
    for templates in ("train", "heldout"):
        a, b = make(family, 11, templates), make(family, 11, templates)
        assert [(d.context, d.question, d.meta) for d in a] == [
            (d.context, d.question, d.meta) for d in b
        ]
    # the draw is per document: 12 documents of one seed are not worded alike
    ids = [tuple(sorted(d.meta["template_ids"].items())) for d in make(family, 11, "train", 12)]
    assert len(set(ids)) >= 2, family


#: sha256 of the documents each family made at seed 7 (n=4, 800 tokens, len//4 counter)
#: before #49, from the code at a496a7e: templates="original" must give them byte for byte
BEFORE_49 = {
    "conflicting": "7df9875db9da78ede6ddfa3968dec5ffdfd4a642cdb339b0bf741f890e6672a9",
    "extractive_qa": "84e15487d8a6c9f2494d77717ec12b2b5a81d93b363976dd326fcd8cf2ab7359",
    "kv_retrieval": "ce9515a59d14b8ad3a5b127142c2c09a68f7b8c8e87c27122f4d6997562cae3b",
    "math_find": "ea435e45251942ae15fcb95637559601c2219a0b489aea2152928edf3cd333c8",
    "multihop": "b90846c117ef5540157f32fd54db4d5d9338c77ee6669a144781eb27361197e3",
    "number_string": "9aae3459d97aeb5aa705763f5f6379d714a81edb55a80a925f271893c2296f08",
    "passkey": "5cea7603e2b644bc986f64fdc6cc19c2418e9617f3d7d9558b4ffbb2dd3e8324",
    "variable_tracking": "30fcf479a11b531fbf96d5bdbe7a7ca4236eb20b815025f60bc6fb4f2ec3248e",
}


def digest(docs: list[Doc]) -> str:
    rows = [
        [
            d.id, d.context, d.question, d.answer, d.task, d.answer_prefix, d.max_answer_tokens,
            [[e.start, e.end, e.kind, e.text, e.answer, list(e.data)] for e in d.evidence],
            {k: v for k, v in d.meta.items() if not k.startswith("template") and k != "style"},
        ]
        for d in docs
    ]  # fmt: skip
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_original_wording_is_the_documents_before_issue_49(family):
    assert digest(make(family, 7, "original", n=4)) == BEFORE_49[family]


def test_official_infinitebench_wordings_are_train_templates_taken_from_the_project():
    """InfiniteBench's own inputs (as chunkwise.data.synthetic builds them) and the questions
    `chunkwise eval --benchmark infinitebench` asks are training templates, not copies."""
    text = {t.id: t for t in wordings.all_templates()}
    key = "0f6a2c1e-0000-4000-8000-000000000000"
    assert text["kv-q1"].fill(key=key) == synthetic.KV_INPUT.format(key=key).strip()
    assert text["pk-q0"].fill() == synthetic.PASSKEY_QUESTION
    assert text["pk-n0"].fill(key="12345") == synthetic.PASSKEY_NEEDLE.format(key="12345").strip()
    assert text["mf-q1"].fill(what="largest number") == (
        synthetic.MATH_FIND_INPUT.format(what="largest number").strip()
    )
    assert text["ns-n0"].source == "official" and text["kv-q2"].source == "infinitebench-chat"
    assert all(t.split == "train" for t in text.values() if t.source)


def test_one_conflicting_style_is_held_out_whole():
    styles: dict[str, set[str]] = defaultdict(set)
    for kind in wordings.CONFLICT_KINDS:
        for t in wordings.templates_of("conflicting", kind, "train"):
            styles[t.style].add("train")
        for t in wordings.templates_of("conflicting", kind, "heldout"):
            styles[t.style].add("heldout")
    held = [s for s, splits in styles.items() if "heldout" in splits]
    assert len(held) == 1 and styles[held[0]] == {"heldout"} and len(styles) >= 4
    docs = make("conflicting", HELDOUT_SEED, "heldout", n=6)
    assert {d.meta["style"] for d in docs} == set(held)
    assert {d.meta["weak"] for d in docs} == {"hedged", "unreliable", "retracted"}


def test_the_model_card_table_puts_each_template_in_its_split_column():
    """``python -m chunkwise.data.families`` publishes every template once; split_table (the
    model card's block) lists each id under the column of its split and nowhere else."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "chunkwise.data.families"], check=True,
                         capture_output=True, text=True)  # fmt: skip
    data = json.loads(out.stdout)
    assert data["wordings"] == wordings.wordings_digest()
    ids = [t["id"] for slots in data["families"].values() for ts in slots.values() for t in ts]
    assert sorted(ids) == sorted(t.id for t in wordings.all_templates())
    rows = [r.split(" | ") for r in wordings.split_table(data).splitlines() if r.startswith("| ")]
    cells = {(r[0].strip("| "), r[1]): (r[2], r[3].strip(" |")) for r in rows[1:]}
    assert len(cells) == sum(len(slots) for slots in data["families"].values())
    for t in wordings.all_templates():
        family = next(f for f, slots in data["families"].items()
                      if any(x["id"] == t.id for ts in slots.values() for x in ts))  # fmt: skip
        slot = next(
            s for s, ts in data["families"][family].items() if t.id in [x["id"] for x in ts]
        )
        trained, held = (re.findall(r"[\w-]+-[a-z]*\d+", c) for c in cells[family, slot])
        assert (t.id in trained, t.id in held) == (t.split == "train", t.split == "heldout"), t.id
    assert (
        "inquiry:" in cells["conflicting", "plain"][1]
        and "(official)" in cells["kv_retrieval", "question"][0]
    )


def test_the_shipped_adapters_template_table_is_todays_wordings():
    """The model card's table (docs/results/default-mr-templates.json, published when the
    adapter trained on it shipped) holds today's templates: a wording changed since means the
    adapter did not see it, so change wordings.yaml together with a retrain."""
    from pathlib import Path

    published = Path(__file__).resolve().parents[2] / "docs/results/default-mr-templates.json"
    if not published.is_file():
        pytest.skip("no adapter trained on the #49 wordings ships yet")
    import json

    assert json.loads(published.read_text())["families"] == wordings.summary()["families"]


def test_no_training_template_uses_a_held_out_reliability_cue():
    """The held-out conflicting style's cue words (retracted, unreliable, ...) are in no
    training template, and the loader refuses a table where one is."""
    heldout = [t for t in wordings.all_templates() if t.style and t.split == "heldout"]
    words = {w for t in heldout for w in re.findall(r"[a-z]+", t.text.lower())}
    assert set(wordings.HELDOUT_CUES) <= words  # each cue is the held-out style's own
    for t in wordings.all_templates():
        if t.split == "train":
            assert not set(re.findall(r"[a-z]+", t.text.lower())) & set(wordings.HELDOUT_CUES)
    table = {"conflicting": {"retracted": [
        wordings.Template("x-r0", "train", "A memo put the {thing}'s code at {code}."),
        wordings.Template("x-r1", "train", "The memo giving {code} for the {thing} was retracted."),
    ]}}  # fmt: skip
    with pytest.raises(BadInput, match=r"x-r1: a training template uses the held-out cue"):
        wordings._check(table)


def test_a_bad_selection_is_refused_in_one_line():
    with pytest.raises(BadInput, match="expected one of train, heldout, original") as e:
        make("passkey", 0, "test")
    assert "\n" not in str(e.value)


# -- no held-out template in any training record -----------------------------------------


def _strings(x: Any) -> list[str]:
    if isinstance(x, str):
        return [x]
    if isinstance(x, dict):
        return [s for v in x.values() for s in _strings(v)]
    if isinstance(x, list):
        return [s for v in x for s in _strings(v)]
    return []


def training_texts(llm: Any, out: Any, args: dict[str, Any], window: int) -> list[str]:
    """Every string of every oracle record and every prompt and target training renders."""
    from chunkwise.data.families import train_families
    from chunkwise.synth.oracle import OracleTeacher, run_oracle
    from chunkwise.train.formats import expand_pyramid

    run_oracle(
        llm, out, families=train_families(), lengths=[1500], n=6, window=window,
        mapreduce_args=args, progress=False, unanswerable=0.17,
    )  # fmt: skip
    strategy = OracleTeacher(llm, window, args).strategy
    texts: list[str] = []
    for line in (out / "data" / "oracle.jsonl").read_text().splitlines():
        rec = json.loads(line)
        texts += _strings(rec)
        for ex in expand_pyramid(rec, "mem", mode="mapreduce", kind="chat", mr=strategy,
                                 window=window):  # fmt: skip
            texts += [m["content"] for m in ex.messages]
    return texts


def check_split(texts: list[str]) -> None:
    every = wordings.all_templates()
    held = [t for t in every if t.split == "heldout"]
    leaked = [t.id for t in held if any(t.distinctive() in x for x in texts)]
    assert not leaked, leaked
    seen = {t.id for t in every if t.split == "train" and any(t.distinctive() in x for x in texts)}
    # several training wordings of several families, the official kv input among them
    assert len(seen) >= 15 and "kv-q1" in seen, sorted(seen)
    assert len({i.split("-")[0] for i in seen}) >= 5, sorted(seen)


def test_training_records_hold_no_held_out_template(tmp_path):
    """`chunkwise synth --teacher oracle` (what `make default-mr` runs) on every training
    family, with the scripted double's word-piece counter: held-out wordings never appear."""
    from chunkwise.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(default="-", window=4096)
    llm.chat = True
    check_split(training_texts(llm, tmp_path / "o", {"prompts": "chat", "chunk_tokens": 500}, 4096))


@pytest.mark.slow  # the embedded tokenizer (no weights): what `make default-mr` counts with
def test_training_records_hold_no_held_out_template_under_the_real_tokenizer(tmp_path):
    from chunkwise.llm.default_mr import counting_llm

    llm = counting_llm()
    try:
        texts = training_texts(llm, tmp_path / "o", {"prompts": "chat", "chunk_tokens": 500}, 4096)
    finally:
        llm.close()
    check_split(texts)
