"""Does teaching the embedded model the MapReduce protocol pay? ``hf:default`` (base-model
scaffolds) against ``hf:default-mr`` (the oracle-trained adapter, chat protocol) under
mapreduce decoding, standard decoding for reference, on held-out generated documents
(seeds never trained on, and one family never trained on at all; extractive_qa, whose
documents all come from one text, asks only about sentences no training document asks
about: ``families.span_split``), plus two ablations on the
conflicting-evidence family: the calibration block off (calibration=false) and the confidence
score itself off (confidence=off: not asked, shown or used).

Documents are worded with the training templates (``--templates train``, the seen cells
``family@length``); ``--templates train,heldout`` adds the held-out-template cells
(``family@length:heldout-templates``: the same documents worded only with templates no
training record uses, data/families/wordings.yaml), and ``original`` the wording before #49
(what adapters trained before it saw). On conflicting evidence each mapreduce arm also reports
the map's confidence by source: the mean confidence of the findings naming the plain
statement's answer and of those naming the weak source's, and the share of documents where the
plain one scores higher (:func:`source_summary`). On every family whose evidence is whole
statements (the retrieval families, conflicting, extractive_qa) each mapreduce arm reports how
the map treats the parts that hold none of it: the share that said NO INFORMATION (issue #49's
goal: >= 90%) and how many findings from them survived every decode-time check
(:func:`empty_parts`); and how it treats the parts that hold it: whether a right finding
reached the reduce, and the final accuracy where one did and where none did
(:func:`answer_parts`: a map that misses the answer told apart from a reduce that loses it). Each arm also reports accuracy per template (:func:`template_summary`):
per question template and needle ending, and on conflicting per weak-source template with its
mean confidence, so a held-out cell's loss can be traced to the wordings that cause it.

    flock /tmp/chunkwise-cpu.lock .venv/bin/python bench/mr_trained.py --n 50 \\
        --lengths 4000,8000,16000,32000,64000 --out runs/bench/mr_trained

Prints one JSON object (accuracy per arm, family and length with n and a 95% bootstrap
interval; the paired differences the bench is run for, :data:`DIFFERENCES`) and a markdown
table; writes both and a PNG to --out.
Any model spec works for the two arms (``--base``, ``--mr``), e.g. ``scripted:passkey`` for a
dry run of the script itself, or ``vllm:default`` / ``vllm:default-mr`` for speed.

Every answered document and every finished (arm, family, length) cell is appended to
``--out/cells.jsonl`` at once, so a crash (or a session's end) loses only the documents in
flight; a rerun with the same settings skips finished cells and documents, and runs of
different ``--arms`` into the same ``--out`` add up to one report. A packaged adapter
(``vllm:default-mr``) is keyed by its content hash and a cell by a digest of its documents, so
neither a retrained adapter nor a changed document generator reuses an old cell. A code change
does reuse it: each cell records the commit that answered it, and the report names every commit
its cells come from, so cells left over from before a fix are seen (delete their rows to rerun).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.benchmarks.evidence import overlaps
from chunkwise.data.families import HELDOUT_FAMILY, HELDOUT_SEED, get_family
from chunkwise.data.families.wordings import CONFLICT_KINDS, SELECTIONS
from chunkwise.errors import BadInput
from chunkwise.eval.plots import interval_bars
from chunkwise.experiments.ledger import Ledger, ledger_key
from chunkwise.llm import load_llm
from chunkwise.llm.loading import model_identity
from chunkwise.stats import bootstrap_interval, paired_bootstrap
from chunkwise.strategies import get_strategy, parse_strategy_args
from chunkwise.tables import estimate, markdown_table
from chunkwise.train.runinfo import git_sha

RETRIEVAL = ("passkey", "number_string", "kv_retrieval")
#: families whose documents list all their evidence (the others' evidence is every chunk's own)
WHOLE_EVIDENCE = (*RETRIEVAL, "conflicting", "extractive_qa")
DEFAULT_FAMILIES = (*RETRIEVAL, "math_find", "multihop", "conflicting", "extractive_qa")
#: bootstrap resamples of every interval here
ROUNDS = 2000
#: what the bench is run for: (name, arm a, arm b, families), each reported as a - b on the
#: documents both arms answered, with a paired 95% interval
DIFFERENCES = (
    ("retrieval_mr_minus_base", "mr/mapreduce", "base/mapreduce", RETRIEVAL),
    ("conflicting_cal_minus_nocal", "mr/mapreduce", "mr/mapreduce-nocal", ("conflicting",)),
    ("conflicting_score_minus_noscore", "mr/mapreduce", "mr/mapreduce-noconf", ("conflicting",)),
)


def cell_name(family: str, length: int, templates: str = "train") -> str:
    """``family@length``, and ``:<templates>-templates`` after it for other than the training
    templates."""
    return f"{family}@{length}" + ("" if templates == "train" else f":{templates}-templates")


def parse_cell(cell: str) -> tuple[str, int, str]:
    """(family, length, templates) of a :func:`cell_name`."""
    name, _, templates = cell.partition(":")
    family, length = name.split("@")
    return family, int(length), templates.removesuffix("-templates") or "train"


def family_label(family: str, templates: str) -> str:
    return family if templates == "train" else f"{family}:{templates}-templates"


def parse_templates(text: str) -> list[str]:
    picked = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in picked if t not in SELECTIONS]
    if not picked or bad:
        raise SystemExit(f"mr_trained: --templates {text!r}: expected a comma-separated list of "
                         f"{', '.join(SELECTIONS)}")  # fmt: skip
    return list(dict.fromkeys(picked))


def _names(answer: str, code: str) -> bool:
    return re.search(rf"(?<!\d){re.escape(code)}(?!\d)", answer) is not None


def source_confidences(doc: Any, trace: list[Any]) -> dict[str, float | None] | None:
    """For a conflicting document: the highest confidence the map gave a finding whose answer
    names the plain statement's value (``plain``) and one naming the weak source's (``weak``);
    None for a kind no finding named. A finding naming both counts for neither. None when no
    map call gave a confidence (standard decoding, confidence=off)."""
    codes = {("plain" if ev.kind == "direct" else "weak"): ev.answer for ev in doc.evidence}
    best: dict[str, float | None] = {"plain": None, "weak": None}
    scored = False
    for event in trace:
        e = event if isinstance(event, dict) else event.to_dict()
        out = e["output"]
        if e["stage"] != "map" or out.get("confidence") is None:
            continue
        scored = True
        if out.get("no_information"):
            continue
        named = [k for k, code in codes.items() if _names(str(out.get("answer") or ""), code)]
        if len(named) == 1:
            k, c = named[0], float(out["confidence"])
            best[k] = c if best[k] is None else max(best[k], c)  # type: ignore[type-var]
    return best if scored else None


def source_summary(per_doc: list[dict[str, float | None] | None]) -> dict[str, Any] | None:
    """Confidence by source over documents (:func:`source_confidences` of each): the mean
    confidence of each kind with its n; ``right_higher``, the share of documents with both
    findings where the plain one scores higher (n, 95% bootstrap); ``right_higher_all``, the
    same over every scored document, a missing finding counting as confidence 0."""
    docs = [d for d in per_doc if d is not None]
    if not docs:
        return None
    plain = [d["plain"] for d in docs if d["plain"] is not None]
    weak = [d["weak"] for d in docs if d["weak"] is not None]
    both = [float(d["plain"] > d["weak"]) for d in docs  # type: ignore[operator]
            if d["plain"] is not None and d["weak"] is not None]  # fmt: skip
    every = [float((d["plain"] or 0.0) > (d["weak"] or 0.0)) for d in docs]

    def mean(xs: list[float]) -> float | None:
        return round(float(np.mean(xs)), 3) if xs else None

    return {
        "n": len(docs),
        "plain_mean": mean(plain),
        "plain_n": len(plain),
        "weak_mean": mean(weak),
        "weak_n": len(weak),
        "right_higher": summarize(both)["accuracy"] if both else None,
        "right_higher_n": len(both),
        "right_higher_ci95": summarize(both)["ci95"] if both else None,
        "right_higher_all": summarize(every)["accuracy"],
        "right_higher_all_ci95": summarize(every)["ci95"],
    }


def _map_outputs(doc: Any, trace: list[Any], holding: bool) -> tuple[int, list[dict[str, Any]]]:
    """How many map calls of ``trace`` have a chunk span, and the outputs of those whose part
    holds some of ``doc``'s evidence (``holding``) or none of it."""
    spans = [(ev.start, ev.end) for ev in doc.evidence]
    maps, picked = 0, []
    for event in trace:
        e = event if isinstance(event, dict) else event.to_dict()
        if e["stage"] != "map" or "span" not in e["output"]:
            continue
        maps += 1
        start, end = e["output"]["span"]
        if any(overlaps(span, start, end) for span in spans) == holding:
            picked.append(e["output"])
    return maps, picked


