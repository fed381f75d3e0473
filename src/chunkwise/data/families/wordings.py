"""The wordings of the generated families' questions and evidence statements
(``wordings.yaml`` beside this module): templates with an id and a split, and the seeded
choice of one per document.

A family asks for a slot's templates of one *selection*: ``train`` (what training records may
use), ``heldout`` (never in a training record) or ``original`` (the first template of the
slot: the wording before issue #49, which the shipped ``hf:default-mr`` was trained on). The
template of a document is drawn by :func:`draw`, from a generator of its own keyed by the
family, seed, length and document index, so the document's content (filler, keys, positions),
drawn from the family's usual stream, stays the same whatever the wording.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from chunkwise.errors import BadInput

T = TypeVar("T")

#: what Family.make(templates=...) takes
SELECTIONS = ("train", "heldout", "original")
_SPLITS = ("train", "heldout")
#: the evidence kinds a conflicting style words (the plain statement is ``plain``)
CONFLICT_KINDS = ("plain", "hedged", "unreliable", "retracted")
#: the fields each family's templates may use
FIELDS: dict[str, tuple[str, ...]] = {
    "passkey": ("key",),
    "number_string": ("key",),
    "kv_retrieval": ("key",),
    "math_find": ("what",),
    "multihop": ("obj",),
    "variable_tracking": ("value",),
    "extractive_qa": ("prefix",),
    "conflicting": ("thing", "code"),
}
#: families whose question quotes its field (anchor_quotes keys on quoted phrases)
_QUOTED = {"kv_retrieval": "key", "extractive_qa": "prefix"}
#: the held-out conflicting style's words for who is (un)reliable and what was withdrawn: no
#: training template may use one, so the held-out cell asks whether reliability is read from
#: words the adapter never met in this task (words, matched whole, lower case)
HELDOUT_CUES = (
    "retracted", "unreliable", "untrustworthy", "committee", "inquiry", "witness", "testified",
    "judged", "certifies", "inspectorate", "auditors", "tentatively", "verification", "draft",
    "interim", "unsigned",
)  # fmt: skip
_FIELD = re.compile(r"\{(\w*)\}")


@dataclass(frozen=True)
class Template:
    """One wording of one slot: ``text`` with ``{field}`` holes."""

    id: str
    split: str  # "train" | "heldout"
    text: str
    #: where the text comes from: "" (written in wordings.yaml), "official",
    #: "infinitebench-chat" or "infinitebench-base"
    source: str = ""
    #: conflicting statements: the phrasing style the template belongs to
    style: str = ""

    def fill(self, **values: Any) -> str:
        return _FIELD.sub(lambda m: str(values[m.group(1)]), self.text)

    def distinctive(self) -> str:
        """The template's longest stretch of literal text: what a record holding this wording
        shows whatever the fields are."""
        return max(_FIELD.split(self.text)[::2], key=len).strip()


def _official(family: str, slot: str) -> str:
    """InfiniteBench's input (or needle) for ``family`` as chunkwise.data.synthetic builds it,
    with our field names."""
    from chunkwise.data import synthetic

    table = {
        ("passkey", "question"): synthetic.PASSKEY_QUESTION,
        ("passkey", "needle"): synthetic.PASSKEY_NEEDLE,
        ("number_string", "question"): synthetic.NUMBER_QUESTION,
        ("number_string", "needle"): synthetic.NUMBER_NEEDLE,
        ("kv_retrieval", "question"): synthetic.KV_INPUT,
        ("math_find", "question"): synthetic.MATH_FIND_INPUT,
    }
    if (family, slot) not in table:
        raise BadInput(f"wordings.yaml: {family}/{slot} has no official wording to take")
    return table[family, slot].strip()


def _infinitebench(family: str, kind: str) -> str:
    """The question ``chunkwise eval --benchmark infinitebench`` asks a multi-call strategy
    (prompts.yaml, ``kind`` chat or base), with our field names."""
    from chunkwise.prompts import load_prompt_file

    tasks = load_prompt_file("chunkwise.benchmarks.infinitebench", "prompts.yaml")["tasks"]
    if family not in tasks:
        raise BadInput(f"wordings.yaml: InfiniteBench has no task {family!r}")
    question = _official(family, "question") if family in ("passkey", "number_string") else ""
    text = tasks[family][kind].replace("{input}", question).replace("{target}", "{what}")
    return "\n".join(line for line in text.splitlines() if line.strip()).strip()


def _resolve(family: str, slot: str, entry: dict[str, Any]) -> tuple[str, str]:
    """(text, source) of one template entry."""
    if ("text" in entry) == ("from" in entry):
        raise BadInput(f"wordings.yaml: {entry.get('id')}: give exactly one of text and from")
    if "text" in entry:
        return str(entry["text"]), ""
    source = str(entry["from"])
    if source == "official":
        return _official(family, slot), source
    if source in ("infinitebench-chat", "infinitebench-base"):
        return _infinitebench(family, source.split("-")[1]), source
    raise BadInput(f"wordings.yaml: {entry.get('id')}: unknown source {source!r}")


def _template(family: str, slot: str, entry: dict[str, Any], split: str, style: str) -> Template:
    text, source = _resolve(family, slot, entry)
    if split not in _SPLITS:
        raise BadInput(f"wordings.yaml: {entry.get('id')}: split must be train or heldout")
    fields = set(_FIELD.findall(text))
    if not fields <= set(FIELDS[family]):
        raise BadInput(f"wordings.yaml: {entry['id']}: fields {sorted(fields)} not in "
                       f"{FIELDS[family]}")  # fmt: skip
    if slot == "question":
        quoted = _QUOTED.get(family)
        if quoted and f'"{{{quoted}}}"' not in text:
            raise BadInput(f'wordings.yaml: {entry["id"]}: the question must quote "{{{quoted}}}"')
        if not quoted and '"' in text:
            raise BadInput(f"wordings.yaml: {entry['id']}: the question quotes a phrase")
    return Template(str(entry["id"]), split, text, source, style)


@cache
def _table() -> dict[str, dict[str, list[Template]]]:
    """family -> slot -> templates, checked: unique ids and texts, valid fields and splits,
    each slot's first template a training one, every held-out template's distinctive text
    absent from every training template."""
    from chunkwise.prompts import load_prompt_file

    data = load_prompt_file("chunkwise.data.families", "wordings.yaml")
    out: dict[str, dict[str, list[Template]]] = {}
    for family, slots in data["families"].items():
        if family not in FIELDS:
            raise BadInput(f"wordings.yaml: unknown family {family!r}")
        table: dict[str, list[Template]] = {}
        for slot, entries in slots.items():
            if slot == "styles":
                for style, spec in entries.items():
                    for kind in CONFLICT_KINDS:
                        table.setdefault(kind, []).extend(
                            _template(family, kind, e, spec["split"], style) for e in spec[kind]
                        )
            else:
                table[slot] = [_template(family, slot, e, e.get("split", ""), "") for e in entries]
        out[family] = table
    _check(out)
    return out


def _check(table: dict[str, dict[str, list[Template]]]) -> None:
    every = [t for slots in table.values() for ts in slots.values() for t in ts]
    ids = [t.id for t in every]
    if len(set(ids)) != len(ids):
        raise BadInput("wordings.yaml: template ids repeat")
    trained = [t.text for t in every if t.split == "train"]
    for family, slots in table.items():
        for slot, ts in slots.items():
            if ts[0].split != "train" or len({t.text for t in ts}) != len(ts):
                raise BadInput(f"wordings.yaml: {family}/{slot}: the first template must be "
                               "a training one, and no text may repeat")  # fmt: skip
            for t in ts:
                mark = t.distinctive()
                if t.split == "heldout" and (len(mark) < 12 or any(mark in x for x in trained)):
                    raise BadInput(f"wordings.yaml: {t.id}: its distinctive text {mark!r} is "
                                   "short or also in a training template")  # fmt: skip
                cues = set(re.findall(r"[a-z]+", t.text.lower())) & set(HELDOUT_CUES)
                if t.split == "train" and cues:
                    raise BadInput(f"wordings.yaml: {t.id}: a training template uses the "
                                   f"held-out cue(s) {sorted(cues)}")  # fmt: skip


def check_selection(templates: str) -> str:
    if templates not in SELECTIONS:
        raise BadInput(f"templates {templates!r}: expected one of {', '.join(SELECTIONS)}")
    return templates


def templates_of(family: str, slot: str, templates: str = "train") -> list[Template]:
    """The templates of ``family``'s ``slot`` that selection ``templates`` draws from."""
    check_selection(templates)
    every = _table()[family][slot]
    if templates == "original":
        return every[:1]
    return [t for t in every if t.split == templates]


