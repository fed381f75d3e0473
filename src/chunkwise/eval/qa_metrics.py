"""QASPER, QuALITY and NarrativeQA scoring, offline.

QASPER (the official evaluator's rules)
    Each annotation is one reference: unanswerable → "Unanswerable" (type ``none``);
    extractive spans → the spans joined by ", " (``extractive``); else the free-form answer
    (``abstractive``); else "Yes" / "No" (``boolean``). Answer F1 is SQuAD's token F1 after
    normalisation (lower case, no punctuation, no a/an/the, single spaces), the max over a
    question's references (ties keep the first reference), averaged over questions; a
    missing prediction scores 0. "By type" buckets each question under the type of its
    best-matching reference (questions without a prediction are left out of the buckets).

QuALITY
    Accuracy of the chosen option, and the same on the HARD subset (``difficult == 1``).
    :func:`extract_choice` reads a letter or an option's text out of free model output.

NarrativeQA (AllenNLP's script, with offline stand-ins)
    Each metric is the max over the references, averaged over questions. BLEU-1 and BLEU-4
    are nltk's ``sentence_bleu`` with weights (1,0,0,0) and (0,0,0,1), unsmoothed, on
    Treebank word tokens (``word_tokenize`` would need the punkt download; the Treebank
    tokenizer is what it applies after sentence splitting, and answers are short).
    ``bleu4_style="raptor"`` gives RAPTOR's variant (uniform weights, smoothing).
    METEOR is nltk's ``meteor_score`` on whitespace tokens with WordNet from local files
    (see :func:`wordnet_corpus`; never downloaded). ROUGE-L is rouge-score's ``rougeL``
    F-measure with the Porter stemmer on the first 100 words of the prediction (AllenNLP
    uses py-rouge, which needs punkt offline; both score the LCS F1 over lower-cased
    alphanumeric tokens). Scores are not rounded per question (the AllenNLP script rounds
    each to 2 decimals).

WordNet for METEOR: Debian's ``wordnet-base`` and ``wordnet-sense-index`` packages put the
WordNet 3.0 database in ``/usr/share/wordnet``. nltk refuses files reached through links, so
:func:`install_wordnet` copies the files into an nltk data folder and writes the
``lexnames`` file the Debian packages lack::

    apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index
    python -m chunkwise.eval.qa_metrics install-wordnet      # into <venv>/nltk_data

When no installed corpus is found at run time, the same copy is made on first use into
``$CHUNKWISE_CACHE`` (default ``~/.cache/chunkwise``)/nltk_data, from local files only.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import string
import sys
import threading
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput, MissingDependency

# --------------------------------------------------------------------------------------------
# shared text helpers

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower case, punctuation removed, articles removed, whitespace collapsed (SQuAD)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 on normalised text (0 when nothing is shared, empty text included)."""
    pred = normalize_answer(prediction).split()
    gold = normalize_answer(reference).split()
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


# --------------------------------------------------------------------------------------------
# QASPER

QASPER_TYPES = ("extractive", "abstractive", "boolean", "none")


def qasper_reference(annotation: Mapping[str, Any]) -> dict[str, Any]:
    """One annotation (``answer`` dict of the official files) as ``{answer, type, evidence}``."""
    a = annotation.get("answer", annotation)
    evidence = [e for e in (a.get("evidence") or []) if isinstance(e, str)]
    if a.get("unanswerable"):
        return {"answer": "Unanswerable", "type": "none", "evidence": []}
    spans = [s for s in (a.get("extractive_spans") or []) if isinstance(s, str)]
    if spans:
        return {"answer": ", ".join(spans), "type": "extractive", "evidence": evidence}
    if a.get("free_form_answer"):
        return {"answer": a["free_form_answer"], "type": "abstractive", "evidence": evidence}
    if a.get("yes_no"):
        return {"answer": "Yes", "type": "boolean", "evidence": evidence}
    if a.get("yes_no") is not None:
        return {"answer": "No", "type": "boolean", "evidence": evidence}
    raise BadInput(f"QASPER annotation without an answer: {dict(a)!r}")


