"""The oracle teacher: exact MapReduce targets for generated documents with known evidence.

The teacher does not re-implement MapReduce. It runs the ``mapreduce`` strategy itself, on a
stand-in model (:class:`OracleLLM`) that counts tokens with the real model's tokenizer and
answers every call from the ground truth of the document family (:mod:`chunkwise.data.families`):

* a map call (recognised by its exact prompt, one per chunk of the strategy's own plan) gets
  the four protocol fields for the evidence wholly inside that chunk, or NO INFORMATION;
* a collapse call gets what the union of its input parts' evidence supports, in the same four
  fields (the strategy decides grouping and rounds, exactly as at decoding time);
* the reduce call gets ``Rationale: ...`` and ``Answer: ...`` for all the evidence it sees.

Confidences follow the calibration rule of :data:`chunkwise.data.families.CONFIDENCE`: 5 for a
direct statement, lower for partial, inferred, hedged, unreliable or retracted evidence. The
trace the strategy records *is* the record's M, and the reduce rationale is kept as
``intermediate.reduce``; the result is an ordinary Pyramid-Align (X, Q, M, A) record.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.data.families import Doc, Family, Straddle, get_family
from chunkwise.data.families.wordings import wordings_digest
from chunkwise.errors import BadInput
from chunkwise.io import JsonlAppender, atomic_write_json
from chunkwise.llm import LLM, Completion, Request
from chunkwise.strategies import get_strategy
from chunkwise.strategies.mapreduce import MapReduce, to_intermediate
from chunkwise.strategies.protocol import NO_INFO, Record, render_record
from chunkwise.synth.calls import Delegate
from chunkwise.synth.records import map_record, validate_record
from chunkwise.synth.settings import SETTINGS_FILE, check_settings

_PARTS = re.compile(r"Findings from parts? ([\d, ]+):")


class TargetOverBudget(AssertionError):
    """A target longer than the ``max_new_tokens`` decoding gives its call: a teacher bug."""


def _text(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)


class OracleLLM(Delegate):
    """Answers the calls of one MapReduce run over one document from its ground truth; token
    counting, chat wrapping and the window are the wrapped model's."""

    def __init__(
        self, inner: LLM, strategy: MapReduce, family: Family, doc: Doc, evidence: list[list]
    ):
        super().__init__(inner)
        self.spec = "oracle"
        self.strategy = strategy
        self.family = family
        self.doc = doc
        self.evidence = evidence  # per chunk
        q = doc.query()
        plan = strategy.plan(doc.context, q, inner)
        self.prompts = plan.prompts
        self.map_index = {
            _text(inner.as_prompt(strategy.map_prompt(plan.prompts, c.text, q))): c.index
            for c in plan.chunks
        }
        coll = set(strategy.collapse_prompt(plan.prompts, [], q).splitlines())
        red = set(strategy.reduce_prompt(plan.prompts, [], q).splitlines())
        self.collapse_marker = max(coll - red, key=len)
        self.calls: Counter[str] = Counter()

    def target(self, prompt: Any) -> tuple[str, str]:
        """(stage, output text) for one call of the run."""
        text = _text(prompt)
        with_conf = self.prompts.with_confidence
        if text in self.map_index:
            i = self.map_index[text]
            f = self.family.resolve(self.doc, [(i, ev) for ev in self.evidence[i]], "map")
            return "map", _render(f, with_conf)
        parts: list[int] = []
        for m in _PARTS.finditer(text):
            parts += [int(x) - 1 for x in m.group(1).split(",") if x.strip()]
        items = [(p, ev) for p in sorted(set(parts)) for ev in self.evidence[p]]
        if self.collapse_marker in text:
            return "collapse", _render(self.family.resolve(self.doc, items, "collapse"), with_conf)
        if not items:  # every part was empty: an unanswerable variant (Family.without_evidence)
            return "reduce", f"Rationale: {self.family.none_found(self.doc)}\nAnswer: {NO_INFO}"
        f = self.family.resolve(self.doc, items, "reduce")
        return "reduce", f"Rationale: {f.rationale}\nAnswer: {f.answer or NO_INFO}"

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = []
        for req in requests:
            t0 = time.perf_counter()
            stage, text = self.target(req.prompt)
            self.calls[stage] += 1
            used = self.inner.count_tokens(text)
            if used > req.params.max_new_tokens:
                raise TargetOverBudget(
                    f"{self.doc.id}: the oracle's {stage} target is {used} tokens, but decoding "
                    f"gives that call {req.params.max_new_tokens}: a model taught it would be "
                    f"cut before its answer ({text[:80]!r}...)"
                )
            out.append(
                Completion(
                    text=text,
                    prompt_tokens=self.inner.prompt_tokens(req.prompt),
                    completion_tokens=used,
                    finish_reason="stop",
                    latency_s=time.perf_counter() - t0,
                )
            )
        return out


