"""Summary trees on real long documents: retrieval vs RAPTOR vs DTCRS vs MapReduce.

    flock /tmp/chunkwise-cpu.lock .venv/bin/python bench/trees.py --data LEVAL_FOLDER --docs 1 --questions 2
    .venv-vllm/bin/python bench/trees.py --model vllm:default --subsets pydoc \\
        --doc-tokens 60000 --docs 1 --questions 3 --strategies retrieval,raptor,dtcrs \\
        --out runs/bench/trees_60k

Data:

* ``quality``, ``scientific_qa`` — L-Eval's QuALITY and QASPER subsets
  (``--data FOLDER`` holding {quality,scientific_qa}.jsonl; ~6K-token documents); a missing file
  is skipped and said so in the JSON. Scored by QuALITY accuracy and QASPER answer F1
  against L-Eval's single reference.
* ``pydoc`` — the scale where the DTCRS paper's gap appears, offline from a fresh clone:
  Python's own language reference (``pydoc_data.topics``, shipped with CPython) with its
  topics in an order drawn from ``--seed`` + the document's index, cut at the first
  paragraph break where it reaches ``--doc-tokens`` tokens of the reading model's tokenizer
  (60,000 by default; the reference holds ~116K). Its questions are extractive spans drawn
  as ``chunkwise.data.families.ExtractiveQA`` draws one (:func:`span_questions`: "which four
  words come right after <a quoted phrase of the text>?", the phrase and the answer each
  occurring once in the document, line wraps allowed); scored like that family
  (``Family.score``: 1 when the four words appear as a whole token run of the reply, case
  and punctuation ignored).

For each subset the first ``--docs`` documents and their first ``--questions`` questions are
asked to every strategy; one strategy instance per subset, so RAPTOR's tree of a document is
built once and reused by that document's later questions (and DTCRS's table of contents
likewise). Every row records the document's tokens, RAPTOR's tree (summary nodes, layers,
nodes per layer, leaves) and DTCRS's route and sub-questions, so a note can say why the gap
appears or not.

Per strategy and subset: score, summary nodes, LLM calls (by kind) and build seconds per
question, reported both ways where a per-document cost is cached:

* ``amortised`` — what each question paid as measured (the first question of a document
  builds RAPTOR's tree, later ones reuse it: the mean is the tree's cost over the
  document's questions);
* ``per_question`` — as if nothing were cached: RAPTOR's whole tree charged to every
  question, DTCRS's table of contents and leaf embeddings charged to every question (and a
  retrieval index likewise); a question DTCRS routes to plain retrieval counts 0 summary
  calls either way.

umap's first-fit compilation (numba) is paid once before anything is timed and reported
apart (``umap_warmup_seconds``); so are the model and embedder loads.

``--out DIR`` writes ``DIR/results.json``, ``DIR/table.md`` and the ledger ``DIR/rows.jsonl``:
every finished (strategy, question) row is appended and fsynced at once, so a crash loses at
most the row being run, and a rerun with the same settings skips finished rows (a line cut
by a crash is dropped and its row run again). RAPTOR's trees are kept in ``DIR/trees``, so a
resumed document reuses its tree and the accounting stays exact; DTCRS's and retrieval's
per-document caches live in memory, so a row run after a resume mid-document pays them
again (marked ``cold_after_resume``). Delete DIR to start over. Progress goes to stderr.

Against RAPTOR (the DTCRS paper's efficiency claims are about these two numbers): for each
DTCRS variant and view, the share of RAPTOR's summary calls it saves and how many times faster
it builds (``vs_raptor`` per subset, and a table), as measured.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from chunkwise.benchmarks.leval.loader import load_leval  # noqa: E402
from chunkwise.benchmarks.leval.scoring import build_query, score_answer  # noqa: E402
from chunkwise.data.families import get_family, reference_sections, span_questions  # noqa: E402
from chunkwise.experiments.ledger import Ledger, ledger_key  # noqa: E402
from chunkwise.io import atomic_write_text  # noqa: E402
from chunkwise.stats import bootstrap_interval  # noqa: E402
from chunkwise.strategies import Query, clustering, get_strategy  # noqa: E402
from chunkwise.tables import estimate, markdown_table  # noqa: E402

SUBSETS = {"quality": "quality", "scientific_qa": "scientific_qa"}
#: the long-document subset built from Python's language reference (no files needed)
LONG = "pydoc"
KINDS = ("toc", "classify", "decompose", "summarize", "answer")
#: what each result row keeps (the ledger keeps everything)
ROW_KEYS = (
    "id",
    "doc_id",
    "score",
    "summary_nodes",
    "llm_calls",
    "build_seconds",
    "seconds",
    "route",
    "doc_tokens",
    "tree_summary_nodes",
    "tree_layers",
    "tree_nodes_per_layer",
    "leaves",
    "subquestions",
    "cold_after_resume",
    "tree_from_earlier_run",
    "prediction",
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pick(data: Path, subset: str, docs: int, questions: int) -> list[dict[str, Any]]:
    examples, _ = load_leval(subset, data, docs=docs)
    out, per_doc = [], {}
    for ex in examples:
        per_doc[ex["doc_id"]] = per_doc.get(ex["doc_id"], 0) + 1
        if per_doc[ex["doc_id"]] <= questions:
            out.append(ex)
    return out


# -- the long subset ---------------------------------------------------------------------


def long_document(rng: random.Random, min_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """The language reference's topics in an order drawn from ``rng``, cut at the first
    paragraph break where the text holds at least ``min_tokens`` tokens."""
    parts: list[str] = []
    used = 0
    for section in reference_sections(rng):
        parts.append(section)
        used += count_tokens(section)
        if used < min_tokens:
            continue
        head = parts[:-1]
        breaks = [m.start() for m in re.finditer(r"\n\n", section)] + [len(section)]

        def upto(i: int, head=head, section=section, breaks=breaks) -> str:
            return "\n\n".join([*head, section[: breaks[i]]])

        if count_tokens(upto(len(breaks) - 1)) < min_tokens:
            continue  # the joins counted differently: take the next topic too
        lo, hi = 0, len(breaks) - 1  # the shortest cut that still holds min_tokens
        while lo < hi:
            mid = (lo + hi) // 2
            if count_tokens(upto(mid)) >= min_tokens:
                hi = mid
            else:
                lo = mid + 1
        return upto(lo)
    raise SystemExit(
        f"trees: Python's language reference holds about {used} tokens of this model; "
        f"--doc-tokens {min_tokens} asks for more"
    )


def long_examples(
    docs: int, questions: int, doc_tokens: int, count_tokens: Callable[[str], int], seed: int = 0
) -> list[dict[str, Any]]:
    """``docs`` documents of at least ``doc_tokens`` tokens, each with up to ``questions``
    extractive span questions (see the module's docstring)."""
    family = get_family("extractive_qa")
    out = []
    for d in range(docs):
        rng = random.Random(seed + d)
        context = long_document(rng, doc_tokens, count_tokens)
        n_tokens = count_tokens(context)
        doc_id = f"{LONG}-{doc_tokens}-{seed + d}"
        spans = span_questions(context, rng, questions, unique_answer=True, wrapped=True)
        if len(spans) < questions:
            log(f"{doc_id}: only {len(spans)} span questions (asked for {questions})")
        for j, (question, ev) in enumerate(spans):
            meta = {"seed": seed + d, "doc_tokens": n_tokens}
            doc = family.doc(f"{doc_id}-q{j}", context, question, ev, meta)
            out.append(
                {
                    "id": doc.id,
                    "doc_id": doc_id,
                    "context": context,
                    "input": question,
                    "answer": ev.answer,
                    "doc_tokens": n_tokens,
                    "doc": doc,
                }
            )
    return out


# -- one question ------------------------------------------------------------------------


def accounting(st: dict[str, Any]) -> dict[str, Any]:
    """The cost fields of one answer's stats (``Stats.to_dict()``) that the views use.

    ``reused_seconds`` / ``reused_summary_calls``: per-document work a cache spared this
    question (RAPTOR's tree; DTCRS's table of contents and leaf embeddings; a retrieval
    index), as the strategies report it. A question DTCRS routes to plain retrieval makes
    no summary call, cached or not.
    """
    kinds = st.get("llm_calls_by_kind") or {}
    if not kinds:  # mapreduce: map / collapse / reduce, none of them summaries of a tree
        kinds = {"answer": st["llm_calls"]}
    route = st.get("route")
    return {
        "llm_calls": st["llm_calls"],
        "calls_by_kind": {k: int(kinds.get(k, 0)) for k in KINDS},
        "summary_nodes": int(st.get("summary_nodes", 0)),
        "build_seconds": float(st.get("build_seconds", 0.0)),
        "reused_seconds": float(st.get("reused_seconds", 0.0)),
        "reused_summary_calls": 0
        if route == "retrieval"
        else int(st.get("reused_summary_calls", 0)),
        "umap_warmup_seconds": float(st.get("umap_warmup_seconds", 0.0)),
        "tokens": st["prompt_tokens"] + st["completion_tokens"],
        "route": route,
        "tree_cached": st.get("tree_cached"),
        "tree_summary_nodes": st.get("tree_summary_nodes"),
        "tree_build_seconds": st.get("tree_build_seconds"),
        "tree_layers": st.get("tree_layers"),
        "tree_nodes_per_layer": st.get("tree_nodes_per_layer"),
        "leaves": st.get("leaves"),
        "toc_seconds": st.get("toc_seconds", 0.0),
        "toc_cached": st.get("toc_cached"),
        "leaves_cached": st.get("leaves_cached"),
        "subquestions": st.get("subquestions"),
    }


def ask(subset: str, ex: dict[str, Any], llm) -> tuple[Query, Callable[[str], float]]:
    """The question as the strategies take it, and how its reply is scored."""
    if subset == LONG:
        doc, family = ex["doc"], get_family("extractive_qa")
        return doc.query(), lambda text: family.score(doc, text)
    q = build_query(subset, ex, "chat" if llm.chat else "base")
    gold = ex["answer"]
    if subset == "quality":
        gold = {**gold, "options": ex["options"]}
    return q, lambda text: score_answer(subset, text, gold)


def run_one(strategy, subset: str, ex: dict[str, Any], llm) -> dict[str, Any]:
    q, score = ask(subset, ex, llm)
    t0 = time.perf_counter()
    ans = strategy.answer(ex["context"], q, llm)
    wall = time.perf_counter() - t0
    return {
        "id": ex["id"],
        "doc_id": ex["doc_id"],
        "doc_tokens": ex.get("doc_tokens"),
        "prediction": ans.text,
        "score": score(ans.text),
        "seconds": round(wall, 2),
        **accounting(ans.stats.to_dict()),
    }


# -- views -------------------------------------------------------------------------------


def per_question_view(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Summary calls and build seconds per question as if nothing were cached: what each
    question paid plus what a cache spared it (RAPTOR's whole tree; DTCRS's table of
    contents and leaf embeddings; a retrieval index). Questions routed to plain retrieval
    count 0 summary calls."""
    calls = [
        0
        if r["route"] == "retrieval"
        else r["calls_by_kind"]["summarize"] + r["reused_summary_calls"]
        for r in rows
    ]
    build = [r["build_seconds"] + r["reused_seconds"] for r in rows]
    return {"summary_calls": round(mean(calls), 3), "build_seconds": round(mean(build), 3)}


def tree_nodes(row: dict[str, Any]) -> int:
    """Summary nodes of the tree a row's answer read (RAPTOR's cached tree included)."""
    t = row.get("tree_summary_nodes")
    return row["summary_nodes"] if t is None else t


def summarise(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    scores = [r["score"] for r in rows]
    out: dict[str, Any] = {
        "questions": len(rows),
        "score": round(100 * mean(scores), 2),
        "score_ci95": [round(100 * v, 2) for v in bootstrap_interval(scores)],
        "amortised": {
            "summary_nodes": round(mean(r["summary_nodes"] for r in rows), 3),
            "summary_calls": round(mean(r["calls_by_kind"]["summarize"] for r in rows), 3),
            "build_seconds": round(mean(r["build_seconds"] for r in rows), 3),
        },
        "per_question": per_question_view(rows),
        "llm_calls": round(mean(r["llm_calls"] for r in rows), 3),
        "calls_by_kind": {k: round(mean(r["calls_by_kind"][k] for r in rows), 3) for k in KINDS},
        "tokens": round(mean(r["tokens"] for r in rows)),
        "seconds": round(mean(r["seconds"] for r in rows), 2),
    }
    tokens = [r["doc_tokens"] for r in rows if r.get("doc_tokens")]
    if tokens:
        out["doc_tokens"] = round(mean(tokens))
    trees = [r for r in rows if r.get("tree_layers") is not None]
    if trees:  # RAPTOR: each document's whole tree, however much of it a question paid for;
        # DTCRS: the tree of each question routed to one
        out["tree"] = {
            "summary_nodes": round(mean(tree_nodes(r) for r in trees), 1),
            "layers": round(mean(r["tree_layers"] or 0 for r in trees), 1),
            "leaves": round(mean(r["leaves"] or 0 for r in trees), 1),
        }
    if name == "dtcrs":
        out["routes"] = {k: sum(1 for r in rows if r["route"] == k) for k in ("tree", "retrieval")}
        subs = [len(r["subquestions"]) for r in rows if r.get("subquestions")]
        if subs:
            out["subquestions"] = round(mean(subs), 2)
    return out


def against_raptor(res: dict[str, Any]) -> dict[str, Any]:
    """Each DTCRS variant against RAPTOR, in both views: the share of RAPTOR's summary calls
    it does not make, and RAPTOR's build seconds over its own (None where RAPTOR made no
    call, or the variant spent no time)."""
    if "raptor" not in res:
        return {}
    out: dict[str, Any] = {}
    for name in [n for n in res if n.split(":")[0] == "dtcrs"]:
        out[name] = {}
        for view in ("amortised", "per_question"):
            r, d = res["raptor"][view], res[name][view]
            fewer = 1 - d["summary_calls"] / r["summary_calls"] if r["summary_calls"] else None
            faster = r["build_seconds"] / d["build_seconds"] if d["build_seconds"] else None
            out[name][view] = {
                "summary_call_reduction": None if fewer is None else round(fewer, 3),
                "build_speedup": None if faster is None else round(faster, 2),
            }
    return out


def table(result: dict[str, Any]) -> str:
    """A markdown table per subset (per-question view first: the paper's), then DTCRS
    against RAPTOR."""
    head = [
        "strategy", "n", "score [95% CI]", "summary calls / q", "build s / q",
        "amortised calls", "amortised build s", "LLM calls", "tokens", "s / q",
        "tree nodes (layers)", "sub-questions",
    ]  # fmt: skip
    out = []
    against = []
    for subset, per in result["subsets"].items():
        size = result["sizes"]["subsets"].get(subset, {})
        toks = size.get("document_tokens")
        out.append(f"### {subset}" + (f" (document tokens: {toks})" if toks else ""))
        rows = []
        for name, r in per.items():
            if name == "vs_raptor":
                continue
            tree = r.get("tree")
            rows.append(
                [
                    name,
                    r["questions"],
                    estimate(r["score"], *r["score_ci95"]),
                    r["per_question"]["summary_calls"],
                    f"{r['per_question']['build_seconds']:.1f}",
                    r["amortised"]["summary_calls"],
                    f"{r['amortised']['build_seconds']:.1f}",
                    r["llm_calls"],
                    r["tokens"],
                    f"{r['seconds']:.1f}",
                    f"{tree['summary_nodes']} ({tree['layers']})" if tree else "",
                    r.get("subquestions", ""),
                ]
            )
        out += ["", markdown_table(rows, head), ""]
        for name, views in per.get("vs_raptor", {}).items():
            for view, g in views.items():
                fewer, faster = g["summary_call_reduction"], g["build_speedup"]
                against.append(
                    [subset, name, view, "n/a" if fewer is None else f"{100 * fewer:.1f}%",
                     "n/a" if faster is None else f"{faster:.2f}x"]
                )  # fmt: skip
    if against:
        head = ["subset", "DTCRS", "view", "fewer summary calls", "build speedup"]
        out += ["DTCRS against RAPTOR:", "", markdown_table(against, head, align="lllrr")]
    return "\n".join(out)


# -- the ledger --------------------------------------------------------------------------


def row_key(
    subset: str, name: str, opts: dict[str, Any], ex_id: str, args: argparse.Namespace
) -> str:
    """What makes a finished row reusable: subset, strategy and options, question, model,
    embedder (the long subset's ids carry its document size and seed)."""
    opts = {k: v for k, v in opts.items() if k != "cache_dir"}
    return ledger_key(subset, name, opts, ex_id, args.model, args.embedder)


def out_folder(text: str) -> Path | None:
    if not text:
        return None
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise SystemExit(f"trees: --out {out} is a file; --out names a folder now")
    out.mkdir(parents=True, exist_ok=True)
    return out


# -- the run -----------------------------------------------------------------------------


def run_strategy(
    subset: str,
    name: str,
    base: str,
    opts: dict[str, Any],
    examples: list[dict[str, Any]],
    llm,
    args: argparse.Namespace,
    ledger: Ledger | None,
) -> list[dict[str, Any]]:
    """One strategy over a subset's questions: finished rows from the ledger, the others run
    (each appended to the ledger as soon as it is done)."""
    strategy = None
    rows = []
    resumed: set[str] = set()  # documents whose earlier rows came from the ledger
    seen: set[str] = set()  # documents this process has asked about
    for i, ex in enumerate(examples, 1):
        key = row_key(subset, name, opts, ex["id"], args)
        where = f"[{subset} {name} {i}/{len(examples)}] {ex['id']}"
        if ledger is not None and key in ledger:
            rows.append(ledger.rows[key])
            resumed.add(ex["doc_id"])
            log(f"{where}: done in an earlier run")
            continue
        if strategy is None:
            strategy = get_strategy(base, **opts)
        log(f"{where}: running ({ex.get('doc_tokens') or len(ex['context'])} doc tokens/chars)")
        row = run_one(strategy, subset, ex, llm)
        row.update(key=key, subset=subset, strategy=name)
        first_here = ex["doc_id"] not in seen
        seen.add(ex["doc_id"])
        if ex["doc_id"] in resumed and base in ("dtcrs", "retrieval"):
            row["cold_after_resume"] = True  # its in-memory per-document caches were rebuilt
        if first_here and row.get("tree_cached") and ex["doc_id"] not in resumed:
            # a run that crashed before writing any row of this document built the tree:
            # the amortised view misses its cost (the per-question view does not)
            row["tree_from_earlier_run"] = True
        if ledger is not None:
            ledger.put(key, row)
        rows.append(row)
        k = row["calls_by_kind"]
        msg = (
            f"{where}: score {row['score']:.2f}, {row['llm_calls']} LLM calls "
            f"({k['summarize']} summarize), build {row['build_seconds']:.1f} s, "
            f"{row['seconds']:.1f} s"
        )
        if row["tree_layers"] is not None:
            msg += f"; tree of {tree_nodes(row)} summaries in {row['tree_layers']} layers"
        if row["subquestions"]:
            msg += f"; {len(row['subquestions'])} sub-questions"
        if row["route"]:
            msg += f"; route {row['route']}"
        log(msg)
    return rows


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="hf:default")
    ap.add_argument(
        "--data",
        help="a folder of L-Eval files ({quality,scientific_qa}.jsonl); needed by those subsets",
    )
    ap.add_argument("--subsets", default="quality,scientific_qa", help=f"also {LONG}")
    ap.add_argument("--docs", type=int, default=1, help="documents per subset")
    ap.add_argument("--questions", type=int, default=2, help="questions per document")
    ap.add_argument(
        "--doc-tokens", type=int, default=60000, help=f"{LONG}: at least this many tokens"
    )
    ap.add_argument("--seed", type=int, default=0, help=f"{LONG}: first document's seed")
    ap.add_argument(
        "--strategies",
        default="retrieval,raptor,dtcrs,dtcrs:classifier=false,mapreduce",
        help="names, each optionally NAME:k=v+k=v (a variant with options)",
    )
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument(
        "--out", default="", help="folder: results.json, table.md, ledger rows.jsonl, trees/"
    )
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None, llm=None) -> dict[str, Any]:
    """Run the bench; ``llm`` (an LLM object) replaces ``--model``'s (tests)."""
    args = parse_args(argv)
    t_start = time.perf_counter()
    out = out_folder(args.out)
    subsets = [s for s in args.subsets.split(",") if s]
    unknown = [s for s in subsets if s not in SUBSETS and s != LONG]
    if unknown:
        raise SystemExit(f"trees: unknown subset(s) {unknown}; known: {[*SUBSETS, LONG]}")
    if args.data is None and any(s in SUBSETS for s in subsets):
        raise SystemExit(
            f"trees: the subsets {[s for s in subsets if s in SUBSETS]} read L-Eval files: pass "
            f"--data FOLDER (or --subsets {LONG}, which needs none)"
        )
    data = Path(args.data or ".")
    result: dict[str, Any] = {
        "model": args.model,
        "embedder": args.embedder,
        "sizes": {
            "docs_per_subset": args.docs,
            "questions_per_doc": args.questions,
            "subsets": {},
        },
        "strategy_options": {},
        "subsets": {},
        "skipped": {},
    }
    chosen: dict[str, list[dict[str, Any]]] = {}
    for subset in subsets:
        if subset == LONG:
            continue  # built with the model's tokenizer, below
        if not (data / f"{SUBSETS[subset]}.jsonl").is_file():
            result["skipped"][subset] = f"{data / (SUBSETS[subset] + '.jsonl')} not found"
            continue
        chosen[subset] = pick(data, subset, args.docs, args.questions)
        result["sizes"]["subsets"][subset] = {
            "documents": len({e["doc_id"] for e in chosen[subset]}),
            "questions": len(chosen[subset]),
            "document_chars": [len(e["context"]) for e in chosen[subset]][:: args.questions],
        }
    if not chosen and LONG not in subsets:
        print(json.dumps(result, indent=1))
        return result

    from chunkwise.embed import get_embedder
    from chunkwise.llm import load_llm

    # the embedder and umap first: a missing extra fails before the model's long load
    t0 = time.perf_counter()
    get_embedder(args.embedder).encode(["warm up the encoder"])
    result["embedder_load_seconds"] = round(time.perf_counter() - t0, 1)
    result["umap_warmup_seconds"] = round(clustering.warm_up(), 1)
    own_llm = llm is None
    t0 = time.perf_counter()
    if own_llm:
        llm = load_llm(args.model)
    result["model_load_seconds"] = round(time.perf_counter() - t0, 1)
    log(f"loaded: {result}")
    if LONG in subsets:
        t0 = time.perf_counter()
        chosen[LONG] = long_examples(
            args.docs, args.questions, args.doc_tokens, llm.count_tokens, args.seed
        )
        by_doc = {e["doc_id"]: e for e in chosen[LONG]}
        result["sizes"]["subsets"][LONG] = {
            "documents": len(by_doc),
            "questions": len(chosen[LONG]),
            "document_chars": [len(e["context"]) for e in by_doc.values()],
            "document_tokens": [e["doc_tokens"] for e in by_doc.values()],
            "build_seconds": round(time.perf_counter() - t0, 1),
        }
        log(f"{LONG}: {result['sizes']['subsets'][LONG]}")

    common = {
        "retrieval": {"embedder": args.embedder},
        "raptor": {"embedder": args.embedder},
        "dtcrs": {"embedder": args.embedder},
    }
    if out is not None:  # a resumed document reloads its tree instead of paying for it again
        common["raptor"]["cache_dir"] = str(out / "trees")
    variants: dict[str, tuple[str, dict[str, str]]] = {}
    for item in (s for s in args.strategies.split(",") if s):
        base, _, opts = item.partition(":")
        extra = dict(kv.split("=", 1) for kv in opts.split("+") if kv)
        variants[item] = (base, {**common.get(base, {}), **extra})
    result["strategy_options"] = {k: v[1] for k, v in variants.items()}
    ledger = Ledger(out / "rows.jsonl") if out is not None else None
    try:
        for subset, examples in chosen.items():
            per: dict[str, Any] = {}
            for name, (base, opts) in variants.items():
                rows = run_strategy(subset, name, base, opts, examples, llm, args, ledger)
                if not rows:
                    continue
                per[name] = summarise(base, rows)
                per[name]["rows"] = [{k: r.get(k) for k in ROW_KEYS} for r in rows]
            per["vs_raptor"] = against_raptor(per)
            result["subsets"][subset] = per
    finally:
        if ledger is not None:
            ledger.close()
        if own_llm:
            llm.close()
    result["total_seconds"] = round(time.perf_counter() - t_start, 1)
    text = json.dumps(result, indent=1)
    md = table(result)
    if out is not None:
        atomic_write_text(out / "results.json", text + "\n")
        atomic_write_text(out / "table.md", md + "\n")
    print(text)
    print(md)
    return result


if __name__ == "__main__":
    main()