def as_references(gold: Any) -> list[dict[str, Any]]:
    """Gold answers as reference dicts: reference dicts pass through; plain strings get a
    type inferred from their text (``none`` / ``boolean`` / ``abstractive``)."""
    items = gold if isinstance(gold, list) else [gold]
    refs = []
    for g in items:
        if isinstance(g, Mapping) and "answer" in g and "type" in g:
            refs.append(dict(g))
        elif isinstance(g, Mapping):
            refs.append(qasper_reference(g))
        elif isinstance(g, str):
            low = normalize_answer(g)
            kind = (
                "none"
                if low == "unanswerable"
                else ("boolean" if low in ("yes", "no") else "abstractive")
            )
            refs.append({"answer": g, "type": kind, "evidence": []})
        else:
            raise BadInput(f"QASPER reference {g!r} is neither a string nor an annotation")
    if not refs:
        raise BadInput("QASPER question without references")
    return refs


def qasper_answer_f1(prediction: str, references: Any) -> tuple[float, str]:
    """(max token F1 over the references, type of the best reference; first wins ties)."""
    best, kind = -1.0, "none"
    for ref in as_references(references):
        f = token_f1(prediction, ref["answer"])
        if f > best:
            best, kind = f, ref["type"]
    return best, kind


def paragraph_f1(predicted: Sequence[str], gold: Sequence[str]) -> float:
    """Evidence F1 over sets of paragraphs (both empty: 1)."""
    if not gold:
        return 1.0 if not predicted else 0.0
    same = len(set(predicted) & set(gold))
    if same == 0:
        return 0.0
    p, r = same / len(set(predicted)), same / len(set(gold))
    return 2 * p * r / (p + r)


