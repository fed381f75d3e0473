"""InfiniteBench's scoring rules, rule for rule: (prediction, normalised label, model) -> score.

* ``official`` — InfiniteBench's ``src/compute_scores.py`` (HEAD ``88b3daa``), each task's rule
  reproduced exactly, including its quirks (the first digit run for passkey; the *first*
  character decides multiple choice; a bare letter scores 0 on code_debug; only the first gold
  name counts in dialogue; math_calc drops GPT-4's first number).
* ``lenient`` — the variant LLM×MapReduce ships (``LLMxMapReduce_V1/eval/infinitebench``):
  passkey / number_string accept any digit run equal to the answer; multiple choice and
  code_debug first try the last standalone option letter (of the first line that has one — the
  regex it uses does not cross newlines), and multiple choice also knows the ``Answer:`` prefix;
  code_debug also accepts an answer that starts with the letter or function name; dialogue
  accepts any gold name as a case-insensitive substring. Every other task is scored as official.

Where the official code calls ``int()`` on the answer (code_run, math_find, math_calc), the
rules compare canonical decimal text instead (:mod:`.numbers`): the same verdicts, and no
crash on a digit run past Python's 4,300-digit ``int()`` limit.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from chunkwise.benchmarks.infinitebench.numbers import decimal, int_text
from chunkwise.benchmarks.qa_metrics import overlap_f1

# --------------------------------------------------------------------------------------------
# small text helpers


def _blank_out(text: str, chars: tuple[str, ...]) -> str:
    """Replace every listed character (or string) with one space, in order."""
    for c in chars:
        text = text.replace(c, " ")
    return text


def _squeeze_spaces(text: str) -> str:
    """Collapse runs of plain spaces (only ' ', like the official loop) into one."""
    return re.sub(r" {2,}", " ", text)


_RETRIEVAL_MARKS = ("\n", ":", '"', "'", ".", ",", "?", "!", "{", "}")
_CHOICE_MARKS = ("\n", '"', "'", ".", ",", "?", "!", "{", "}")
_DEBUG_MARKS = ("\n", "`", "'", '"', "-", "*", "Option", "option")
_RUN_MARKS = ("\n", ".", "`", "'", '"', ":")
_DIGIT_RUN = re.compile(r"[0-9]+")

# Chinese and full-width punctuation removed by the Zh.QA normaliser (with ASCII punctuation).
_ZH_PUNCT = (
    "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》「」『』"
    "【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏."
)
_EN_DROP = frozenset(string.punctuation)
_ZH_DROP = frozenset(string.punctuation + _ZH_PUNCT)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _en_tokens(text: str) -> list[str]:
    text = "".join(ch for ch in text.lower() if ch not in _EN_DROP)
    return _ARTICLES.sub(" ", text).split()


def _zh_chars(text: str) -> list[str]:
    kept = "".join(ch for ch in text.lower() if ch not in _ZH_DROP)
    return [ch for ch in kept if not ch.isspace()]


def _best_f1(pred_tokens: list[str], golds: list[list[str]]) -> float:
    return max((overlap_f1(pred_tokens, g) for g in golds), default=0.0)


@lru_cache(maxsize=1)
def _rouge_lsum():
    try:
        from rouge_score import rouge_scorer
    except ImportError:  # pragma: no cover - rouge-score is in the eval extra
        from chunkwise.errors import MissingDependency

        raise MissingDependency(
            "rouge-score (needed for longbook_sum_eng)", "pip install rouge-score"
        ) from None
    return rouge_scorer.RougeScorer(["rougeLsum"], use_stemmer=False)


def _first_standalone_line_letter(text: str, letters: str) -> str | None:
    """The last standalone letter of the first line that has one (LLM×MapReduce's regex
    ``\\b[X-Y]\\b(?!.*\\b[X-Y]\\b)`` searched without DOTALL)."""
    pattern = re.compile(rf"\b[{letters}]\b")
    for line in text.split("\n"):
        found = pattern.findall(line)
        if found:
            return found[-1]
    return None


def _after_prefix(text: str, prefixes: tuple[str, ...]) -> tuple[bool, str | None]:
    """Find the first listed prefix that occurs (tried in list order). Returns (found, rest):
    rest is the text after the prefix and one more character, or None when the text ends
    before that (the official rules then score 0)."""
    for prefix in prefixes:
        idx = text.find(prefix)
        if idx == -1:
            continue
        start = idx + len(prefix) + 1
        return True, (text[start:] if len(text) >= start else None)
    return False, None


# --------------------------------------------------------------------------------------------
# official rules: (prediction, normalised label, model_name) -> score


def _first_digit_run(pred: str) -> str:
    m = _DIGIT_RUN.search(pred)
    return m.group(0) if m else ""


def off_passkey(pred: str, label: str, model_name: str | None = None) -> float:
    return float(label == _first_digit_run(pred))


def off_kv_retrieval(pred: str, label: str, model_name: str | None = None) -> float:
    return float(label in _blank_out(pred, _RETRIEVAL_MARKS).split())


def off_qa_eng(pred: str, label: list[str], model_name: str | None = None) -> float:
    return _best_f1(_en_tokens(pred), [_en_tokens(g) for g in label])


def off_qa_chn(pred: str, label: list[str], model_name: str | None = None) -> float:
    return _best_f1(_zh_chars(pred), [_zh_chars(g) for g in label])


def off_sum(pred: str, label: list[str], model_name: str | None = None) -> float:
    # HF evaluate's rouge with use_aggregator=False and list references = score_multi's F.
    return float(_rouge_lsum().score_multi(label, pred)["rougeLsum"].fmeasure)


def _choice_rules(pred: str, label: list[str], prefixes: tuple[str, ...]) -> float:
    if pred == "":
        return 0.0
    if pred[0] in "ABCD":
        return float(pred[0] in label)
    if pred in label:
        return 1.0
    text = _squeeze_spaces(_blank_out(pred, _CHOICE_MARKS))
    found, after = _after_prefix(text, prefixes)
    if found:
        return float(after is not None and any(after.startswith(s) for s in label))
    for word in text.split():
        # the official test is a substring test against "ABCD" ("AB" passes, then fails below)
        if word in "ABCD":
            return float(word in label)
    return 0.0


_OFF_CHOICE_PREFIXES = ("answer is:", "answer:", "answer is", "option is")


def off_choice(pred: str, label: list[str], model_name: str | None = None) -> float:
    return _choice_rules(pred.strip(), label, _OFF_CHOICE_PREFIXES)


_OFF_DEBUG_PREFIXES = ("answer is:", "is:", "answer:", "correct option is:")


def off_code_debug(pred: str, label: list[str], model_name: str | None = None) -> float:
    fn_name, letter = label[0], label[1]
    pred = pred.strip()
    if pred[:2] in (f"{letter}.", f"{letter}:"):
        return 1.0
    text = _squeeze_spaces(_blank_out(pred, _DEBUG_MARKS))
    _, after = _after_prefix(text, _OFF_DEBUG_PREFIXES)
    if after is None:
        return 0.0
    return float(after.startswith(letter) or after.startswith(fn_name))


def off_code_run(pred: str, label: int, model_name: str | None = None) -> float:
    words = _blank_out(pred.strip(), _RUN_MARKS).split()
    if not words:
        return 0.0
    # int(words[-1]) == label, without int()'s 4,300-digit limit (a non-number scores 0)
    return float(int_text(words[-1]) == decimal(label))


_FIRST_NUMBER = re.compile(r"\d+\.\d+|\d+")


def off_math_find(pred: str, label: int | float, model_name: str | None = None) -> float:
    m = _FIRST_NUMBER.search(pred)
    if m is None:
        return 0.0
    found = m.group(0)
    if isinstance(label, int):
        # int("12.5") raises in the official code (crashing the run); it cannot equal an int.
        # The digits are compared as text: int() of a long run would raise too.
        return float("." not in found and int_text(found) == decimal(label))
    return float(float(found) == label)  # float() takes text of any length


def off_math_calc(pred: str, label: list[int], model_name: str | None = None) -> float:
    # the official int(run) of every digit run, as canonical text (any length)
    values = [run.lstrip("0") or "0" for run in _DIGIT_RUN.findall(pred)]
    if model_name == "gpt4":  # its prompt makes GPT-4 echo the first operand first
        values = values[1:]
    matched = 0
    for want, got in zip(label, values, strict=False):
        if decimal(want) != got:
            break
        matched += 1
    return matched / len(label)


def off_dialogue(pred: str, label: list[str], model_name: str | None = None) -> float:
    words = [w.upper() for w in _blank_out(pred.strip(), _RETRIEVAL_MARKS).split()]
    return float(label[0] in words)


# --------------------------------------------------------------------------------------------
# lenient rules (LLM×MapReduce); tasks not listed here use the official rule


def len_passkey(pred: str, label: str, model_name: str | None = None) -> float:
    return float(label in _DIGIT_RUN.findall(pred))


_LEN_CHOICE_PREFIXES = ("Answer:", *_OFF_CHOICE_PREFIXES)


def len_choice(pred: str, label: list[str], model_name: str | None = None) -> float:
    pred = pred.strip()
    letter = _first_standalone_line_letter(pred, "A-D")
    if letter is not None and letter in label:
        return 1.0
    return _choice_rules(pred, label, _LEN_CHOICE_PREFIXES)


_LEN_DEBUG_PREFIXES = ("answer is:", "Answer:", "is:", "answer:")


def len_code_debug(pred: str, label: list[str], model_name: str | None = None) -> float:
    fn_name, letter = label[0], label[1]
    pred = pred.strip()
    if _first_standalone_line_letter(pred, "A-J") == letter:
        return 1.0
    text = _squeeze_spaces(_blank_out(pred, _DEBUG_MARKS))
    if text.startswith(letter) or text.startswith(fn_name):
        return 1.0
    _, after = _after_prefix(text, _LEN_DEBUG_PREFIXES)
    if after is None:
        return 0.0
    return float(after.startswith(letter) or after.startswith(fn_name))


def len_dialogue(pred: str, label: list[str], model_name: str | None = None) -> float:
    text = pred.strip().upper()
    return float(any(name.upper() in text for name in label))


Rule = Callable[[str, Any, "str | None"], float]

OFFICIAL: dict[str, Rule] = {
    "passkey": off_passkey,
    "number_string": off_passkey,
    "kv_retrieval": off_kv_retrieval,
    "longbook_sum_eng": off_sum,
    "longbook_qa_eng": off_qa_eng,
    "longbook_qa_chn": off_qa_chn,
    "longbook_choice_eng": off_choice,
    "longdialogue_qa_eng": off_dialogue,
    "code_debug": off_code_debug,
    "code_run": off_code_run,
    "math_find": off_math_find,
    "math_calc": off_math_calc,
}

LENIENT: dict[str, Rule] = {
    **OFFICIAL,
    "passkey": len_passkey,
    "number_string": len_passkey,
    "longbook_choice_eng": len_choice,
    "longdialogue_qa_eng": len_dialogue,
    "code_debug": len_code_debug,
}

SCORERS: dict[str, dict[str, Rule]] = {"official": OFFICIAL, "lenient": LENIENT}


__all__ = ["LENIENT", "OFFICIAL", "SCORERS", "Rule"]