def _tally(counts: dict[str, Any], output: dict[str, Any]) -> bool:
    """Count one map call's output in ``counts`` (said NO INFORMATION, dropped by which
    check, or kept); whether its finding was kept."""
    counts["parts"] += 1
    check = output.get("dropped")
    if output.get("no_information"):
        counts["said_none"] += 1
    elif check:
        counts["dropped_by"][check] = counts["dropped_by"].get(check, 0) + 1
    else:
        counts["kept"] += 1
        return True
    return False


def empty_parts(doc: Any, trace: list[Any]) -> dict[str, Any] | None:
    """The map calls on parts that hold none of ``doc``'s evidence: how many (``parts``), how
    many said NO INFORMATION (``said_none``), how many of the others' findings survived every
    decode-time check (``kept``: distractors that reach the reduce), and the checks that dropped
    the rest (``dropped_by``: check -> findings). None when the trace has no map call with a
    chunk span (standard decoding, an older trace)."""
    maps, outputs = _map_outputs(doc, trace, holding=False)
    counts: dict[str, Any] = {"parts": 0, "said_none": 0, "kept": 0, "dropped_by": {}}
    for output in outputs:
        _tally(counts, output)
    return counts if maps else None


def answer_parts(doc: Any, trace: list[Any], score: Any) -> dict[str, Any] | None:
    """The map calls on parts that hold some of ``doc``'s evidence, counted as
    :func:`empty_parts` counts the others, plus the kept findings whose answer alone (its
    extracted information where it has no answer field) scores (``right``, by
    ``score(text)``: the family's scorer): whether the value the reduce needs reached it.
    Beside :func:`empty_parts`, this tells a map that misses the answer from a reduce that
    loses it. None when the trace has no map call with a chunk span."""
    maps, outputs = _map_outputs(doc, trace, holding=True)
    counts: dict[str, Any] = {"parts": 0, "said_none": 0, "kept": 0, "right": 0,
                              "dropped_by": {}}  # fmt: skip
    for output in outputs:
        if _tally(counts, output):
            said = output.get("answer") or output.get("extracted_information") or ""
            counts["right"] += score(said) > 0
    return counts if maps else None