def all_templates() -> list[Template]:
    """Every template of every family (for tests and documentation)."""
    return [t for slots in _table().values() for ts in slots.values() for t in ts]


def draw(family: str, slot: str, options: Sequence[T], seed: int, length: int, index: int) -> T:
    """The option of ``options`` that document ``index`` (of ``family`` at ``seed`` and
    ``length``) takes: each run of ``len(options)`` documents uses every option once, in an
    order shuffled per run by a generator of its own (string-seeded, so stable across
    processes), so the family's content stream is drawn exactly as before whatever the
    wording, and a dozen documents see every template."""
    k = len(options)
    order = list(range(k))
    random.Random(f"wording/{family}/{seed}/{length}/{slot}/{index // k}").shuffle(order)
    return options[order[index % k]]


def pick(family: str, slot: str, templates: str, seed: int, length: int, index: int) -> Template:
    """Document ``index``'s template for ``slot`` (:func:`draw` over the selection's)."""
    return draw(family, slot, templates_of(family, slot, templates), seed, length, index)


def pick_conflict(
    templates: str, weak_kind: str, seed: int, length: int, index: int
) -> tuple[Template, Template]:
    """A conflicting document's (plain, weak) statements: a style of the selection, then a
    template of each kind within that style."""
    plains = templates_of("conflicting", "plain", templates)
    styles = list(dict.fromkeys(t.style for t in plains))
    style = draw("conflicting", "style", styles, seed, length, index)
    weak = [t for t in templates_of("conflicting", weak_kind, templates) if t.style == style]
    return (
        draw("conflicting", f"plain/{style}", [t for t in plains if t.style == style],
             seed, length, index),
        draw("conflicting", f"{weak_kind}/{style}", weak, seed, length, index),
    )  # fmt: skip


