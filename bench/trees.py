"""Summary trees on real long documents: retrieval vs RAPTOR vs DTCRS vs MapReduce.

    flock /tmp/chunkwise-cpu.lock .venv/bin/python bench/trees.py --docs 1 --questions 2

Data: L-Eval's QuALITY and QASPER subsets (../shared/data/leval/{quality,scientific_qa}.jsonl);
a missing file is skipped and said so in the JSON. For each subset the first ``--docs``
documents and their first ``--questions`` questions are asked to every strategy; one
strategy instance per subset, so RAPTOR's tree of a document is built once and reused by
that document's later questions (and DTCRS's table of contents likewise).

Per strategy and subset: score (QuALITY accuracy; QASPER answer F1 against L-Eval's single
reference), summary nodes, LLM calls (by kind) and build seconds per question, reported
both ways where a per-document cost is cached:

* ``amortised`` — what each question paid as measured (the first question of a document
  builds RAPTOR's tree, later ones reuse it: the mean is the tree's cost over the
  document's questions);
* ``per_question`` — as if nothing were cached: RAPTOR's whole tree charged to every
  question, DTCRS's table of contents and leaf embeddings charged to every question (and a
  retrieval index likewise); a question DTCRS routes to plain retrieval counts 0 summary
  calls either way.

umap's first-fit compilation (numba) is paid once before anything is timed and reported
apart (``umap_warmup_seconds``); so are the model and embedder loads.

Goals (the DTCRS paper's efficiency claims): DTCRS makes >= 90% fewer summary calls than
RAPTOR and builds >= 4x faster, per question.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from statistics import mean
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from chunkwise.data.leval import load_leval  # noqa: E402
from chunkwise.eval.qa_benchmarks import build_query, score_answer  # noqa: E402
from chunkwise.strategies import clustering, get_strategy  # noqa: E402

SUBSETS = {"quality": "quality", "scientific_qa": "scientific_qa"}
KINDS = ("toc", "classify", "decompose", "summarize", "answer")


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
        "tree_summary_nodes": st.get("tree_summary_nodes"),
        "tree_build_seconds": st.get("tree_build_seconds"),
        "toc_seconds": st.get("toc_seconds", 0.0),
        "toc_cached": st.get("toc_cached"),
        "leaves_cached": st.get("leaves_cached"),
        "subquestions": st.get("subquestions"),
    }


def run_one(strategy, subset: str, ex: dict[str, Any], llm) -> dict[str, Any]:
    q = build_query(subset, ex, "chat" if llm.chat else "base")
    t0 = time.perf_counter()
    ans = strategy.answer(ex["context"], q, llm)
    wall = time.perf_counter() - t0
    gold = ex["answer"]
    if subset == "quality":
        gold = {**gold, "options": ex["options"]}
    return {
        "id": ex["id"],
        "doc_id": ex["doc_id"],
        "prediction": ans.text,
        "score": score_answer(subset, ans.text, gold),
        "seconds": round(wall, 2),
        **accounting(ans.stats.to_dict()),
    }


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


def summarise(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "questions": len(rows),
        "score": round(100 * mean(r["score"] for r in rows), 2),
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
    if name == "dtcrs":
        out["routes"] = {k: sum(1 for r in rows if r["route"] == k) for k in ("tree", "retrieval")}
    return out


def goals(res: dict[str, Any]) -> dict[str, Any]:
    """DTCRS (and each DTCRS variant) against RAPTOR, both ways."""
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
                "fewer_calls_goal_met": fewer is not None and fewer >= 0.9,
                "speedup_goal_met": faster is not None and faster >= 4.0,
            }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="hf:default")
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "leval"))
    ap.add_argument("--subsets", default="quality,scientific_qa")
    ap.add_argument("--docs", type=int, default=1, help="documents per subset")
    ap.add_argument("--questions", type=int, default=2, help="questions per document")
    ap.add_argument(
        "--strategies",
        default="retrieval,raptor,dtcrs,dtcrs:classifier=false,mapreduce",
        help="names, each optionally NAME:k=v+k=v (a variant with options)",
    )
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args()

    t_start = time.perf_counter()
    data = Path(args.data)
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
    for subset in args.subsets.split(","):
        if not (data / f"{SUBSETS[subset]}.jsonl").is_file():
            result["skipped"][subset] = f"{data / (SUBSETS[subset] + '.jsonl')} not found"
            continue
        chosen[subset] = pick(data, subset, args.docs, args.questions)
        result["sizes"]["subsets"][subset] = {
            "documents": len({e["doc_id"] for e in chosen[subset]}),
            "questions": len(chosen[subset]),
            "document_chars": [len(e["context"]) for e in chosen[subset]][:: args.questions],
        }
    if not chosen:
        print(json.dumps(result, indent=1))
        return

    from chunkwise.embed import get_embedder
    from chunkwise.llm import load_llm

    t0 = time.perf_counter()
    llm = load_llm(args.model)
    result["model_load_seconds"] = round(time.perf_counter() - t0, 1)
    t0 = time.perf_counter()
    get_embedder(args.embedder).encode(["warm up the encoder"])
    result["embedder_load_seconds"] = round(time.perf_counter() - t0, 1)
    result["umap_warmup_seconds"] = round(clustering.warm_up(), 1)
    log(f"loaded: {result}")

    common = {
        "retrieval": {"embedder": args.embedder},
        "raptor": {"embedder": args.embedder},
        "dtcrs": {"embedder": args.embedder},
    }
    variants: dict[str, tuple[str, dict[str, str]]] = {}
    for item in (s for s in args.strategies.split(",") if s):
        base, _, opts = item.partition(":")
        extra = dict(kv.split("=", 1) for kv in opts.split("+") if kv)
        variants[item] = (base, {**common.get(base, {}), **extra})
    result["strategy_options"] = {k: v[1] for k, v in variants.items()}
    for subset, examples in chosen.items():
        per: dict[str, Any] = {}
        for name, (base, opts) in variants.items():
            strategy = get_strategy(base, **opts)
            rows = []
            for ex in examples:
                row = run_one(strategy, subset, ex, llm)
                rows.append(row)
                log(f"{subset} {name} {ex['id']}: {json.dumps(row)[:400]}")
            per[name] = summarise(base, rows)
            per[name]["rows"] = [
                {
                    k: r[k]
                    for k in (
                        "id",
                        "score",
                        "summary_nodes",
                        "llm_calls",
                        "build_seconds",
                        "seconds",
                        "route",
                        "prediction",
                    )
                }
                for r in rows
            ]
        per["goals"] = goals(per)
        result["subsets"][subset] = per
    result["total_seconds"] = round(time.perf_counter() - t_start, 1)
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