def answer_summary(
    per_doc: list[dict[str, Any] | None], scores: list[float]
) -> dict[str, Any] | None:
    """:func:`answer_parts` over documents, beside each document's final ``scores``: the share of
    answering parts that said NO INFORMATION, the findings dropped and kept there, the share of
    documents whose reduce was sent a right finding (``reached``, 95% interval resampling
    documents), and the final accuracy on the documents where it was and where it was not
    (what the reduce made of what it got)."""
    pairs = [(d, s) for d, s in zip(per_doc, scores, strict=True) if d is not None and d["parts"]]
    if not pairs:
        return None
    reached = [float(d["right"] > 0) for d, _ in pairs]
    got = [s for (d, s) in pairs if d["right"] > 0]
    missed = [s for (d, s) in pairs if d["right"] == 0]
    dropped_by: dict[str, int] = {}
    for d, _ in pairs:
        for check, n in d["dropped_by"].items():
            dropped_by[check] = dropped_by.get(check, 0) + n
    parts = sum(d["parts"] for d, _ in pairs)
    said = sum(d["said_none"] for d, _ in pairs)
    return {
        "docs": len(pairs),
        "parts": parts,
        "said_none": said,
        "said_share": round(100 * said / parts, 2),
        "dropped": sum(dropped_by.values()),
        "dropped_by": dropped_by,
        "dropped_by_docs": len(pairs),  # every row names its checks (:func:`_dropped`)
        "kept": sum(d["kept"] for d, _ in pairs),
        "right": sum(d["right"] for d, _ in pairs),
        "reached": summarize(reached),
        "accuracy_reached": summarize(got) if got else None,
        "accuracy_missed": summarize(missed) if missed else None,
    }


def empty_summary(per_doc: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """:func:`empty_parts` over documents: the share of answer-free parts that said NO
    INFORMATION (the model's own behaviour) and the share that sent the reduce nothing
    (``quiet``: they said it, or a decode-time check dropped their finding: what the reduce
    sees), each with a 95% interval from resampling documents (a document's parts are not
    independent); the findings kept per document, and the checks that dropped the others
    (``dropped_by``, over the documents that record them)."""
    docs = [d for d in per_doc if d is not None and d["parts"]]
    if not docs:
        return None
    parts = np.array([d["parts"] for d in docs], dtype=float)
    said = np.array([d["said_none"] for d in docs], dtype=float)
    quiet = parts - np.array([d["kept"] for d in docs], dtype=float)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(docs), size=(ROUNDS, len(docs)))

    def interval(counts: np.ndarray) -> list[float]:
        ratios = counts[picks].sum(axis=1) / parts[picks].sum(axis=1)
        return _points(tuple(float(x) for x in np.percentile(ratios, [2.5, 97.5])))

    dropped_by: dict[str, int] = {}
    for d in docs:
        for check, n in (d.get("dropped_by") or {}).items():
            dropped_by[check] = dropped_by.get(check, 0) + n
    return {
        "docs": len(docs),
        "parts": int(parts.sum()),
        "said_none": int(said.sum()),
        "share": round(100 * float(said.sum() / parts.sum()), 2),
        "ci95": interval(said),
        "quiet_share": round(100 * float(quiet.sum() / parts.sum()), 2),
        "quiet_ci95": interval(quiet),
        "kept": sum(d["kept"] for d in docs),
        "kept_per_doc": round(sum(d["kept"] for d in docs) / len(docs), 3),
        "dropped": int(quiet.sum() - said.sum()),
        "dropped_by": dict(sorted(dropped_by.items(), key=lambda kv: -kv[1])),
        "dropped_by_docs": sum(1 for d in docs if "dropped_by" in d),
    }


#: the slots a per-template report follows (conflicting's weak statement is its document's
#: ``meta["weak"]`` kind: hedged, unreliable or retracted)
TEMPLATE_SLOTS = ("question", "needle", "weak")


