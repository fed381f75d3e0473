"""QASPER and the L-Eval long-document subsets as registered benchmarks.

* ``leval`` — tasks ``quality`` (accuracy), ``scientific_qa`` (QASPER answer F1) and
  ``narrative_qa`` (ROUGE-L by default; ``--scorer`` bleu1 | bleu4 | meteor | rouge_l).
  ``--data``: a folder of L-Eval files (default ``../shared/data/leval``).
* ``qasper`` — task ``qasper`` (answer F1 over the official references). ``--data``: the
  official JSON file, a folder holding it, or ``hub:REPO@REVISION[:SPLIT]``.
* ``quality`` — tasks ``quality`` (accuracy) and ``quality_hard`` (accuracy on the HARD
  subset). ``--data``: the official ``QuALITY.v1.0.1.htmlstripped.dev`` or its folder.

Importing this module registers all three. Full-story NarrativeQA is the ``narrativeqa``
benchmark (:mod:`chunkwise.eval.longqa_benchmarks`); its BLEU / METEOR scores come from
:func:`chunkwise.eval.qa_metrics.narrativeqa_scores`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.eval import qa_metrics as qm
from chunkwise.eval.benchmarks import Benchmark, register_benchmark

PROMPT_VERSION = "qa-1"
LEVAL_TASKS = ("quality", "scientific_qa", "narrative_qa")
NQA_SCORERS = ("rouge_l", "bleu1", "bleu4", "meteor")
DEFAULT_LEVAL = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "leval"


@dataclass
class TaskData:
    task: str
    examples: list[dict[str, Any]]
    source: dict[str, Any] = field(default_factory=dict)
    total: int = 0


def score_answer(task: str, prediction: str, ground_truth: Any, scorer: str = "official") -> float:
    """One prediction's score in [0, 1] for a task of either benchmark.

    ``scorer`` picks the NarrativeQA metric (``official`` = ROUGE-L); QuALITY and QASPER have
    one metric each and ignore it.
    """
    if task in ("quality", "quality_hard"):
        if not isinstance(ground_truth, dict) or "letter" not in ground_truth:
            raise BadInput(f"quality: ground truth {ground_truth!r} has no option letter")
        return qm.quality_correct(
            prediction, ground_truth["letter"], ground_truth.get("options") or ()
        )
    if task in ("scientific_qa", "qasper"):
        return qm.qasper_answer_f1(prediction, ground_truth)[0]
    if task == "narrative_qa":
        metric = "rouge_l" if scorer == "official" else scorer
        refs = ground_truth if isinstance(ground_truth, list) else [ground_truth]
        return qm.narrativeqa_scores(prediction, refs, [metric])[metric]
    raise BadInput(f"unknown task {task!r}")


def build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    from chunkwise.strategies import Query

    if kind not in ("chat", "base"):
        raise BadInput(f"prompt kind must be chat or base, got {kind!r}")
    question = (example.get("input") or "").strip()
    if task in ("quality", "quality_hard"):
        return Query(question, task="multiple_choice", options=tuple(example["options"]))
    return Query(question, task="qa")


# --------------------------------------------------------------------------------------------
# leval


def _leval_data(text: str) -> Path:
    text = (text or "").strip()
    path = DEFAULT_LEVAL if text in ("", "default") else Path(text).expanduser()
    if not path.is_dir():
        raise BadInput(f"--data {text!r}: not a folder of L-Eval files ({path})")
    return path


def _leval_load(task: str, spec: Path, *, limit=None, revision=None, seed=0, count_tokens=None):
    from chunkwise.data.leval import load_leval

    examples, source = load_leval(task, spec, limit=limit)
    for ex in examples:
        if task == "quality":
            ex["answer"] = {**ex["answer"], "options": ex["options"]}
    return TaskData(task, examples, source, source["total"])


def _leval() -> Benchmark:
    return Benchmark(
        name="leval",
        tasks=LEVAL_TASKS,
        parse_data=_leval_data,
        load=_leval_load,
        build_query=build_query,
        score=lambda task, pred, gold, scorer, extract: score_answer(task, pred, gold, scorer),
        scorers=("official", *NQA_SCORERS),
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={"quality": "QuALITY", "scientific_qa": "QASPER", "narrative_qa": "NarrativeQA"},
        default_data="default",
    )


# --------------------------------------------------------------------------------------------
# qasper


def _qasper_data(text: str) -> str:
    text = (text or "").strip()
    if not text or text == "hub":
        raise BadInput(
            "--data for qasper: the official qasper-dev-v0.3.json (or a folder holding it), a "
            "JSON-lines file in the Hugging Face layout, or hub:REPO@REVISION[:SPLIT]"
        )
    if not text.startswith("hub:") and not Path(text).expanduser().exists():
        raise BadInput(f"--data {text!r}: no such file or folder")
    return text


def _qasper_load(task: str, spec: str, *, limit=None, revision=None, seed=0, count_tokens=None):
    from chunkwise.data.qasper import load_qasper

    if revision and spec.startswith("hub:") and "@" not in spec:
        spec = f"{spec}@{revision}"
    examples, source = load_qasper(spec, limit=limit)
    return TaskData(task, examples, source, source["total"])


def _qasper() -> Benchmark:
    return Benchmark(
        name="qasper",
        tasks=("qasper",),
        parse_data=_qasper_data,
        load=_qasper_load,
        build_query=build_query,
        score=lambda task, pred, gold, scorer, extract: score_answer(task, pred, gold, scorer),
        scorers=("official",),
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={"qasper": "QASPER"},
        default_data="",
    )


# --------------------------------------------------------------------------------------------
# quality (official files)


def _quality_data(text: str) -> str:
    text = (text or "").strip()
    if not text or not Path(text).expanduser().exists():
        raise BadInput(
            f"--data {text!r} for quality: the official QuALITY.v1.0.1.htmlstripped.dev "
            "file or a folder holding it"
        )
    return text


def _quality_load(task: str, spec: str, *, limit=None, revision=None, seed=0, count_tokens=None):
    from chunkwise.data.quality_trees import load_quality

    examples, source = load_quality(spec, hard_only=task == "quality_hard", limit=limit)
    return TaskData(task, examples, source, source["total"])


def _quality() -> Benchmark:
    return Benchmark(
        name="quality",
        tasks=("quality", "quality_hard"),
        parse_data=_quality_data,
        load=_quality_load,
        build_query=build_query,
        score=lambda task, pred, gold, scorer, extract: score_answer(task, pred, gold, scorer),
        scorers=("official",),
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={"quality": "QuALITY", "quality_hard": "QuALITY-HARD"},
        default_data="",
    )


register_benchmark("leval", _leval)
register_benchmark("qasper", _qasper)
register_benchmark("quality", _quality)

__all__ = ["LEVAL_TASKS", "build_query", "score_answer"]
