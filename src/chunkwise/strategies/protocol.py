"""The structured information protocol of LLM×MapReduce, parsed into typed records.

A map or collapse output carries four fields — extracted information, rationale, answer (or
a NO-INFORMATION marker) and a 0–5 confidence. The reference implementation passes raw text
along; we parse it so that filtering, confidence weighting and training data can rely on it.
The parser never raises: missing or reordered fields, markdown decoration, extra prose,
headers such as "Confidence Score (0-5):" or "Confidence level:", and confidence written as
"4/5", "4.5", "high", "based on 2 of the 3 facts, 4" or not at all are all handled.

A record whose output has no answer field (the model skipped it, or generation was cut by
``max_new_tokens`` before reaching it) keeps ``answer=None``; it is shown to later stages as
"no answer given", never as the NO INFORMATION marker, which only the model itself may write.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

NO_INFO = "[NO INFORMATION]"

_FIELD_NAMES = {
    "extracted_information": (
        "extracted information",
        "extracted code",
        "information",
        "提取的信息",
    ),
    "rationale": ("rationale", "reasoning", "分析"),
    "answer": ("final answer", "answer", "答案"),
    "confidence": (
        "confidence score",
        "confidence level",
        "confidence rating",
        "confidence",
        "置信度分数",
        "置信度",
    ),
}
_ALIAS = {alias: name for name, aliases in _FIELD_NAMES.items() for alias in aliases}
_HEADER = re.compile(
    r"(?im)^[ \t>*#_\-]*(?:\d+[.)]\s*)?\**\s*("
    + "|".join(sorted((re.escape(a) for a in _ALIAS), key=len, reverse=True))
    + r")\s*\**\s*(?:[(（][^()\n（）]{0,30}[)）]\s*\**\s*)?[:：]\s*\**[ \t]*"
)
#: where a reply runs on into the next part's record: our prompts' part delimiter
_RUN_ON = re.compile(r"^\s*=====", re.M)
_NO_INFO = re.compile(r"^\W*no[\s_-]*(?:relevant[\s_-]*)?information\b", re.I)
_FRACTION = re.compile(r"(\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?)", re.I)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
#: a number that counts things ("2 of the 3 facts", "3 sentences") rather than scores
_COUNT_AFTER = re.compile(
    r"\s*(?:of\b|(?!(?:points|stars|because|this|thus|is|was|has|as|yes|plus|unless)\b)"
    r"[a-z]+s\b)"
)
_COUNT_BEFORE = re.compile(r"\bof\s+(?:the\s+|all\s+)?$")
#: what a record with no answer field is shown as (not the NO INFORMATION marker)
NO_ANSWER = "(no answer given)"
CUT_OFF = "(cut off before an answer)"
_WORDS = (
    ("very high", 5.0),
    ("high", 4.0),
    ("medium", 2.5),
    ("moderate", 2.5),
    ("very low", 0.5),
    ("low", 1.0),
    ("none", 0.0),
)


def parse_confidence(text: str | None) -> float | None:
    """A 0–5 confidence from free text; ``None`` when it says nothing usable."""
    if not text:
        return None
    t = text.strip().lower()
    m = _FRACTION.search(t)
    if m:
        num, den = float(m.group(1)), float(m.group(2))
        if den > 0:
            return max(0.0, min(5.0, 5.0 * num / den))
    numbers = list(_NUMBER.finditer(t))
    scores = [
        m
        for m in numbers
        if not _COUNT_AFTER.match(t, m.end()) and not _COUNT_BEFORE.search(t[: m.start()])
    ]
    m = (scores or numbers or [None])[0]
    if m is not None:
        return max(0.0, min(5.0, float(m.group())))
    for word, value in _WORDS:
        if re.search(rf"\b{word}\b", t):
            return value
    return None


def says_no_information(answer: str | None) -> bool:
    return answer is not None and bool(_NO_INFO.match(answer.strip().strip("*_`\"'")))


def _clean(value: str) -> str:
    value = value.strip()
    value = re.sub(r"^\*+|\*+$", "", value).strip()
    return value


@dataclass
class Record:
    """One map or collapse result."""

    extracted_information: str = ""
    rationale: str = ""
    answer: str | None = None
    confidence: float | None = None
    no_information: bool = False
    raw: str = ""
    #: chunk indices this record covers (one for a map record, several after collapse)
    sources: list[int] = field(default_factory=list)
    #: generation stopped at max_new_tokens (an answer field it lacks was cut off, not skipped)
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def parse_record(text: str, *, answer_only: bool = False) -> Record:
    """Parse a protocol output. With ``answer_only`` (completion-style scaffolds for base
    models) text without any field header is taken as the answer itself."""
    raw = text or ""
    # a reply that runs on into another record (a part delimiter, or a field given twice)
    # ends where that record begins: its fields are not this one's
    delimiter = _RUN_ON.search(raw)
    own = raw[: delimiter.start()] if delimiter else raw
    headers = list(_HEADER.finditer(own))
    names = [_ALIAS[m.group(1).lower()] for m in headers]
    for i, name in enumerate(names):
        if name in names[:i] and name != names[i - 1]:  # given before, not just above
            own, headers, names = own[: headers[i].start()], headers[:i], names[:i]
            break
    fields: dict[str, str] = {}
    for i, (m, name) in enumerate(zip(headers, names, strict=True)):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(own)
        value = _clean(own[m.end() : end])
        if name not in fields or not fields[name]:  # first non-empty occurrence wins
            fields[name] = value
    if not headers:
        body = _clean(raw)
        if answer_only:
            fields["answer"] = body
        else:
            fields["extracted_information"] = body
    answer = fields.get("answer")
    if answer is not None:
        answer = answer.strip()
    confidence = parse_confidence(fields.get("confidence"))
    no_info = says_no_information(answer)
    if answer is None:
        # Generation stopped at the marker before an answer field (early stop), or the
        # whole output is the marker: nothing in this chunk.
        no_info = NO_INFO.lower() in raw.lower() or says_no_information(_clean(raw))
    elif not answer:
        no_info = True
    return Record(
        extracted_information=fields.get("extracted_information", ""),
        rationale=fields.get("rationale", ""),
        answer=answer,
        confidence=confidence,
        no_information=no_info,
        raw=raw,
    )


def missing_answer(r: Record) -> str:
    """How a record without an answer field is shown: NO INFORMATION only if it said so."""
    if r.no_information:
        return NO_INFO
    return CUT_OFF if r.truncated else NO_ANSWER


def render_record(r: Record, *, with_confidence: bool = True, structured: bool = True) -> str:
    """How a record is shown to the collapse and reduce stages."""
    if not structured:
        return (r.extracted_information or r.answer or "").strip()
    lines = []
    if r.extracted_information:
        lines.append(f"Extracted Information: {r.extracted_information}")
    if r.rationale:
        lines.append(f"Rationale: {r.rationale}")
    lines.append(f"Answer: {missing_answer(r) if r.answer is None else r.answer}")
    if with_confidence and r.confidence is not None:
        lines.append(f"Confidence Score: {r.confidence:g}")
    return "\n".join(lines)