def _render(f: Any, with_confidence: bool) -> str:
    rec = Record(f.extracted_information, f.rationale, f.answer or NO_INFO, f.confidence)
    return render_record(rec, with_confidence=with_confidence)


@dataclass
class OracleTeacher:
    """Builds oracle records for documents of the registered families."""

    llm: LLM  # the model that will decode: its tokenizer, chat wrapping and window
    window: int = 4096
    mapreduce_args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # no confidence floor (chat.yaml's retrieval floor drops sources weaker than an
        # inference): the teacher shows its reduce every finding, weak sources included, so a
        # taught reduce learns to weigh them itself; decoding's floor is a guard on top
        args = {"prompts": "chat", "min_confidence": 0, **self.mapreduce_args}
        if args["prompts"] != "chat" or args.get("protocol", "structured") != "structured":
            raise BadInput(
                "the oracle teacher writes the four-field chat protocol: use prompts=chat and "
                "protocol=structured in --strategy-args"
            )
        self.strategy = get_strategy("mapreduce", window=self.window, **args)
        assert isinstance(self.strategy, MapReduce)

    def record(self, doc: Doc) -> dict[str, Any]:
        """One Pyramid-Align record for ``doc``; :class:`Straddle` when evidence falls across
        a chunk edge (the caller skips the document)."""
        family = get_family(doc.family)
        q = doc.query()
        plan = self.strategy.plan(doc.context, q, self.llm)
        evidence = [family.evidence_in(doc, c.start_char, c.end_char) for c in plan.chunks]
        oracle = OracleLLM(self.llm, self.strategy, family, doc, evidence)
        ans = self.strategy.answer(doc.context, q, oracle)
        m = to_intermediate(ans)
        red = next(e for e in ans.trace if e.stage == "reduce").output
        extra = ans.stats.extra
        rec = {
            "id": doc.id,
            "source_id": doc.id,
            "document": doc.context,
            "question": doc.question,
            "intermediate": {
                "map": [map_record(r) for r in m["map"]],
                "collapse": [[map_record(r) for r in g] for g in m["collapse"]],
                "reduce": {"rationale": str(red["rationale"]), "answer": ans.text.strip()},
            },
            "answer": ans.text.strip(),
            "meta": {
                "node_level": 0,
                "node_ids": [doc.id],
                "levels": 1,
                "model": "oracle",
                "prompt_version": str(extra["prompt_version"]),
                "node_kind": "root",
                "leaves": [0, len(plan.chunks) - 1],
                "char_span": [0, len(doc.context)],
                "mapreduce": {
                    "prompt_version": str(extra["prompt_version"]),
                    "prompt_kind": str(extra["prompt_kind"]),
                    "chunk_budget": int(extra["chunk_budget"]),
                    "chunks": [[c.start_char, c.end_char] for c in plan.chunks],
                },
                "task": doc.task,
                "family": doc.family,
                "seed": int(doc.meta.get("seed", 0)),
                "length_tokens": int(doc.meta.get("length", 0)),
            },
        }
        problems = validate_record(rec)
        if problems:
            raise AssertionError(f"{doc.id}: oracle record is malformed: {'; '.join(problems)}")
        if rec["answer"] != doc.answer:
            raise AssertionError(f"{doc.id}: oracle answered {rec['answer']!r}, not {doc.answer!r}")
        return rec