def qasper_evaluate(
    gold: Mapping[str, Any],
    predictions: Mapping[str, str],
    evidence: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Answer F1 (and Evidence F1 when ``evidence`` is given) over ``gold`` question ids."""
    answer, by_type = [], defaultdict(list)
    ev_scores = []
    missing = 0
    for qid, refs in gold.items():
        refs = as_references(refs)
        if qid not in predictions:
            missing += 1
            answer.append(0.0)
            ev_scores.append(0.0)
            continue
        f, kind = qasper_answer_f1(predictions[qid], refs)
        answer.append(f)
        by_type[kind].append(f)
        if evidence is not None:
            got = list(evidence.get(qid, []))
            ev_scores.append(max(paragraph_f1(got, r.get("evidence", [])) for r in refs))

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    out: dict[str, Any] = {
        "answer_f1": mean(answer),
        "answer_f1_by_type": {k: mean(v) for k, v in by_type.items()},
        "questions_by_type": {k: len(v) for k, v in by_type.items()},
        "missing_predictions": missing,
        "n": len(answer),
    }
    if evidence is not None:
        out["evidence_f1"] = mean(ev_scores)
    return out


# --------------------------------------------------------------------------------------------
# QuALITY

LETTERS = "ABCD"
# a reply that is only a letter, or starts with "(B)" / "B." / "B:" / "B)"
_LEAD_LETTER = re.compile(r"^\W*(?:([A-D])\W*$|\(([A-D])\)|([A-D])[.:)\]])")
_SAID_LETTER = re.compile(
    r"(?:answer|option|choice)\s*(?:is|:)?\s*:?\s*\(?([A-D])\)?(?![A-Za-z])", re.I
)
_PAREN_LETTER = re.compile(r"\(([A-D])\)")
_BARE_LETTER = re.compile(r"(?<![A-Za-z'])([B-D])(?![A-Za-z'])")


def extract_choice(prediction: str, options: Sequence[str] = ()) -> str | None:
    """The option letter a free-form reply picks, or None.

    In order: a letter leading the reply ("B", "(B) ...", "B."), a letter after "answer is"
    / "option", a letter in parentheses, the option whose text the reply contains (or
    matches with token F1 >= 0.5, the best one), a lone capital B-D ("A" is too often an
    article to count on its own).
    """
    text = prediction.strip()
    if not text:
        return None
    for rx in (_LEAD_LETTER, _SAID_LETTER, _PAREN_LETTER):
        m = rx.search(text)
        if m:
            return next(g for g in m.groups() if g).upper()
    if options:
        norm = normalize_answer(text)
        contained = [
            i for i, o in enumerate(options) if normalize_answer(o) and normalize_answer(o) in norm
        ]
        if len(contained) == 1:
            return LETTERS[contained[0]]
        scores = [token_f1(text, o) for o in options]
        best = max(range(len(scores)), key=scores.__getitem__)
        if scores[best] >= 0.5:
            return LETTERS[best]
    m = _BARE_LETTER.search(text)
    return m.group(1) if m else None


def quality_correct(prediction: str, gold_letter: str, options: Sequence[str] = ()) -> float:
    return float(extract_choice(prediction, options) == gold_letter.strip().upper())


def quality_accuracy(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``records``: ``{prediction, answer (letter), options?, difficult?}``. Returns accuracy
    and hard-subset accuracy (None when no record says it is hard)."""
    n = correct = n_hard = hard = 0
    for r in records:
        ok = quality_correct(r["prediction"], r["answer"], r.get("options") or ())
        n += 1
        correct += int(ok)
        if r.get("difficult"):
            n_hard += 1
            hard += int(ok)
    return {
        "accuracy": correct / n if n else 0.0,
        "hard_accuracy": hard / n_hard if n_hard else None,
        "n": n,
        "n_hard": n_hard,
    }


# --------------------------------------------------------------------------------------------
# NarrativeQA


@cache
def _treebank():
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def word_tokens(text: str) -> list[str]:
    return _treebank().tokenize(text)


def bleu(prediction: str, reference: str, n: int, style: str = "allennlp") -> float:
    """BLEU-1 or BLEU-4 of one prediction against one reference (see the module notes)."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    hyp, ref = word_tokens(prediction), word_tokens(reference)
    if not hyp or not ref:
        return 0.0
    if n == 1:
        weights: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0)
        smooth = None
    elif n == 4 and style == "allennlp":
        weights, smooth = (0.0, 0.0, 0.0, 1.0), None
    elif n == 4 and style == "raptor":
        weights, smooth = (0.25, 0.25, 0.25, 0.25), SmoothingFunction().method1
    else:
        raise BadInput(f"BLEU-{n} style {style!r}: valid n 1 or 4, styles allennlp or raptor")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nltk warns whenever an n-gram order has no overlap
        value = float(sentence_bleu([ref], hyp, weights=weights, smoothing_function=smooth))
    # unsmoothed, nltk returns the smallest float (not 0) when an order has no match
    return value if value > 1e-12 else 0.0


@cache
def _rouge_l():
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        raise MissingDependency(
            "rouge-score (NarrativeQA ROUGE-L)", "pip install rouge-score"
        ) from None
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, reference: str, limit_words: int = 100) -> float:
    words = prediction.split()
    if limit_words and len(words) > limit_words:
        prediction = " ".join(words[:limit_words])
    return float(_rouge_l().score(reference, prediction)["rougeL"].fmeasure)


def meteor(prediction: str, reference: str) -> float:
    from nltk.translate.meteor_score import meteor_score

    hyp, ref = prediction.split(), reference.split()
    if not hyp or not ref:
        return 0.0
    return float(meteor_score([ref], hyp, wordnet=wordnet_corpus()))


NARRATIVEQA_METRICS = ("rouge_l", "bleu1", "bleu4", "meteor")


def narrativeqa_scores(
    prediction: str,
    references: Sequence[str],
    metrics: Sequence[str] = NARRATIVEQA_METRICS,
    bleu4_style: str = "allennlp",
) -> dict[str, float]:
    """Each metric's max over the references for one prediction."""
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise BadInput("NarrativeQA question without references")
    fns = {
        "rouge_l": lambda r: rouge_l(prediction, r),
        "bleu1": lambda r: bleu(prediction, r, 1),
        "bleu4": lambda r: bleu(prediction, r, 4, bleu4_style),
        "meteor": lambda r: meteor(prediction, r),
    }
    out = {}
    for m in metrics:
        if m not in fns:
            raise BadInput(f"unknown NarrativeQA metric {m!r}; valid: {', '.join(fns)}")
        out[m] = max(fns[m](r) for r in refs)
    return out


def narrativeqa_evaluate(
    pairs: Iterable[tuple[str, Sequence[str]]],
    metrics: Sequence[str] = NARRATIVEQA_METRICS,
    bleu4_style: str = "allennlp",
) -> dict[str, float]:
    """Mean of each metric over ``(prediction, references)`` pairs."""
    sums: dict[str, float] = dict.fromkeys(metrics, 0.0)
    n = 0
    for pred, refs in pairs:
        for k, v in narrativeqa_scores(pred, refs, metrics, bleu4_style).items():
            sums[k] += v
        n += 1
    out = {k: (v / n if n else 0.0) for k, v in sums.items()}
    out["n"] = n
    return out


# --------------------------------------------------------------------------------------------
# WordNet from local files

DEBIAN_WORDNET = Path("/usr/share/wordnet")
#: WordNet 3.0's lexicographer files: number, name (category from the name's prefix)
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_NEEDED = ("data.noun", "index.noun", "index.sense", "noun.exc", "lexnames")
_WN_LOCK = threading.Lock()


def lexnames_text() -> str:
    return "".join(
        f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES)
    )


