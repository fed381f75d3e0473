"""InfiniteBench scoring, rule for rule.

Two scorers:

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

Labels are normalised to each task's native type before scoring (the HF ``features=`` cast turns
every answer into ``list[str]``, which the official code does not handle): one-element lists are
unwrapped for single-answer tasks, code_run / math_find / math_calc get ints (or a float for a
fractional math_find answer), multiple choice and code_debug get ``[option_text, letter]``.

Extractors turn raw model output into the text that is scored: ``none`` (identity) and
``mapreduce`` (the LLM×MapReduce reduce-stage protocol: keep what follows the last ``Answer:``).
"""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput

TASKS: tuple[str, ...] = (
    "passkey",
    "number_string",
    "kv_retrieval",
    "longbook_sum_eng",
    "longbook_qa_eng",
    "longbook_qa_chn",
    "longbook_choice_eng",
    "longdialogue_qa_eng",
    "code_debug",
    "code_run",
    "math_find",
    "math_calc",
)

_STRING_ANSWER = {"passkey", "number_string", "kv_retrieval"}
_TEXT_ANSWERS = {"longbook_sum_eng", "longbook_qa_eng", "longbook_qa_chn", "longdialogue_qa_eng"}
_CHOICE = {"longbook_choice_eng", "code_debug"}

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


def _overlap_f1(pred: list[str], gold: list[str]) -> float:
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def _best_f1(pred_tokens: list[str], golds: list[list[str]]) -> float:
    return max((_overlap_f1(pred_tokens, g) for g in golds), default=0.0)


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
    try:
        return float(int(words[-1]) == label)
    except ValueError:
        return 0.0


_FIRST_NUMBER = re.compile(r"\d+\.\d+|\d+")


def off_math_find(pred: str, label: int | float, model_name: str | None = None) -> float:
    m = _FIRST_NUMBER.search(pred)
    if m is None:
        return 0.0
    found = m.group(0)
    if isinstance(label, int):
        # int("12.5") raises in the official code (crashing the run); it cannot equal an int.
        return float("." not in found and int(found) == label)
    return float(float(found) == label)


def off_math_calc(pred: str, label: list[int], model_name: str | None = None) -> float:
    values = [int(run) for run in _DIGIT_RUN.findall(pred)]
    if model_name == "gpt4":  # its prompt makes GPT-4 echo the first operand first
        values = values[1:]
    matched = 0
    for want, got in zip(label, values, strict=False):
        if want != got:
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


# --------------------------------------------------------------------------------------------
# extractors: (task, raw output) -> text to score


def extract_none(task: str, text: str) -> str:
    return text


_CONFIDENCE_CUT = {"longbook_qa_eng", "longbook_qa_chn", "longdialogue_qa_eng", "longbook_sum_eng"}


def extract_mapreduce(task: str, text: str) -> str:
    """LLM×MapReduce's post-processing of a reduce-stage answer.

    When the answer marker occurs, keep what follows its last occurrence minus one character
    (the space or newline after the colon); then, for QA, dialogue and summary, cut at the last
    confidence marker; for multiple choice and code_debug, prefix ``"answer: "`` so the prefix
    rules see it. Text without the marker is kept whole. Chinese QA uses ``答案：`` and
    ``置信度分数：``.
    """
    if task == "longbook_qa_chn":
        answer_mark, confidence_mark = "答案：", "置信度分数："
    else:
        answer_mark, confidence_mark = "Answer:", "Confidence Score:"
    at = text.rfind(answer_mark)
    if at == -1:
        return text
    out = text[at + len(answer_mark) + 1 :]
    if task in _CONFIDENCE_CUT:
        cut = out.rfind(confidence_mark)
        if cut != -1:
            out = out[:cut]
    if task in _CHOICE:
        out = "answer: " + out
    return out


EXTRACTORS: dict[str, Callable[[str, str], str]] = {
    "none": extract_none,
    "mapreduce": extract_mapreduce,
}


# --------------------------------------------------------------------------------------------
# label normalisation


def _check_task(task: str) -> None:
    if task not in OFFICIAL:
        raise BadInput(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}")


def _single(task: str, label: Any) -> Any:
    if isinstance(label, list):
        if len(label) != 1:
            raise BadInput(f"{task}: expected one answer, got a list of {len(label)}")
        return label[0]
    return label


def _as_int(task: str, value: Any) -> int:
    if isinstance(value, bool):
        raise BadInput(f"{task}: answer {value!r} is not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise BadInput(f"{task}: answer {value!r} is not an integer")


def _as_number(task: str, value: Any) -> int | float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise BadInput(f"{task}: answer {value!r} is not a finite number")
        return value
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"[+-]?\d+", s):
            return int(s)
        try:
            f = float(s)
        except ValueError:
            pass
        else:
            if math.isfinite(f):
                return f
    raise BadInput(f"{task}: answer {value!r} is not a number")


