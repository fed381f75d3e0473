"""Pyramid-Align synthesis cost: LLM calls and tokens per document by stage, documents/hour.

    flock /tmp/chunkwise-cpu.lock .venv/bin/python bench/synth_cost.py [--model hf:default]
        [--docs 5] [--min-tokens 8000] [--max-tokens 20000] [--window 4096] [--concurrency 4]

Documents: Python's own language-reference topics (``pydoc_data.topics``, shipped with every
CPython, PSF License), concatenated in a rotating order and cut at a paragraph boundary at
evenly spaced lengths from --min-tokens to --max-tokens (tokens of --model). No network.

Prints one JSON object: per document its tokens, leaves, levels and calls/tokens by stage;
totals; ``summary_calls_per_leaf`` and ``documents_per_hour`` over the whole run's wall time
(model load reported apart).
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path


def reference_text() -> list[str]:
    import pydoc_data.topics as topics

    return [topics.topics[k].strip() for k in sorted(topics.topics)]


def make_documents(llm, n: int, lo: int, hi: int) -> list[tuple[str, str]]:
    """``n`` documents of evenly spaced token lengths in [lo, hi], each starting elsewhere."""
    parts = reference_text()
    docs = []
    for i in range(n):
        target = lo + (hi - lo) * i // max(1, n - 1)
        start = (i * len(parts)) // n
        order = parts[start:] + parts[:start]
        paras = [p for part in order for p in part.split("\n\n") if p.strip()]
        out: list[str] = []
        used = 0
        for p in paras:
            k = llm.count_tokens(p) + 1
            if used + k > target:
                break
            out.append(p)
            used += k
        docs.append((f"pydoc-{i}-{target}", "\n\n".join(out)))
    return docs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hf:default")
    ap.add_argument("--docs", type=int, default=5)
    ap.add_argument("--min-tokens", type=int, default=8000)
    ap.add_argument("--max-tokens", type=int, default=20000)
    ap.add_argument("--window", type=int, default=4096)
    ap.add_argument("--questions-per-doc", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out", help="keep the synthesis folder here (default: a temporary one)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from chunkwise.embed import get_embedder
    from chunkwise.llm import load_llm
    from chunkwise.synth import SynthConfig, run_synth

    t0 = time.perf_counter()
    llm = load_llm(args.model)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    embedder = get_embedder("minilm")
    embedder.encode(["warm up"])
    embed_load_s = time.perf_counter() - t0

    docs = make_documents(llm, args.docs, args.min_tokens, args.max_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out) if args.out else Path(tmp)
        src = root / "docs"
        src.mkdir(parents=True, exist_ok=True)
        for name, text in docs:
            (src / f"{name}.txt").write_text(text)
        out = root / "synth"
        cfg = SynthConfig(
            docs=str(src),
            out=str(out),
            model=args.model,
            window=args.window,
            questions_per_doc=args.questions_per_doc,
            concurrency=args.concurrency,
            progress=False,
        )
        t0 = time.perf_counter()
        stats = run_synth(cfg, llm=llm, embedder=embedder)
        wall = time.perf_counter() - t0
        ledger = out / "work" / "docs-part-00000-of-00001.jsonl"
        entries = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]

    tokens = {f"{name}.txt": llm.count_tokens(text) for name, text in docs}
    per_doc = []
    for e in entries:
        st = e["stats"]
        per_doc.append(
            {
                "document": e["source_id"],
                "tokens": tokens.get(e["source_id"]),
                "status": e["status"] if e["status"] == "done" else f"skipped: {e['reason']}",
                "leaves": st.get("leaves"),
                "levels": st.get("levels"),
                "summary_calls": st.get("summary_calls"),
                "summary_calls_per_leaf": round(st["summary_calls"] / st["leaves"], 3)
                if st.get("leaves")
                else None,
                "examples": len(e["records"]),
                "llm_by_stage": st.get("llm"),
                "seconds": st.get("seconds"),
            }
        )
    n = len(entries)
    by_stage = stats["llm"]["by_stage"]
    result = {
        "bench": "synth_cost",
        "model": args.model,
        "text_source": "pydoc_data.topics (CPython language reference, PSF License)",
        "window": args.window,
        "questions_per_doc": args.questions_per_doc,
        "concurrency": args.concurrency,
        "model_load_s": round(load_s, 2),
        "embedder_load_s": round(embed_load_s, 2),
        "documents": n,
        "examples": stats["examples"],
        "wall_s": round(wall, 1),
        "documents_per_hour": round(3600 * n / wall, 2) if wall else None,
        "summary_calls_per_leaf": stats["llm"]["summary_calls_per_leaf"],
        "per_document_mean_by_stage": {
            stage: {k: round(v / n, 1) for k, v in s.items()} for stage, s in by_stage.items()
        }
        if n
        else {},
        "totals_by_stage": by_stage,
        "questions": stats["questions"],
        "repairs": stats["repairs"],
        "per_document": per_doc,
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
