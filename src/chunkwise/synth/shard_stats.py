"""The stats of a synthesis shard, from its ledger entries (one per document) and the runs
that wrote them, and of all shards added together."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any


def _add_stage(total: dict[str, dict[str, float]], stages: dict[str, dict[str, float]]) -> None:
    for stage, s in stages.items():
        t = total.setdefault(
            stage, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        )
        for k in t:
            t[k] += s.get(k, 0)


def shard_stats(entries: Iterable[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Stats over ledger entries (one per document) and the runs that wrote them."""
    docs, skipped = 0, Counter()
    examples = 0
    with_examples = 0
    level_hist: Counter[int] = Counter()
    kind_mix: Counter[str] = Counter()
    levels_hist: Counter[int] = Counter()
    leaves: list[int] = []
    mr_chunks: list[int] = []
    llm_total: dict[str, dict[str, float]] = {}
    q_generated = 0
    q_dropped: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    summary_calls = 0
    doc_seconds = 0.0
    for e in entries:
        docs += 1
        st = e.get("stats") or {}
        if e.get("status") != "done":
            skipped[e.get("reason") or "unknown"] += 1
        if e.get("pyramid"):
            leaves.append(int(st.get("leaves", 0)))
            levels_hist[int(st.get("levels", 0))] += 1
            summary_calls += int(st.get("summary_calls", 0))
        _add_stage(llm_total, st.get("llm") or {})
        q = st.get("questions") or {}
        q_generated += int(q.get("generated", 0))
        q_dropped.update(q.get("dropped") or {})
        repairs.update(st.get("repairs") or {})
        doc_seconds += float(st.get("seconds", 0.0))
        recs = e.get("records") or []
        if recs:
            with_examples += 1
            mr_chunks.append(len(recs[0]["meta"]["mapreduce"]["chunks"]))
        for r in recs:
            examples += 1
            level_hist[r["meta"]["node_level"]] += 1
            kind_mix[r["meta"]["node_kind"]] += 1
    wall = sum(float(r.get("seconds", 0.0)) for r in runs)
    failed = list(runs[-1].get("failed") or []) if runs else []
    built = len(leaves)

    def dist(xs: list[int]) -> dict[str, float]:
        if not xs:
            return {"mean": 0.0, "min": 0, "max": 0, "total": 0}
        return {
            "mean": round(sum(xs) / len(xs), 3),
            "min": min(xs),
            "max": max(xs),
            "total": sum(xs),
        }

    for t in llm_total.values():
        t["seconds"] = round(t["seconds"], 3)
    all_calls = sum(int(t["calls"]) for t in llm_total.values())
    return {
        "documents": {
            "total": docs,
            "with_examples": with_examples,
            "pyramids_built": built,
            "skipped": dict(skipped),
            "duplicates_in_source": int(runs[-1].get("duplicates", 0)) if runs else 0,
            "errors_last_run": runs[-1].get("errors", {}) if runs else {},
            # skipped after their retries in the last run (a rerun retries them)
            "failed": len(failed),
        },
        "failed_documents": failed,
        "examples": examples,
        "level_histogram": {str(k): v for k, v in sorted(level_hist.items())},
        "question_node_mix": {k: kind_mix.get(k, 0) for k in ("leaf", "mid", "root")},
        "pyramid_levels_histogram": {str(k): v for k, v in sorted(levels_hist.items())},
        "chunks_per_document": {
            "pyramid_leaves": dist(leaves),
            "mapreduce_chunks": dist(mr_chunks),
        },
        "llm": {
            "by_stage": llm_total,
            "calls": all_calls,
            "prompt_tokens": int(sum(t["prompt_tokens"] for t in llm_total.values())),
            "completion_tokens": int(sum(t["completion_tokens"] for t in llm_total.values())),
            "summary_calls_per_leaf": round(summary_calls / sum(leaves), 4) if sum(leaves) else 0.0,
        },
        "questions": {"generated": q_generated, "kept": examples, "dropped": dict(q_dropped)},
        "repairs": dict(repairs),
        "seconds": {
            "wall": round(wall, 3),
            "document_sum": round(doc_seconds, 3),
            "documents_per_hour": round(3600 * docs / wall, 2) if wall > 0 else None,
        },
        "runs": len(runs),
    }


def merge_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Add shard stats together (counters add; means are recomputed from totals)."""
    if len(parts) == 1:
        return parts[0]

    def add(a: Any, b: Any) -> Any:
        if isinstance(a, dict) and isinstance(b, dict):
            return {k: add(a.get(k), b.get(k)) for k in {**a, **b}}
        if a is None:
            return b
        if b is None:
            return a
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            return a + b
        return a

    merged: Any = parts[0]
    for p in parts[1:]:
        merged = add(merged, p)
    # the failed documents of every shard, in one order whatever order the shards finished in
    merged["failed_documents"] = sorted(
        (f for p in parts for f in p.get("failed_documents") or []),
        key=lambda f: (str(f.get("source_id")), str(f.get("origin"))),
    )
    for key in ("pyramid_leaves", "mapreduce_chunks"):
        ds = [p["chunks_per_document"][key] for p in parts]
        n = [
            p["documents"]["pyramids_built" if key == "pyramid_leaves" else "with_examples"]
            for p in parts
        ]
        total = sum(d["total"] for d in ds)
        merged["chunks_per_document"][key] = {
            "mean": round(total / sum(n), 3) if sum(n) else 0.0,
            "min": min((d["min"] for d, k in zip(ds, n, strict=True) if k), default=0),
            "max": max((d["max"] for d in ds), default=0),
            "total": total,
        }
    leaves = merged["chunks_per_document"]["pyramid_leaves"]["total"]
    calls = merged["llm"]["by_stage"].get("summary", {}).get("calls", 0)
    merged["llm"]["summary_calls_per_leaf"] = round(calls / leaves, 4) if leaves else 0.0
    wall = max(p["seconds"]["wall"] for p in parts)  # shards run side by side
    merged["seconds"]["wall"] = wall
    merged["seconds"]["documents_per_hour"] = (
        round(3600 * merged["documents"]["total"] / wall, 2) if wall > 0 else None
    )
    return merged
