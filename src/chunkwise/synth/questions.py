"""Questions from pyramid nodes: which nodes, the prompt, and the rules that drop bad ones.

Nodes are drawn per document with a configurable mix of kinds — ``leaf`` (a chunk: a detail
question, as in IN2), ``mid`` (a summary of several chunks) and ``root`` (the whole document,
as in LongAlign) — renormalized over the kinds a pyramid has (a one-leaf pyramid has only its
root). Within a kind, unused nodes come first. The prompt shows the node's most important
sentences; base models are also given the question's first word(s) (a "stem", drawn at random
from the prompt set), which keeps a small model on a question.

A candidate is dropped, with the reason counted, when it is:

``malformed``
    no question mark, fewer than 4 or more than 40 words, under 60% letters, or scaffold
    text left in it ("Answer:", "Question:").
``refers_to_missing_context``
    it points at something the reader of the document cannot see or asks for the reader's own
    view: "of the following", "the above", "this passage/excerpt/paragraph/sentence", "in your
    opinion", "do you think".
``ungrounded``
    fewer than half of its content words occur in the node's text (content words: 3+ letters,
    not stop words and not words any question uses, like "difference", "purpose", "example"):
    the model asked about something the text does not talk about.
``duplicate``
    the same as a question already kept for the document, after lower-casing and dropping
    punctuation, or 80%+ overlap of content words.
``no_answer`` (decided after answering)
    MapReduce over the whole document found nothing: an empty answer, "no information",
    "unknown", "not mentioned", "I don't know".
``no_evidence`` (decided after answering)
    no chunk yielded a finding that reached the reduce step (all said "no information" or were
    under MapReduce's confidence floor), so the answer would rest on nothing in the document.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from chunkwise.errors import BadInput
from chunkwise.synth.pyramid import Node, Pyramid

KINDS = ("leaf", "mid", "root")
DEFAULT_MIX = {"leaf": 0.4, "mid": 0.3, "root": 0.3}

_STOP = frozenset(
    """a an the and or but if then than of to in on at by for from with without into onto upon
    about above below over under between among through during before after since until while
    is are was were be been being am do does did doing done have has had having can could
    shall should will would may might must ought not no nor so too very also just only
    this that these those there here it its it's they them their theirs he him his she her hers
    we us our you your yours i me my mine one ones some any each every all both either neither
    such same other another more most less least many much few several own which who whom whose
    what when where why how whether as per via vs etc use used using make made get got
    thing things way ways kind kinds type types main mainly text document passage""".split()
)
#: words any question may use whatever the text says (not counted for grounding)
_QUESTION_WORDS = frozenset(
    """difference differences purpose example examples meaning mean means advantage advantages
    disadvantage disadvantages role reason reasons benefit benefits importance important
    relationship relation effect effects result results define defined definition work works
    happen happens happened describe described explain explained name named called call known
    different similar common possible happen significance significant called point points topic
    topics idea ideas following describe""".split()
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_LABEL = re.compile(r"^\s*(?:question|q)\s*\d*\s*[:.)-]\s*", re.I)
_SCAFFOLD = re.compile(r"\b(?:answer|question|summary|key sentences)\s*:", re.I)
_MISSING_CONTEXT = re.compile(
    r"\b(?:of the following|the following|the above|above text|this (?:passage|excerpt|"
    r"paragraph|sentence|quote|quotation|image|picture|figure|table|video)|in your (?:opinion|view)|"
    r"do you think|would you|your (?:opinion|view|favorite|favourite))\b",
    re.I,
)
_NO_ANSWER = re.compile(
    r"^\W*(?:no(?:t| relevant)? (?:enough )?information|\[?no information\]?|unknown|"
    r"not (?:mentioned|stated|specified|given|provided)|i (?:do not|don't) know|none|n/?a|"
    r"cannot be determined|it is not clear|the text does not say)\b",
    re.I,
)


def parse_mix(text: str | dict[str, float] | None) -> dict[str, float]:
    """``"leaf=0.4,mid=0.3,root=0.3"`` (or a dict) → weights; unknown kinds are errors."""
    if text is None or text == "":
        return dict(DEFAULT_MIX)
    items = (
        text.items()
        if isinstance(text, dict)
        else (
            part.split("=", 1) if "=" in part else (part, "")
            for part in str(text).split(",")
            if part.strip()
        )
    )
    mix: dict[str, float] = {}
    for k, v in items:
        k = str(k).strip()
        if k not in KINDS:
            raise BadInput(f"node mix: unknown node kind {k!r}; valid: {', '.join(KINDS)}")
        try:
            w = float(v)
        except (TypeError, ValueError):
            raise BadInput(
                f"node mix: {k}={v!r} is not a number (write e.g. leaf=0.4,mid=0.3,root=0.3)"
            ) from None
        if w < 0:
            raise BadInput(f"node mix: weight {k}={w} is negative")
        mix[k] = w
    if sum(mix.values()) <= 0:
        raise BadInput("node mix: the weights add up to 0")
    return {k: mix.get(k, 0.0) for k in KINDS}


def node_kind(p: Pyramid, node: Node) -> str:
    if node.id == p.root_id:
        return "root"
    return "leaf" if node.level == 0 else "mid"


def sample_nodes(
    p: Pyramid, k: int, mix: dict[str, float], rng: random.Random, used: set[str] | None = None
) -> list[tuple[Node, str]]:
    """``k`` (node, kind) draws; kinds by ``mix`` over the kinds present; nodes not in ``used``
    first (``used`` is updated, so later draws for the same document prefer other nodes)."""
    by_kind: dict[str, list[Node]] = {kind: [] for kind in KINDS}
    for n in p.nodes:
        by_kind[node_kind(p, n)].append(n)
    kinds = [kind for kind in KINDS if by_kind[kind] and mix.get(kind, 0) > 0]
    if not kinds:  # the mix names only kinds this pyramid lacks: fall back to what it has
        kinds = [kind for kind in KINDS if by_kind[kind]]
        weights = [1.0] * len(kinds)
    else:
        weights = [mix[kind] for kind in kinds]
    used = set() if used is None else used
    out = []
    for _ in range(k):
        kind = rng.choices(kinds, weights=weights)[0]
        fresh = [n for n in by_kind[kind] if n.id not in used]
        node = rng.choice(fresh or by_kind[kind])
        used.add(node.id)
        out.append((node, kind))
    return out


def _content(text: str) -> list[str]:
    return [w for w in (x.lower() for x in _WORD.findall(text)) if len(w) >= 3 and w not in _STOP]


def _question_content(q: str) -> list[str]:
    return [w for w in _content(q) if w not in _QUESTION_WORDS]


def _stem_word(w: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def normalize(q: str) -> str:
    return " ".join(w.lower() for w in _WORD.findall(q))


def clean_question(raw: str, stem: str = "") -> str:
    """Stem + completion → one line, label off, cut just after the first question mark."""
    text = f"{stem} {raw.lstrip()}" if stem and raw[:1] not in ("", " ") else stem + raw
    text = text.strip().splitlines()[0] if text.strip() else ""
    text = _LABEL.sub("", text).strip().strip('"“”')
    cut = text.find("?")
    if cut >= 0:
        text = text[: cut + 1]
    return " ".join(text.split())


def question_problem(q: str, node_text: str, kept: Sequence[str] = ()) -> str | None:
    """The first rule (see the module docstring) that ``q`` breaks, or None."""
    words = q.split()
    if not q.endswith("?") or not 4 <= len(words) <= 40:
        return "malformed"
    letters = sum(ch.isalpha() for ch in q)
    if letters < 0.6 * sum(not ch.isspace() for ch in q) or _SCAFFOLD.search(q):
        return "malformed"
    if _MISSING_CONTEXT.search(q):
        return "refers_to_missing_context"
    content = _question_content(q)
    if not content:
        return "ungrounded"
    source = {_stem_word(w) for w in _content(node_text)} | {
        _stem_word(w.lower()) for w in _WORD.findall(node_text)
    }
    found = sum(_stem_word(w) in source for w in content)
    if found < 0.5 * len(content):
        return "ungrounded"
    norm = normalize(q)
    cset = set(content)
    for other in kept:
        if normalize(other) == norm:
            return "duplicate"
        oset = set(_content(other))
        if cset and oset and len(cset & oset) / len(cset | oset) >= 0.8:
            return "duplicate"
    return None


def answer_problem(answer: str) -> str | None:
    """``no_answer`` when the MapReduce answer says it found nothing."""
    a = answer.strip()
    if not a or _NO_ANSWER.match(a) or not _WORD.search(a):
        return "no_answer"
    return None


@dataclass
class Candidate:
    node: Node
    kind: str
    stem: str
    prompt: str
    question: str = ""
    problem: str | None = None