def record(templates: str, picked: Sequence[tuple[str, Template]]) -> dict[str, Any]:
    """What a document's meta records of its wording: the selection and each slot's id."""
    return {"template_split": templates, "template_ids": {s: t.id for s, t in picked}}


def wordings_digest() -> str:
    """A digest of every template (what a change of wording changes)."""
    rows = [[t.id, t.split, t.text] for t in all_templates()]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:12]


def summary() -> dict[str, Any]:
    """Every template by family and slot, with the digest: what a model card publishes
    (``python -m chunkwise.data.families``, rendered by :func:`split_table`)."""
    families: dict[str, dict[str, list[dict[str, str]]]] = {}
    for family, slots in _table().items():
        families[family] = {
            slot: [
                {"id": t.id, "split": t.split, "source": t.source, "style": t.style, "text": t.text}
                for t in ts
            ]
            for slot, ts in slots.items()
        }
    return {"wordings": wordings_digest(), "families": families}


def split_table(data: dict[str, Any]) -> str:
    """A markdown table of :func:`summary`: per family and slot, the template ids a training
    record may use and those held out (an official InfiniteBench wording marked as such; a
    conflicting statement by its phrasing style)."""

    def name(t: dict[str, str]) -> str:
        return t["id"] + (f" ({t['source']})" if t["source"] else "")

    lines = [
        f"Wordings {data['wordings']}: template ids per slot (texts in "
        "src/chunkwise/data/families/wordings.yaml).",
        "",
        "| family | slot | trained on | held out |",
        "|---|---|---|---|",
    ]
    for family, slots in data["families"].items():
        for slot, ts in slots.items():
            if any(t["style"] for t in ts):  # conflicting: one row per kind, by style
                cells = []
                for split in _SPLITS:
                    styles = dict.fromkeys(t["style"] for t in ts if t["split"] == split)
                    cells.append(", ".join(
                        f"{st}: " + " ".join(t["id"] for t in ts if t["style"] == st)
                        for st in styles
                    ))  # fmt: skip
            else:
                cells = [", ".join(name(t) for t in ts if t["split"] == sp) for sp in _SPLITS]
            lines.append(f"| {family} | {slot} | {cells[0]} | {cells[1] or '-'} |")
    return "\n".join(lines)


__all__ = [
    "CONFLICT_KINDS",
    "SELECTIONS",
    "Template",
    "all_templates",
    "check_selection",
    "draw",
    "pick",
    "pick_conflict",
    "record",
    "split_table",
    "summary",
    "templates_of",
    "wordings_digest",
]
