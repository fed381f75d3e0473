"""Answer extractors: (task, raw model output) -> the text an InfiniteBench rule scores.

Which one fits depends on who wrote the prompts that produced the text, because the prompts
fix the format of the reply:

* our MapReduce prompt sets (``prompts/mapreduce/chat.yaml`` ``mr-chat-*``: "Rationale: ...
  / Answer: ..."; ``base.yaml`` ``mr-base-*``: a scaffold that ends in "Answer:") put the
  answer in an ``Answer:`` field that the strategy itself parses (and, with ``snap_quotes``,
  corrects) into the prediction line's ``prediction``: scored with ``parsed``;
* LLM×MapReduce's own prompts (its released outputs, e.g. ``../shared/data/mapreduce_preds``)
  write retrieval answers as plain text, for which its ``process_answer`` keeps the whole reduce
  output: scored with ``mapreduce``, which reproduces the reference's numbers;
* every other strategy's prompts ask for the bare answer: ``none``.

``extract: auto`` (:func:`resolve_extract`) picks by that rule. chunkwise only ever runs its
own prompt sets, so ``auto`` under the mapreduce strategy is ``parsed``; ``mapreduce`` is asked
for by name, for the reference's outputs. (Applied to our chat reduce output, ``mapreduce``
keeps a retrieval task's whole "Rationale: Part 3 ... Answer: 62070", whose first integer is 3.)

* ``none`` — the text as it is.
* ``parsed`` — the strategy's own parsed answer (the prediction line's ``prediction``), with
  ``answer: `` in front for multiple choice and code_debug (as the reference does), so that the
  official prefix rules read a bare option letter. The score is then a function of the
  prediction that the predictions file shows.
* ``mapreduce`` — LLM×MapReduce's own post-processing of a reduce-stage output
  (``LLMxMapReduce_V1/eval/infinitebench/process_answer.py``), step for step, so that a score
  computed here is the number the reference pipeline would print:

  1. the markers ``Answer:`` and then ``答案：`` are tried in that order, each at its *last*
     occurrence;
  2. when nothing follows the marker found, the text is kept whole and the other marker is
     not tried;
  3. what follows the marker, minus one character (the space or newline after the colon), is
     kept — for multiple choice and code_debug with ``"answer: "`` in front (so the official
     prefix rules read it), for QA, dialogue and summary cut before the last ``置信度分数：``
     and then the last ``Confidence Score:``;
  4. every other task (retrieval, math, code_run) keeps the raw text untouched, marker and all.

* ``answer_field`` — our stricter reading of the same protocol (the extractor this project
  shipped as ``mapreduce`` before it matched the reference): only the task's own marker
  (``答案：`` for Chinese QA), the text after its last occurrence for *every* task (also
  retrieval, math and code_run) less one whitespace character right after it (the reference
  drops one character whatever it is: "Answer:62070" would lose its "6"), an empty answer
  when the text ends at the marker.

Extractors that read a strategy's raw output (``reads_raw``) are given the last model call's
text (the runner's ``raw_output``), not the strategy's already parsed answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

_CHOICE = frozenset({"longbook_choice_eng", "code_debug"})
_CONFIDENCE_CUT = frozenset(
    {"longbook_qa_eng", "longbook_qa_chn", "longdialogue_qa_eng", "longbook_sum_eng"}
)
#: the answer markers of the reduce protocol, in the order the reference tries them
ANSWER_MARKERS = ("Answer:", "答案：")
_CONFIDENCE_MARKERS = ("置信度分数：", "Confidence Score:")


def extract_none(task: str, text: str) -> str:
    return text


def extract_mapreduce(task: str, text: str) -> str:
    """The reference's post-processing (see the module docstring), exactly."""
    for marker in ANSWER_MARKERS:
        at = text.rfind(marker)
        if at == -1:
            continue
        start = at + len(marker) + 1
        if len(text) < start:  # the text ends with the marker: kept whole, no other marker
            break
        rest = text[start:]
        if task in _CHOICE:
            return "answer: " + rest
        if task in _CONFIDENCE_CUT:
            for mark in _CONFIDENCE_MARKERS:
                cut = rest.rfind(mark)
                if cut != -1:
                    rest = rest[:cut]
            return rest
        # any other task: the raw text stays as it is; the loop goes on to the next marker,
        # which changes nothing either
    return text


def extract_answer_field(task: str, text: str) -> str:
    """Our stricter extractor (see the module docstring)."""
    if task == "longbook_qa_chn":
        answer_mark, confidence_mark = "答案：", "置信度分数："
    else:
        answer_mark, confidence_mark = "Answer:", "Confidence Score:"
    at = text.rfind(answer_mark)
    if at == -1:
        return text
    out = text[at + len(answer_mark) :]
    if out[:1].isspace():
        out = out[1:]
    if task in _CONFIDENCE_CUT:
        cut = out.rfind(confidence_mark)
        if cut != -1:
            out = out[:cut]
    if task in _CHOICE:
        out = "answer: " + out
    return out


def extract_parsed(task: str, text: str) -> str:
    """The strategy's parsed answer, ``answer: `` in front for multiple choice and
    code_debug (see the module docstring)."""
    if task in _CHOICE and text.strip():
        return "answer: " + text
    return text


@dataclass(frozen=True)
class Extractor:
    name: str
    fn: Callable[[str, str], str]
    #: reads the last model call's raw text rather than the strategy's parsed answer
    reads_raw: bool
    description: str

    def __call__(self, task: str, text: str) -> str:
        return self.fn(task, text)


EXTRACTOR_INFO: dict[str, Extractor] = {
    "none": Extractor("none", extract_none, False, "the strategy's answer as it is"),
    "parsed": Extractor(
        "parsed",
        extract_parsed,
        False,
        "the strategy's parsed answer, 'answer: ' in front for multiple choice and code_debug "
        "(for our MapReduce prompt sets, whose reply has an Answer: field the strategy parses)",
    ),
    "mapreduce": Extractor(
        "mapreduce",
        extract_mapreduce,
        True,
        "LLM×MapReduce's process_answer on the raw reduce output: for the reference's own "
        "outputs (it keeps a retrieval task's raw text, Rationale and all)",
    ),
    "answer_field": Extractor(
        "answer_field",
        extract_answer_field,
        True,
        "the text after the task's last answer marker, for every task (stricter than the "
        "reference)",
    ),
}

#: name -> ``fn(task, text) -> text`` (the registry the scorers and the CLI use)
EXTRACTORS: dict[str, Callable[[str, str], str]] = dict(EXTRACTOR_INFO.items())

#: ``extract: auto`` per strategy: the extractor for the reply format of the strategy's prompt
#: sets (see the module docstring); a strategy not listed is scored on its answer as it is
AUTO_EXTRACT: dict[str, str] = {"mapreduce": "parsed"}


def resolve_extract(extract: str, strategy: str | None) -> str:
    """The extractor ``extract`` names; ``auto`` resolves by the strategy whose prompts wrote
    the output (a line that names no strategy, e.g. a released predictions file: ``none``)."""
    if extract != "auto":
        return extract
    return AUTO_EXTRACT.get(strategy or "", "none")


def reads_raw(extract: str) -> bool:
    info = EXTRACTOR_INFO.get(extract)
    return bool(info and info.reads_raw)


__all__ = [
    "ANSWER_MARKERS",
    "AUTO_EXTRACT",
    "EXTRACTORS",
    "EXTRACTOR_INFO",
    "Extractor",
    "extract_answer_field",
    "extract_mapreduce",
    "extract_none",
    "extract_parsed",
    "reads_raw",
    "resolve_extract",
]