def oracle_settings(
    llm: LLM,
    *,
    families: Sequence[str],
    lengths: Sequence[int],
    n: int,
    seed: int,
    window: int,
    mapreduce_args: dict[str, Any],
    unanswerable: float,
    unanswerable_families: Sequence[str] | None = None,
) -> dict[str, Any]:
    """What shapes an oracle run's records (recorded in ``out/config.json``): a rerun into the
    same folder must give the same values."""
    from chunkwise.redact import redact

    return {
        "teacher": "oracle",
        "model": redact(llm.spec),  # its tokenizer sizes documents and chunks
        "families": list(families),
        "lengths": list(lengths),
        "n": n,
        "seed": seed,
        "window": window,
        "mapreduce_args": dict(mapreduce_args),
        "unanswerable": unanswerable,
        # None (the default) is what a folder from before the option reads back: it resumes
        "unanswerable_families": None
        if unanswerable_families is None
        else list(unanswerable_families),
        "wordings": wordings_digest(),  # the training templates the documents are worded with
    }


def cut_families(families: Sequence[str], named: Sequence[str] | None) -> set[str]:
    """The families of ``families`` whose unanswerable variants are made: ``named`` (each must
    be one of ``families`` and have variants), or by default those that make them unasked."""
    if named is None:
        return {
            f for f in families
            if get_family(f).unanswerable_variants and get_family(f).unanswerable_by_default
        }  # fmt: skip
    for f in named:
        if f not in families:
            raise BadInput(
                f"--unanswerable-families names {f!r}, which is not in --families "
                f"({', '.join(families)})"
            )
        if not get_family(f).unanswerable_variants:
            have = [x for x in families if get_family(x).unanswerable_variants]
            raise BadInput(
                f"--unanswerable-families: {f} has no unanswerable variant (cutting its evidence "
                f"would not surely leave the question unanswered); of --families these have one: "
                f"{', '.join(have) or 'none'}"
            )
    return set(named)


def _progress(total: int, progress: bool) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, disable=not progress, desc="oracle", unit="doc")


def _job_docs(llm: LLM, fam: str, length: int, n: int, seed: int, n_cut: int) -> list[Doc]:
    """One (family, length) job's documents, then the unanswerable variants of its first
    ``n_cut``."""
    family = get_family(fam)
    # training records are worded with the training templates only (wordings.yaml)
    docs = family.make(
        n=n, seed=seed, length_tokens=length, count_tokens=llm.count_tokens, templates="train"
    )
    variants = [family.without_evidence(d) for d in docs[:n_cut]]
    return docs + [v for v in variants if v is not None]


def run_oracle(
    llm: LLM,
    out: Path,
    *,
    families: Sequence[str],
    lengths: Sequence[int],
    n: int,
    seed: int = 0,
    window: int = 4096,
    mapreduce_args: dict[str, Any] | None = None,
    progress: bool = True,
    unanswerable: float = 0.0,
    unanswerable_families: Sequence[str] | None = None,
    override_settings: bool = False,
) -> dict[str, Any]:
    """Write ``out/data/oracle.jsonl`` and ``out/stats.json``; returns the stats.

    Resumable: each record is appended and made durable as soon as it is built (a
    :class:`~chunkwise.io.JsonlAppender`, which drops a line torn by a kill), and a rerun
    skips the ids already there. ``out/config.json`` records the settings; a rerun with others
    is refused unless ``override_settings``. ``unanswerable``: for that fraction of each
    family's documents at each length, also its variant with the evidence cut out (every part
    empty, the reduce answering ``[NO INFORMATION]``), for ``unanswerable_families`` (default:
    the families that make them unasked, :func:`cut_families`)."""
    if not 0.0 <= unanswerable <= 1.0:
        raise BadInput(f"--unanswerable must be a fraction in [0, 1], got {unanswerable}")
    cut = cut_families(families, unanswerable_families)
    args = dict(mapreduce_args or {})
    teacher = OracleTeacher(llm, window, args)
    settings = oracle_settings(
        llm,
        families=families,
        lengths=lengths,
        n=n,
        seed=seed,
        window=window,
        mapreduce_args=args,
        unanswerable=unanswerable,
        unanswerable_families=unanswerable_families,
    )
    out.mkdir(parents=True, exist_ok=True)
    check_settings(
        out / SETTINGS_FILE,
        settings,
        override=override_settings,
        override_flag="--override-settings",
    )
    path = out / "data" / "oracle.jsonl"
    t0 = time.perf_counter()
    stats: dict[str, Any] = {
        "records": 0,
        "unanswerable": 0,
        "skipped": Counter(),
        "by_family": Counter(),
    }
    stages: Counter[str] = Counter()

    def count(fam: str, doc: Doc) -> None:  # a record in the file, resumed or new
        stats["records"] += 1
        stats["by_family"][fam] += 1
        stats["unanswerable"] += bool(doc.meta.get("unanswerable"))

    jobs = [(f, L) for f in families for L in lengths]
    n_cut = round(n * unanswerable)  # variants per job of a family in ``cut``
    bar = _progress(sum(n + n_cut * (f in cut) for f, _ in jobs), progress)
    with JsonlAppender(path, key="id") as app:
        for fam, length in jobs:
            for doc in _job_docs(llm, fam, length, n, seed, n_cut if fam in cut else 0):
                if bar is not None:
                    bar.update(1)
                if doc.id in app:
                    count(fam, doc)
                    continue
                try:
                    rec = teacher.record(doc)
                except Straddle:
                    stats["skipped"]["evidence_across_chunks"] += 1
                    continue
                stages["map"] += len(rec["intermediate"]["map"])
                stages["collapse"] += sum(len(g) for g in rec["intermediate"]["collapse"])
                stages["reduce"] += 1
                app.write(rec)
                count(fam, doc)
        torn, in_file = app.recovered_partial_line, len(app)
    if bar is not None:
        bar.close()
    stats.update(
        skipped=dict(stats["skipped"]),
        by_family=dict(stats["by_family"]),
        new_examples_by_stage=dict(stages),
        families=list(families),
        lengths=list(lengths),
        n=n,
        seed=seed,
        window=window,
        torn_line_dropped=torn,
        records_in_file=in_file,  # more than records when settings were overridden
        seconds=round(time.perf_counter() - t0, 2),
        out=str(path),
    )
    atomic_write_json(out / "stats.json", stats, indent=1)
    return stats