def _as_text(task: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise BadInput(f"{task}: answer {value!r} is not a string")


def _letters_for(task: str) -> str:
    return "ABCD" if task == "longbook_choice_eng" else "ABCDEFGHIJ"


def normalize_label(task: str, label: Any, options: list[str] | None = None) -> Any:
    """Bring a gold answer to the type the task's rule compares against.

    ``options`` (the record's options) turn a bare option text into ``[text, letter]`` for
    multiple choice and code_debug.
    """
    _check_task(task)
    if task in _STRING_ANSWER:
        return _as_text(task, _single(task, label))
    if task == "code_run":
        return _as_int(task, _single(task, label))
    if task == "math_find":
        return _as_number(task, _single(task, label))
    if task == "math_calc":
        if isinstance(label, list) and len(label) == 1 and isinstance(label[0], list):
            label = label[0]
        if not isinstance(label, list) or not label:
            raise BadInput(f"{task}: answer must be a non-empty list of intermediate values")
        return [_as_int(task, v) for v in label]
    if task in _TEXT_ANSWERS:
        items = label if isinstance(label, list) else [label]
        if not items:
            raise BadInput(f"{task}: answer list is empty")
        return [_as_text(task, v) for v in items]
    # multiple choice / code_debug: [option text, letter]
    letters = _letters_for(task)
    if (
        isinstance(label, list)
        and len(label) == 2
        and all(isinstance(v, str) for v in label)
        and len(label[1]) == 1
        and label[1] in letters
    ):
        return list(label)
    text = _single(task, label)
    if options and isinstance(text, str) and text in options:
        idx = options.index(text)
        if idx < len(letters):
            return [text, letters[idx]]
    raise BadInput(
        f"{task}: answer {label!r} must be [option text, letter] (or an option text "
        "together with the record's options)"
    )


# --------------------------------------------------------------------------------------------
# public API


def _check_scorer(scorer: str) -> dict[str, Rule]:
    rules = SCORERS.get(scorer)
    if rules is None:
        raise BadInput(f"unknown scorer {scorer!r}; valid scorers: {', '.join(SCORERS)}")
    return rules


def _check_extractor(extract: str) -> Callable[[str, str], str]:
    fn = EXTRACTORS.get(extract)
    if fn is None:
        raise BadInput(f"unknown extractor {extract!r}; valid extractors: {', '.join(EXTRACTORS)}")
    return fn


def score_one(
    task: str,
    prediction: str,
    label: Any,
    scorer: str = "official",
    *,
    model_name: str | None = None,
    options: list[str] | None = None,
) -> float:
    """Score one prediction in [0, 1]. ``model_name="gpt4"`` turns on math_calc's drop of the
    first number (the official scorer does that for GPT-4 only)."""
    rules = _check_scorer(scorer)
    gold = normalize_label(task, label, options)
    if not isinstance(prediction, str):
        raise BadInput(f"prediction must be a string, got {type(prediction).__name__}")
    return float(rules[task](prediction, gold, model_name))


def _read_lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8-sig") as f:  # tolerate a byte order mark
            yield from enumerate(f, start=1)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a folder, expected a JSONL predictions file") from None
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text ({e.reason})") from None


def _field(record: dict, names: tuple[str, ...]) -> Any:
    for name in names:
        if name in record:
            return record[name]
    raise KeyError(" or ".join(repr(n) for n in names))


def score_predictions_file(
    task: str,
    path: str | Path,
    scorer: str = "official",
    extract: str = "none",
    skip_bad_lines: bool = False,
    *,
    model_name: str | None = None,
) -> dict[str, Any]:
    """Score a predictions JSONL file (lines ``{"id", "prediction"|"pred",
    "ground_truth"|"label"[, "options"]}``; blank lines are ignored).

    Returns ``{"task", "scorer", "score" (percent), "n", "skipped"}``. A malformed line raises
    :class:`BadInput` naming ``file:line`` unless ``skip_bad_lines``, which counts it instead.
    """
    _check_task(task)
    rules = _check_scorer(scorer)
    extractor = _check_extractor(extract)
    path = Path(path)
    total = 0.0
    n = 0
    skipped = 0
    for lineno, line in _read_lines(path):
        if not line.strip():
            continue
        try:
            record = _parse_line(line)
        except BadInput as e:
            if skip_bad_lines:
                skipped += 1
                continue
            raise _line_error(path, lineno, None, e) from None
        try:
            pred, gold = _prediction_and_gold(task, record)
            total += float(rules[task](extractor(task, pred), gold, model_name))
        except BadInput as e:
            if skip_bad_lines:
                skipped += 1
                continue
            raise _line_error(path, lineno, record.get("id"), e) from None
        n += 1
    if n == 0:
        extra = f" ({skipped} bad lines skipped)" if skipped else ""
        raise BadInput(f"{path}: no scorable predictions{extra}")
    return {"task": task, "scorer": scorer, "score": 100.0 * total / n, "n": n, "skipped": skipped}


def _parse_line(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise BadInput(f"not valid JSON ({e.msg})") from None
    if not isinstance(record, dict):
        raise BadInput("expected a JSON object")
    return record


def _prediction_and_gold(task: str, record: dict[str, Any]) -> tuple[str, Any]:
    try:
        pred = _field(record, ("prediction", "pred"))
        label = _field(record, ("ground_truth", "label"))
    except KeyError as e:
        raise BadInput(f"missing field {e.args[0]}") from None
    if isinstance(pred, (int, float)) and not isinstance(pred, bool):
        pred = str(pred)
    if not isinstance(pred, str):
        raise BadInput(f"prediction must be a string, got {type(pred).__name__}")
    options = record.get("options")
    gold = normalize_label(task, label, options if isinstance(options, list) else None)
    return pred, gold


def _line_error(path: Path, lineno: int, rid: Any, err: BadInput) -> BadInput:
    where = f"{path}:{lineno}" + (f" (id {rid})" if rid is not None else "")
    return BadInput(f"{where}: {err} (fix the line, or pass --skip-bad-lines to skip it)")