def _complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in _NEEDED)


def install_wordnet(dest: str | Path | None = None, source: str | Path | None = None) -> Path:
    """Copy a local WordNet 3.0 database (default: Debian's, ``$WNSEARCHDIR`` or
    /usr/share/wordnet) into ``<dest>/corpora/wordnet`` with a ``lexnames`` file, where nltk
    reads it. ``dest`` defaults to ``<sys.prefix>/nltk_data`` (on nltk's search path).
    Returns the corpus folder."""
    src = Path(source or os.environ.get("WNSEARCHDIR") or DEBIAN_WORDNET)
    if not (src / "data.noun").is_file() or not (src / "index.sense").is_file():
        raise MissingDependency(
            f"a WordNet 3.0 database (none in {src})",
            "apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index",
        )
    root = Path(dest) if dest else Path(sys.prefix) / "nltk_data"
    target = root / "corpora" / "wordnet"
    target.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and not f.name.startswith("."):
            # real copies: nltk refuses symlinks and hard links out of its data roots
            shutil.copyfile(f, target / f.name)
    if not (target / "lexnames").is_file():
        (target / "lexnames").write_text(lexnames_text(), encoding="utf-8")
    return target


def _cache_root() -> Path:
    return (
        Path(os.environ.get("CHUNKWISE_CACHE", Path.home() / ".cache" / "chunkwise")) / "nltk_data"
    )


@cache
def _load_wordnet(root: str):
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    if root not in nltk.data.path:
        nltk.data.path.append(root)  # nltk only reads corpora under its data roots
    folder = nltk.data.FileSystemPathPointer(str(Path(root) / "corpora" / "wordnet"))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*multilingual.*")
        return WordNetCorpusReader(folder, None)


def wordnet_corpus():
    """nltk's WordNet reader over local files; copies Debian's database into a cache on first
    use when nltk has none. Raises :class:`MissingDependency` naming the install step."""
    import nltk

    with _WN_LOCK:
        for root in [*nltk.data.path, str(_cache_root())]:
            if _complete(Path(root) / "corpora" / "wordnet"):
                return _load_wordnet(str(root))
        install_wordnet(_cache_root())
        return _load_wordnet(str(_cache_root()))


def _main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chunkwise.eval.qa_metrics")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("install-wordnet", help="copy local WordNet files where nltk finds them")
    p.add_argument("--dest", default=None, help="nltk data root (default <sys.prefix>/nltk_data)")
    p.add_argument("--source", default=None, help="WordNet dict folder (default Debian's)")
    args = ap.parse_args(argv)
    try:
        folder = install_wordnet(args.dest, args.source)
    except MissingDependency as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(folder)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main())


__all__ = [
    "NARRATIVEQA_METRICS",
    "QASPER_TYPES",
    "as_references",
    "bleu",
    "extract_choice",
    "install_wordnet",
    "meteor",
    "narrativeqa_evaluate",
    "narrativeqa_scores",
    "normalize_answer",
    "paragraph_f1",
    "qasper_answer_f1",
    "qasper_evaluate",
    "qasper_reference",
    "quality_accuracy",
    "quality_correct",
    "rouge_l",
    "token_f1",
    "wordnet_corpus",
]
