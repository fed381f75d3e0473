"""MapReduce's prompts: the prompt set of one model kind and task family, rendered into the map,
collapse and reduce prompts, with records shown the way the collapse and reduce calls show them.

:class:`~.strategy.MapReduce` exposes these as methods so that training renders exactly what
decoding sends.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from chunkwise.llm import LLM, GenerationParams, Request
from chunkwise.prompts import load_text, prompt_set
from chunkwise.strategies.base import Query
from chunkwise.strategies.protocol import NO_INFO, Record, missing_answer, render_record

#: prompt slots that differ between confidence on and off (``conf_<slot>`` / ``noconf_<slot>``)
CONFIDENCE_SLOTS = ("step", "format", "findings", "collapse_rule", "collapse_step", "reduce_rule")
NO_RELEVANT = "No part of the document was found to contain information relevant to the question."


@dataclass
class Prompts:
    kind: str
    templates: dict[str, Any]
    calibration: str
    #: the query's answer prefix; base-model findings are shown as "<prefix> <answer>"
    answer_prefix: str = ""
    #: whether prompts ask for, show and use a confidence score (``confidence`` != off)
    with_confidence: bool = True
    #: structured (the four-field protocol) or plain (free-text notes: the paper's ablation)
    protocol: str = "structured"

    def render(self, name: str, **values: str) -> str:
        values.setdefault("answer_prefix", "Answer:")
        prefix = "conf_" if self.with_confidence else "noconf_"
        for slot in CONFIDENCE_SLOTS:
            values.setdefault(f"conf_{slot}", str(self.templates.get(prefix + slot, "")))
        values.setdefault("hint", self.templates.get("hint", ""))  # a task's own hint wins
        text = self.templates[name].format(calibration=self.calibration, **values)
        # No trailing space after a final "Answer:": sentencepiece tokenizers attach the
        # space to the answer's first token, and a dangling space derails base models.
        return "\n".join(line.rstrip() for line in text.splitlines()).strip()

    def template(self, name: str) -> str:
        """The template of stage ``name`` under this protocol."""
        return f"plain_{name}" if self.protocol == "plain" else name


def load_prompts(
    kind: str, family: str, *, protocol: str, confidence: str, calibration: bool
) -> Prompts:
    """The prompt set for a model kind (``chat`` | ``base``) and task family, under the
    strategy's ``protocol``, ``confidence`` and ``calibration`` options."""
    templates = prompt_set("mapreduce", kind, family)
    with_conf = confidence != "off" and protocol == "structured"
    block = ""
    if calibration and with_conf:
        block = templates.get("calibration") or load_text("mapreduce/calibration.txt")
        if templates.get("calibration_rule"):
            block += "\n" + str(templates["calibration_rule"])
    return Prompts(kind, templates, block, with_confidence=with_conf, protocol=protocol)


def question_values(query: Query) -> dict[str, str]:
    """The template values a query fills: the question, its answer prefix and hint."""
    values = {"question": query.render(), "answer_prefix": query.answer_prefix or "Answer:"}
    if query.hint is not None:
        values["hint"] = query.hint
    return values


def as_request(llm: LLM, text: str, params: GenerationParams) -> Request:
    """A rendered prompt as ``llm``'s request (chat messages or plain text)."""
    return Request(llm.as_prompt(text), params)


def map_prompt(p: Prompts, chunk: str, query: Query) -> str:
    return p.render(p.template("map"), chunk=chunk, **question_values(query))


def collapse_prompt(p: Prompts, records: list[Record], query: Query) -> str:
    p = replace(p, answer_prefix=query.answer_prefix)
    return p.render(
        p.template("collapse"), records=show_records(records, p), **question_values(query)
    )


def reduce_prompt(p: Prompts, records: list[Record], query: Query, order: str) -> str:
    """The reduce prompt over ``records`` shown in ``order`` (the ``reduce_order`` option)."""
    p = replace(p, answer_prefix=query.answer_prefix)
    return p.render(
        p.template("reduce"),
        records=records_for_reduce(records, p, order),
        **question_values(query),
    )


def record_target(p: Prompts, record: Record) -> str:
    """What a map or collapse call should output for ``record`` (a training target)."""
    if p.protocol == "plain" or p.kind == "base":
        return " " + (record.answer or record.extracted_information or NO_INFO).strip()
    return render_record(record, with_confidence=p.with_confidence)


def show_record(r: Record, p: Prompts) -> str:
    """One record as the collapse and reduce stages see it (label included)."""
    with_conf = p.with_confidence and r.confidence is not None
    key = "record" if with_conf else "record_no_confidence"
    template = p.templates.get(key) if p.protocol == "structured" else None
    if template:
        answer = (r.answer if r.answer is not None else missing_answer(r)).strip()
        if p.answer_prefix and r.answer:
            answer = f"{p.answer_prefix} {answer}"
        return template.format(
            parts=parts(r),
            answer=answer,
            confidence=f"{r.confidence:.1f}" if with_conf else "",
            info=r.extracted_information,
        )
    body = render_record(r, with_confidence=with_conf, structured=p.protocol == "structured")
    label = "part" if len(r.sources) == 1 else "parts"
    return f"Findings from {label} {parts(r)}:\n{body}"


def show_records(records: list[Record], p: Prompts, order: str = "document") -> str:
    if order == "confidence":  # most confident last, nearest the question
        records = sorted(records, key=lambda r: r.confidence if r.confidence is not None else -1)
    return p.templates.get("record_separator", "\n\n").join(show_record(r, p) for r in records)


def records_for_reduce(records: list[Record], p: Prompts, order: str) -> str:
    """``records`` as the reduce call shows them; ``order`` is auto, document or confidence."""
    if not records:
        return NO_RELEVANT
    if order == "auto":
        order = "confidence" if p.kind == "base" and p.with_confidence else "document"
    if not p.with_confidence:
        order = "document"
    return show_records(records, p, order)


def parts(r: Record) -> str:
    """The record's chunk numbers, counted from 1."""
    return ", ".join(str(i + 1) for i in r.sources)


__all__ = [
    "CONFIDENCE_SLOTS",
    "NO_RELEVANT",
    "Prompts",
    "collapse_prompt",
    "load_prompts",
    "map_prompt",
    "record_target",
    "reduce_prompt",
    "show_record",
]