def template_summary(cells: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Accuracy per template over finished cells (ledger rows with ``scores``, ``templates``
    and, on conflicting, ``sources`` per document): ``{"question/kv-q1": {"n", "accuracy"}}``
    over the documents whose template ids were recorded (``meta["template_ids"]``; conflicting's
    hedged, unreliable or retracted statement is its ``weak`` slot). A weak template also has
    ``weak_mean``, the mean map confidence of its findings where one was found (``weak_n``)."""
    scores = [x for c in cells for x in c["scores"]]
    templates = [x for c in cells for x in c["templates"]]
    sources = [x for c in cells for x in (c.get("sources") or [None] * len(c["scores"]))]
    groups: dict[str, list[int]] = {}
    for i, ids in enumerate(templates):
        if not ids:
            continue
        for slot, tid in ids.items():
            name = "weak" if slot in CONFLICT_KINDS and slot != "plain" else slot
            if name in TEMPLATE_SLOTS:
                groups.setdefault(f"{name}/{tid}", []).append(i)
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(groups):
        docs = groups[key]
        row: dict[str, Any] = {
            "n": len(docs),
            "accuracy": round(100 * float(np.mean([scores[i] for i in docs])), 2),
        }
        if key.startswith("weak/"):
            weak = [s["weak"] for i in docs if (s := sources[i]) and s.get("weak") is not None]
            row["weak_mean"] = round(float(np.mean(weak)), 3) if weak else None
            row["weak_n"] = len(weak)
        out[key] = row
    return out


def _points(interval: tuple[float, float]) -> list[float]:
    """A 0-1 interval in points (2 decimals)."""
    return [round(100 * v, 2) for v in interval]


def summarize(scores: list[float]) -> dict[str, Any]:
    return {
        "accuracy": round(100 * float(np.mean(scores)), 2) if scores else None,
        "n": len(scores),
        "ci95": _points(bootstrap_interval(scores, rounds=ROUNDS)),
    }


def arms(args: argparse.Namespace) -> list[dict[str, Any]]:
    """(name, model spec, strategy, options, families it runs on)."""
    mr_args = dict(parse_strategy_args(args.mr_args)) if args.mr_args else None
    if mr_args is None:
        if args.mr.split("?")[0] in ("hf:default-mr", "vllm:default-mr"):
            from chunkwise.llm.default_mr import strategy_args

            mr_args = strategy_args()
        else:
            mr_args = {"prompts": "chat"}
    window = int(mr_args.pop("window", args.window))
    base_args = dict(parse_strategy_args(args.base_args)) if args.base_args else {}
    out = [
        {"name": "base/standard", "model": args.base, "strategy": "standard", "opts": {}},
        {"name": "base/mapreduce", "model": args.base, "strategy": "mapreduce", "opts": base_args},
        {"name": "mr/mapreduce", "model": args.mr, "strategy": "mapreduce", "opts": mr_args},
        {
            "name": "mr/mapreduce-nocal",
            "model": args.mr,
            "strategy": "mapreduce",
            "opts": {**mr_args, "calibration": False},
            "only": ("conflicting",),
        },
        {  # the score itself off (not asked, shown or used): does reduce lean on it?
            "name": "mr/mapreduce-noconf",
            "model": args.mr,
            "strategy": "mapreduce",
            "opts": {**mr_args, "confidence": "off"},
            "only": ("conflicting",),
        },
    ]
    if args.mr_standard:
        out.append({"name": "mr/standard", "model": args.mr, "strategy": "standard", "opts": {}})
    for a in out:
        a["window"] = window
    return out


def answer_each(
    strategy: Any, docs: list[Any], llm: Any, parallel: int, which: list[int]
) -> Iterator[tuple[int, Any]]:
    """(index, :class:`Answer`) for ``docs[i]``, i in ``which``, as each finishes; with ``parallel``
    > 1 that many documents are answered at once, their model calls merged into one batch
    (CoalescingLLM): what makes vLLM fast. An error in any document stops the cell (the
    documents finished before it are kept)."""
    if parallel <= 1 or len(which) < 2:
        for i in which:
            yield i, strategy.answer(docs[i].context, docs[i].query(), llm)
        return
    from chunkwise.llm.coalescing import CoalescingLLM, run_each

    shared = CoalescingLLM(llm)
    work = lambda i: strategy.answer(docs[i].context, docs[i].query(), shared)  # noqa: E731
    for i, res in run_each(which, work, shared, parallel):
        if isinstance(res, BaseException):
            raise res
        yield i, res


def answers(strategy: Any, docs: list[Any], llm: Any, parallel: int) -> list[tuple[Any, str]]:
    """(document, answer text) for every document, in document order."""
    done = dict(answer_each(strategy, docs, llm, parallel, list(range(len(docs)))))
    return [(d, done[i].text) for i, d in enumerate(docs)]


_identity = functools.cache(model_identity)  # hashes the adapter's bytes: once a run


@functools.cache
def documents_fingerprint(family: str, length: int, seed: int, templates: str = "train") -> str:
    """A digest of the family's first held-out documents, made with a fixed stand-in token
    counter: it changes when the generator (or its wording) does, so cells answered on older
    documents are not reused (the real documents need the model's tokenizer; the generator is
    what changes)."""
    docs = get_family(family).make(
        n=3, seed=HELDOUT_SEED + seed + length, length_tokens=length,
        count_tokens=lambda text: len(text) // 4, templates=templates,
    )  # fmt: skip
    h = hashlib.sha256()
    for d in docs:
        h.update("\x00".join((d.context, d.question, d.answer)).encode())
    return h.hexdigest()[:12]


def _ledger_key(arm: dict[str, Any], cell: str, args: argparse.Namespace) -> str:
    """What makes a finished cell reusable: the arm, its model (a packaged adapter by its
    content hash), options, n, seed and the documents (by their generator's fingerprint)."""
    fam, length, templates = parse_cell(cell)
    return ledger_key(
        arm["name"], _identity(arm["model"]), arm["strategy"], arm["opts"], arm["window"],
        cell, args.n, args.seed, documents_fingerprint(fam, length, args.seed, templates),
    )  # fmt: skip


def _doc_key(cell_key: str, i: int) -> str:
    """One finished document of a cell: a cell cut short (a crash, Ctrl-C, a session's end)
    resumes from its unfinished documents."""
    return ledger_key(cell_key, "doc", i)


def code_version() -> str | None:
    """The commit this runs from (12 hex digits), ``-dirty`` when tracked files differ from it."""
    sha = git_sha(Path(__file__).resolve().parents[1])
    return None if sha is None else sha[:12] + sha[40:]


def _cell_seconds(rows: list[dict[str, Any]]) -> float:
    """Wall time of a cell answered over several runs: each run's last finish, summed."""
    per_run: dict[str, float] = {}
    for r in rows:
        per_run[r["run"]] = max(per_run.get(r["run"], 0.0), r["run_seconds"])
    return round(sum(per_run.values()), 1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    lengths = [int(x) for x in args.lengths.split(",")]
    selections = parse_templates(getattr(args, "templates", "train"))
    out: dict[str, Any] = {
        "n_per_cell": args.n,
        "lengths": lengths,
        "families": families,
        "templates": selections,
        "heldout_family": HELDOUT_FAMILY,
        "seed": HELDOUT_SEED + args.seed,
        "arms": {},
        "seconds": {},
    }
    every_arm = arms(args)  # once: the summary must key cells exactly as the run did
    arm_list = every_arm
    if args.arms:
        wanted = [a.strip() for a in args.arms.split(",") if a.strip()]
        unknown = sorted(set(wanted) - {a["name"] for a in arm_list})
        if unknown:
            raise SystemExit(f"mr_trained: unknown arm(s) {unknown}; known: "
                             f"{[a['name'] for a in arm_list]}")  # fmt: skip
        arm_list = [a for a in arm_list if a["name"] in wanted]
    if args.out.exists() and not args.out.is_dir():
        raise SystemExit(f"mr_trained: --out {args.out} is a file, not a folder")
    if args.report_only:  # the report from the ledger as it stands; nothing runs
        if not (args.out / "cells.jsonl").is_file():
            raise SystemExit(f"mr_trained: --report-only: no cells.jsonl in {args.out}")
        arm_list = []
    else:
        args.out.mkdir(parents=True, exist_ok=True)
    done = Ledger(args.out / "cells.jsonl", readonly=args.report_only)
    run_id = f"{time.time():.0f}-{os.getpid()}"
    code = None if args.report_only else code_version()

    def todo(a: dict[str, Any]) -> list[tuple[str, int, str]]:
        return [
            (fam, length, tpl)
            for tpl in selections
            for fam in families
            if "only" not in a or fam in a["only"]
            for length in lengths
            if _ledger_key(a, cell_name(fam, length, tpl), args) not in done
        ]

    llms: dict[str, Any] = {}
    for a in arm_list:
        if todo(a) and a["model"] not in llms:
            llms[a["model"]] = load_llm(a["model"])
    docs: dict[tuple[str, int, str], list[Any]] = {}

    def documents(fam: str, length: int, tpl: str, counter: Any) -> list[Any]:
        if (fam, length, tpl) not in docs:  # held-out seeds only: training uses TRAIN_SEED
            docs[fam, length, tpl] = get_family(fam).make(
                n=args.n,
                seed=HELDOUT_SEED + args.seed + length,
                length_tokens=length,
                count_tokens=counter.count_tokens,
                templates=tpl,
            )
        return docs[fam, length, tpl]

    for a in arm_list:
        cells_todo = todo(a)
        if not cells_todo:
            continue
        llm = llms[a["model"]]
        strategy = get_strategy(a["strategy"], window=a["window"], **a["opts"])
        for fam, length, tpl in cells_todo:
            family = get_family(fam)
            cell = cell_name(fam, length, tpl)
            key = _ledger_key(a, cell, args)
            ds = documents(fam, length, tpl, llm)
            rows = {i: r for i in range(len(ds)) if (r := done.get(_doc_key(key, i)))}
            left = [i for i in range(len(ds)) if i not in rows]
            if rows:
                print(f"mr_trained: {a['name']} {cell}: {len(rows)} documents already answered, "
                      f"{len(left)} left", file=sys.stderr)  # fmt: skip
            t0 = time.perf_counter()
            for i, ans in answer_each(strategy, ds, llm, args.parallel, left):
                row = {
                    "doc": i,
                    "score": family.score(ds[i], ans.text),
                    "prediction": ans.text[:200],
                    "run": run_id,
                    "run_seconds": round(time.perf_counter() - t0, 1),
                }
                if fam == "conflicting":
                    row["sources"] = source_confidences(ds[i], ans.trace)
                if fam in WHOLE_EVIDENCE:
                    row["empty_parts"] = empty_parts(ds[i], ans.trace)
                    row["answer_parts"] = answer_parts(
                        ds[i], ans.trace, functools.partial(family.score, ds[i])
                    )
                row["templates"] = ds[i].meta.get("template_ids")
                rows[i] = done.put(_doc_key(key, i), row)  # a crash loses only those in flight
            ordered = [rows[i] for i in range(len(ds))]
            scores = [r["score"] for r in ordered]
            done.put(
                key,
                {
                    "arm": a["name"],
                    "cell": cell,
                    "scores": scores,
                    "predictions": [r["prediction"] for r in ordered],
                    "sources": [r.get("sources") for r in ordered],
                    "empty_parts": [r.get("empty_parts") for r in ordered],
                    "answer_parts": [r.get("answer_parts") for r in ordered],
                    "templates": [r.get("templates") for r in ordered],
                    "seconds": _cell_seconds(ordered),
                    "code": code,
                },
            )
            print(json.dumps({a["name"]: {cell: summarize(scores)}}), flush=True)
    done.close()
    for llm in llms.values():
        llm.close()

    for a in every_arm:  # the summary covers every arm with finished cells in the ledger
        cells: dict[str, Any] = {}
        for tpl in selections:
            for fam in families:
                for length in lengths:
                    row = done.get(_ledger_key(a, cell_name(fam, length, tpl), args))
                    if row is None:
                        continue
                    cells[row["cell"]] = {
                        **summarize(row["scores"]),
                        "scores": row["scores"],
                        "seconds": row["seconds"],
                        "code": row.get("code"),
                        "predictions": row["predictions"] if args.keep_predictions else None,
                    }
                    if found := source_summary(row.get("sources") or []):
                        cells[row["cell"]]["source_confidence"] = found
                        cells[row["cell"]]["sources"] = row["sources"]
                    if quiet := empty_summary(row.get("empty_parts") or []):
                        cells[row["cell"]]["no_information"] = quiet
                        cells[row["cell"]]["empty_parts"] = row["empty_parts"]
                    if row.get("answer_parts"):  # rows of older ledgers lack them
                        cells[row["cell"]]["answer_parts"] = row["answer_parts"]
                        if found := answer_summary(row["answer_parts"], row["scores"]):
                            cells[row["cell"]]["answering"] = found
        if not cells:
            continue
        per_family, by_source, empty, by_template, answering = {}, {}, {}, {}, {}
        for tpl in selections:
            for fam in families:
                got = [cells.get(cell_name(fam, L, tpl)) for L in lengths]
                s = [x for c in got if c for x in c["scores"]]
                if s:
                    per_family[family_label(fam, tpl)] = summarize(s)
                found = source_summary([x for c in got if c for x in c.get("sources", [])])
                if found:
                    by_source[family_label(fam, tpl)] = found
                quiet = empty_summary([x for c in got if c for x in c.get("empty_parts", [])])
                if quiet:
                    empty[family_label(fam, tpl)] = quiet
                with_parts = [c for c in got if c and c.get("answer_parts")]
                if reached := answer_summary(
                    [x for c in with_parts for x in c["answer_parts"]],
                    [x for c in with_parts for x in c["scores"]],
                ):
                    answering[family_label(fam, tpl)] = reached
                finished = [done.get(_ledger_key(a, cell_name(fam, L, tpl), args)) for L in lengths]
                if any(r and r.get("templates") for r in finished):
                    by_template[family_label(fam, tpl)] = template_summary(
                        [r for r in finished if r and r.get("templates")]
                    )
        out["arms"][a["name"]] = {
            "model": a["model"],
            "strategy": a["strategy"],
            "options": a["opts"],
            "cells": cells,
            "families": per_family,
            "source_confidence": by_source,
            "no_information": empty,
            "answering": answering,
            "by_template": by_template,
        }
        out["seconds"][a["name"]] = round(sum(c["seconds"] for c in cells.values()), 1)
    out["code"] = code_versions(out)
    out["differences"] = differences(out)
    return out


def code_versions(out: dict[str, Any]) -> dict[str, int]:
    """How many reported cells each commit answered (``unknown``: no git, or an older ledger)."""
    counts: dict[str, int] = {}
    for arm in out["arms"].values():
        for c in arm["cells"].values():
            v = c.get("code") or "unknown"
            counts[v] = counts.get(v, 0) + 1
    return dict(sorted(counts.items()))


def paired_difference(
    out: dict[str, Any], a: str, b: str, fams: tuple[str, ...], templates: str = "train"
) -> dict[str, Any] | None:
    """Arm ``a`` minus arm ``b`` on the documents both answered (the cells of ``fams`` worded
    with ``templates`` both have, document by document): points, n and a 95% paired bootstrap
    interval; None when they share no cell. Both arms of one bench read the same documents of
    a cell."""
    ca = out["arms"].get(a, {}).get("cells") or {}
    cb = out["arms"].get(b, {}).get("cells") or {}
    sa: list[float] = []
    sb: list[float] = []
    for cell in sorted(set(ca) & set(cb)):
        fam, _, tpl = parse_cell(cell)
        if fam not in fams or tpl != templates:
            continue
        xa, xb = ca[cell]["scores"], cb[cell]["scores"]
        if len(xa) != len(xb):
            raise ValueError(f"{cell}: {a} has {len(xa)} scores, {b} {len(xb)}; not paired")
        sa += xa
        sb += xb
    if not sa:
        return None
    d = paired_bootstrap(sa, sb, rounds=ROUNDS)
    return {"points": round(100 * d.mean, 2), "n": d.n, "ci95_paired": _points((d.low, d.high))}


def differences(out: dict[str, Any]) -> dict[str, Any]:
    """Each of :data:`DIFFERENCES` the finished cells allow, as measured."""
    found = {}
    for tpl in out.get("templates", ["train"]):
        for name, a, b, fams in DIFFERENCES:
            d = paired_difference(out, a, b, fams, tpl)
            if d is not None:
                label = name if tpl == "train" else f"{name}:{tpl}-templates"
                found[label] = {"a": a, "b": b, "families": list(fams), "templates": tpl, **d}
    return found


def _cell_text(c: dict[str, Any] | None) -> str:
    return "" if c is None else estimate(c["accuracy"], *c["ci95"])


def cells_table(out: dict[str, Any]) -> str:
    """One row per (family, length) cell that any arm answered, one column per arm."""
    arms = out["arms"].values()
    rows = []
    for tpl in out.get("templates", ["train"]):
        for fam in out["families"]:
            for length in out["lengths"]:
                cell = cell_name(fam, length, tpl)
                row = [_cell_text(a["cells"].get(cell)) for a in arms]
                if any(row):
                    rows.append([cell, *row])
    head = ["family @ length", *out["arms"]]
    return f"{markdown_table(rows, head)}\n\nn = {out['n_per_cell']} per cell; [95% bootstrap]"


def table(out: dict[str, Any]) -> str:
    names = list(out["arms"])
    arms = out["arms"].values()
    rows = [[label, *(_cell_text(a["families"].get(label)) for a in arms)] for label in labels(out)]
    n = out["n_per_cell"] * len(out["lengths"])
    lines = [markdown_table(rows, ["family", *names])]
    lines.append(f"\nn = {n} per family and arm ({out['n_per_cell']} per length); [95% bootstrap]")
    if len(out["lengths"]) > 1:  # the same by document length
        lines += ["", cells_table(out)]
    if out.get("differences"):
        rows = [
            [
                name,
                f"{d['a']} - {d['b']}",
                d["n"],
                estimate(d["points"], *d["ci95_paired"], signed=True),
            ]
            for name, d in out["differences"].items()
        ]
        head = ["difference", "arms", "n", "points [95% paired bootstrap]"]
        lines += ["", markdown_table(rows, head, align="llrr")]
    if any(a.get("source_confidence") for a in arms):
        lines += ["", sources_table(out)]
    if any(a.get("no_information") for a in arms):
        lines += ["", empty_table(out)]
    if any(a.get("answering") for a in arms):
        lines += ["", answering_table(out)]
    if any(a.get("by_template") for a in arms):
        lines += ["", template_table(out)]
    if len(out.get("code", {})) > 1:  # cells answered by different code: check none is stale
        versions = ", ".join(f"{v} ({k} cells)" for v, k in out["code"].items())
        lines.append(f"\nWarning: these cells were answered by {len(out['code'])} commits: "
                     f"{versions}")  # fmt: skip
    return "\n".join(lines)


def labels(out: dict[str, Any]) -> list[str]:
    """The table's family rows: each family, per template selection the run used."""
    return [family_label(f, t) for t in out.get("templates", ["train"]) for f in out["families"]]


def sources_table(out: dict[str, Any]) -> str:
    """Conflicting evidence, confidence by source: per arm and family row, the map's mean
    confidence of plain and weak findings and how often the plain one scored higher."""
    rows = []
    for name, arm in out["arms"].items():
        for label, s in (arm.get("source_confidence") or {}).items():
            both = ""
            if s["right_higher"] is not None:
                both = f"{estimate(s['right_higher'], *s['right_higher_ci95'])} "
                both += f"({s['right_higher_n']})"
            rows.append([
                name, label, s["n"], f"{s['plain_mean']} ({s['plain_n']})",
                f"{s['weak_mean']} ({s['weak_n']})", both,
                estimate(s["right_higher_all"], *s["right_higher_all_ci95"]),
            ])  # fmt: skip
    head = ["arm", "family", "docs", "plain: mean conf. (n)", "weak: mean conf. (n)",
            "plain higher, both found [95%] (n)", "plain higher, all docs [95%]"]  # fmt: skip
    return markdown_table(rows, head, align="llrrrrr") + (
        "\n\nconfidence of the map's findings naming each source's value (highest per document)"
    )


def _dropped(s: dict[str, Any]) -> str:
    """The findings the decode-time checks dropped, by check where the rows record it."""
    if "dropped" not in s:  # a report made before the count
        return "-"
    by = s.get("dropped_by") or {}
    named = ", ".join(f"{check} {n}" for check, n in by.items())
    if s.get("dropped_by_docs", 0) < s["docs"]:  # some rows predate the checks' names
        return f"{s['dropped']}" + (f" ({named} in {s['dropped_by_docs']} docs)" if named else "")
    return f"{s['dropped']}" + (f": {named}" if named else "")


def empty_table(out: dict[str, Any]) -> str:
    """Parts holding none of the evidence: per arm and family row, the share whose map said NO
    INFORMATION, the share that sent the reduce nothing (the decode-time checks dropped the
    rest's findings), the findings that survived and those the checks dropped."""
    rows = [
        [name, label, s["docs"], s["parts"], estimate(s["share"], *s["ci95"]),
         estimate(s["quiet_share"], *s["quiet_ci95"]) if "quiet_share" in s else "-",
         f"{s['kept']} ({s['kept_per_doc']})", _dropped(s)]
        for name, arm in out["arms"].items()
        for label, s in (arm.get("no_information") or {}).items()
    ]  # fmt: skip
    head = ["arm", "family", "docs", "answer-free parts", "said NO INFORMATION [95%]",
            "sent the reduce nothing [95%]", "findings kept (per doc)", "findings dropped"]  # fmt: skip
    return markdown_table(rows, head, align="llrrrrrl") + (
        "\n\nmap calls on parts holding none of the document's evidence; a part sends the reduce "
        "nothing when it says NO INFORMATION or a decode-time check drops its finding; the "
        "intervals resample documents"
    )


def answering_table(out: dict[str, Any]) -> str:
    """Parts holding evidence: per arm and family row, what their map calls did (said NO
    INFORMATION, a check dropped the finding, it was kept, and kept with a value that scores),
    the share of documents whose reduce was sent a right finding, and the final accuracy where
    it was and where it was not."""

    def acc(x: dict[str, Any] | None) -> str:
        return "-" if x is None else f"{x['accuracy']:g} ({x['n']})"

    rows = [
        [name, label, s["docs"], s["parts"], f"{s['said_share']:g}",
         _dropped(s),
         f"{s['kept']} ({s['right']})", estimate(s["reached"]["accuracy"], *s["reached"]["ci95"]),
         acc(s["accuracy_reached"]), acc(s["accuracy_missed"])]
        for name, arm in out["arms"].items()
        for label, s in (arm.get("answering") or {}).items()
    ]  # fmt: skip
    head = ["arm", "family", "docs", "answering parts", "said NO INFORMATION %",
            "findings dropped", "kept (right)", "docs whose reduce got a right finding [95%]",
            "accuracy when it did (n)", "when it did not (n)"]  # fmt: skip
    return markdown_table(rows, head, align="llrrrlrrrr") + (
        "\n\nmap calls on parts holding some of the document's evidence; a finding is right when "
        "its answer alone scores; the interval resamples documents"
    )


def template_table(out: dict[str, Any]) -> str:
    """Accuracy per template, per arm and family row (:func:`template_summary`)."""
    rows = [
        [name, label, key, t["n"], t["accuracy"],
         "" if t.get("weak_mean") is None else f"{t['weak_mean']} ({t['weak_n']})"]
        for name, arm in out["arms"].items()
        for label, per in (arm.get("by_template") or {}).items()
        for key, t in per.items()
    ]  # fmt: skip
    head = ["arm", "family", "slot/template", "docs", "accuracy", "weak: mean conf. (n)"]
    return markdown_table(rows, head, align="lllrrr") + (
        "\n\nper template of the documents' wording (data/families/wordings.yaml); few documents "
        "each, so read it for where a loss concentrates, not as estimates"
    )


def plot(out: dict[str, Any], path: Path) -> None:
    fams = [label for label in labels(out) if any(label in a["families"]
            for a in out["arms"].values())]  # fmt: skip
    series = {
        a: [
            (f["accuracy"], *f["ci95"]) if (f := arm["families"].get(fam)) is not None else None
            for fam in fams
        ]
        for a, arm in out["arms"].items()
    }
    interval_bars(path, fams, series, rotation=20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="hf:default")
    ap.add_argument("--mr", default="hf:default-mr")
    ap.add_argument("--base-args", help="mapreduce options for the base arm (k=v,...)")
    ap.add_argument("--mr-args", help="mapreduce options for the mr arm (default: its own)")
    ap.add_argument("--mr-standard", action="store_true", help="also standard decoding with mr")
    ap.add_argument("--families", default=",".join((*DEFAULT_FAMILIES, HELDOUT_FAMILY)))
    ap.add_argument("--lengths", default="4000,8000,16000,32000,64000")
    ap.add_argument("--n", type=int, default=50, help="documents per family and length")
    ap.add_argument("--templates", default="train",
                    help="which wordings (comma-separated): train (seen, cells family@length), "
                    "heldout (cells family@length:heldout-templates), original (pre-#49)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=0, help="offset into the held-out seeds")
    ap.add_argument("--window", type=int, default=4096)
    ap.add_argument("--keep-predictions", action="store_true")
    ap.add_argument("--parallel", type=int, default=1,
                    help="documents answered at once, their calls batched (use with vllm:)")  # fmt: skip
    ap.add_argument("--arms", help="run only these arms (comma-separated names); the summary "
                    "still covers every arm already finished in --out")  # fmt: skip
    ap.add_argument("--out", type=Path, default=Path("runs/bench/mr_trained"))
    ap.add_argument("--report-only", action="store_true",
                    help="write the report from the cells finished in --out; run nothing "
                    "(safe while another run is writing there)")  # fmt: skip
    args = ap.parse_args()
    try:
        result = run(args)
    except BadInput as e:  # a bad model spec or option, a damaged ledger: said, not a traceback
        ap.exit(2, f"mr_trained.py: error: {e}\n")
    (args.out / "results.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    md = table(result)
    (args.out / "table.md").write_text(md + "\n", encoding="utf-8")
    plot(result, args.out / "mr_trained.png")
    slim = {**result, "arms": {k: {**v, "cells": None} for k, v in result["arms"].items()}}
    print(json.dumps(slim))
    print(md)


if __name__ == "__main__":
    main()