def parse_lengths(text: str) -> list[int]:
    if text.strip() == "train":
        from chunkwise.data.families import TRAIN_LENGTHS

        return list(TRAIN_LENGTHS)
    try:
        out = [int(x.strip().lower().replace("k", "000")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"--lengths {text!r}: expected token counts like 2000,4000 or 4k") from None
    if not out or any(x < 64 for x in out):
        raise BadInput(f"--lengths {text!r}: each length must be at least 64 tokens")
    return out


def parse_families(text: str) -> list[str]:
    from chunkwise.data.families import FAMILIES

    if text.strip() == "train":  # every family but the held-out one
        from chunkwise.data.families import train_families

        return train_families()
    names = list(FAMILIES) if text.strip() in ("", "all") else [x.strip() for x in text.split(",")]
    for name in names:
        get_family(name)  # names the unknown one
    return names


def parse_names(text: str) -> list[str] | None:
    """A comma-separated flag's names (None when it is empty: the default)."""
    names = [x.strip() for x in (text or "").split(",") if x.strip()]
    return names or None


def run_oracle_cli(args: Any, mapreduce_args: dict[str, Any]) -> int:
    """``chunkwise synth --teacher oracle``: prints the stats as one JSON line."""
    from chunkwise.llm import load_llm

    if args.n < 1:
        raise BadInput(f"--n must be at least 1, got {args.n}")
    families = parse_families(args.families)
    lengths = parse_lengths(args.lengths)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {args.out!r} is a file, not a folder")
    if args.model.split("?")[0] == "hf:default-mr":
        # the model being taught need not exist yet: its tokenizer and template suffice
        from chunkwise.llm.default_mr import counting_llm

        llm = counting_llm()
    else:
        llm = load_llm(args.model)
    try:
        stats = run_oracle(
            llm,
            out,
            families=families,
            lengths=lengths,
            n=args.n,
            seed=args.seed,
            window=args.window,
            mapreduce_args=mapreduce_args,
            progress=not args.no_progress,
            unanswerable=args.unanswerable,
            unanswerable_families=parse_names(getattr(args, "unanswerable_families", "")),
            override_settings=bool(getattr(args, "override_settings", False)),
        )
    finally:
        llm.close()
    print(json.dumps(stats))
    return 0


__all__ = [
    "OracleLLM",
    "OracleTeacher",
    "TargetOverBudget",
    "cut_families",
    "oracle_settings",
    "run_oracle",
    "run_oracle_cli",
]
