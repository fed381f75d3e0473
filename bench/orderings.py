"""Chain-of-Agents accuracy under the four chunk orderings (default, dense, chowliu, dfs).

    flock /tmp/chunkwise-cpu.lock .venv/bin/python bench/orderings.py            # ~15 min, 2 cores
    .venv/bin/python bench/orderings.py --skip-model                             # scripted only

Two tasks:

1. The synthetic multi-hop task (:mod:`chunkwise.data.multihop`): n documents of short sections,
   one section per chunk, the answer's chain of facts spread over distant sections among
   distractor chains; a memory cap that holds the answer's chain but not every fact.
   Read by (a) a scripted reader that keeps only what its cap allows (chain facts it can
   recognise first, then the newest others) and (b) the model.
2. The shared L-Eval QuALITY subset with the model: the first question of each of the first
   documents, each document cut to its first ``--quality-doc-tokens`` tokens (so that the run
   fits a 2-core CPU; a question whose evidence lies past the cut cannot be answered).

Also printed: how well the similarities see the multi-hop structure (root = the chain's head;
the chain's links in the spanning tree; the position at which the last chain fact is read).
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.data import multihop as mh
from chunkwise.llm import LLM, Completion, Request, load_llm
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.ordering import ORDERINGS, apply_ordering, similarities

METHODS = tuple(ORDERINGS)
DEFAULT_LEVAL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "leval"


class CachedEmbedder:
    """Encodes each distinct text once (the four orderings embed the same chunks)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if todo:
            for t, v in zip(todo, self.inner.encode(todo), strict=True):
                self.cache[t] = v
        return np.stack([self.cache[t] for t in texts])

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.inner.similarity(a, b)


class DedupLLM(LLM):
    """Answers a request seen before (same prompt, same params) from memory, and sends each
    distinct request of a batch once: with greedy decoding the orderings' first steps, which
    share the root chunk and the empty memory, cost one call."""

    def __init__(self, inner: LLM):
        self.inner = inner
        self.chat = inner.chat
        self.spec = inner.spec
        self.cache: dict[tuple, Completion] = {}
        self.hits = 0

    @property
    def context_window(self) -> int:
        return self.inner.context_window

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        fn = getattr(self.inner, "count_tokens_batch", None)
        return fn(texts) if fn else [self.inner.count_tokens(t) for t in texts]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return self.inner.token_offsets(text)

    def prompt_tokens(self, prompt: Any) -> int:
        return self.inner.prompt_tokens(prompt)

    def _key(self, r: Request) -> tuple:
        p = r.prompt if isinstance(r.prompt, str) else json.dumps(r.prompt)
        return (p, r.params)

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        keys = [self._key(r) for r in requests]
        todo = {k: r for k, r in zip(keys, requests, strict=True) if k not in self.cache}
        self.hits += len(keys) - len(todo)
        if todo:
            for k, c in zip(todo, self.inner.generate(list(todo.values())), strict=True):
                self.cache[k] = c
        return [self.cache[k] for k in keys]


def _accuracy(pairs: list[tuple[str, str]]) -> float:
    return round(sum(mh.score(p, a) for p, a in pairs) / max(1, len(pairs)), 4)


def diagnostics(records: list[dict], embedder: Any, kind: str) -> dict[str, Any]:
    root = links = 0
    last: dict[str, list[int]] = {m: [] for m in METHODS}
    for r in records:
        S, q = similarities(r["meta"]["sections"], r["input"], kind, embedder)
        chain = r["meta"]["chain"]
        cl = apply_ordering("chowliu", S, q)
        root += cl.root == chain[0]
        tree = {(i, j) for i, j, _ in cl.edges}
        links += all((min(a, b), max(a, b)) in tree for a, b in itertools.pairwise(chain))
        for m in METHODS:
            order = apply_ordering(m, S, q).order
            last[m].append(max(order.index(c) for c in chain))
    n = len(records)
    return {
        "root_is_chain_head": round(root / n, 4),
        "chain_links_in_tree": round(links / n, 4),
        "mean_step_reading_last_chain_fact": {
            m: round(float(np.mean(v)), 3) for m, v in last.items()
        },
    }


def run_multihop(
    llm: LLM, records: list[dict], memory_tokens: int, embedder: Any, kind: str, batch: int
) -> dict[str, Any]:
    chunk_tokens = mh.chunk_tokens_for(records, llm.count_tokens)
    out: dict[str, Any] = {"memory_tokens": memory_tokens, "chunk_tokens": chunk_tokens}
    acc, secs, trunc, chunks = {}, {}, {}, set()
    preds: dict[str, list[str]] = {}
    for m in METHODS:
        s = get_strategy(
            "chain_of_agents",
            memory_tokens=memory_tokens,
            chunk_tokens=chunk_tokens,
            ordering=m,
            similarity=kind,
        )
        t0 = time.perf_counter()
        answers = []
        for b in range(0, len(records), batch):
            part = records[b : b + batch]
            answers += s.answer_many(
                [(r["context"], Query(r["input"])) for r in part], llm, embedder=embedder
            )
        secs[m] = round(time.perf_counter() - t0, 1)
        acc[m] = _accuracy([(a.text, r["answer"]) for a, r in zip(answers, records, strict=True)])
        trunc[m] = sum(a.stats.extra["memory_truncations"] for a in answers)
        chunks.update(a.stats.extra["chunks"] for a in answers)
        preds[m] = [a.text for a in answers[:3]]
        print(
            f"[orderings] {llm.spec or 'scripted'} {m}: acc {acc[m]} in {secs[m]} s",
            file=sys.stderr,
            flush=True,
        )
    out.update(
        accuracy=acc,
        seconds=secs,
        memory_truncations=trunc,
        chunks_per_document=sorted(chunks),
        sample_predictions=preds,
    )
    return out


def run_quality(
    llm: LLM,
    path: Path,
    questions: int,
    doc_tokens: int,
    chunk_tokens: int,
    memory_tokens: int,
    embedder: Any,
    kind: str,
) -> dict[str, Any]:
    from chunkwise.data.leval import load_leval
    from chunkwise.eval.qa_metrics import quality_correct
    from chunkwise.strategies.chain_of_agents import truncate_tokens

    examples, _ = load_leval("quality", path)
    picked, seen = [], set()
    for ex in examples:  # the first question of each document
        if ex["doc_id"] not in seen:
            seen.add(ex["doc_id"])
            picked.append(ex)
        if len(picked) == questions:
            break
    items = []
    for ex in picked:
        doc, _ = truncate_tokens(ex["context"], llm, doc_tokens)
        items.append(
            (doc, Query(ex["input"], task="multiple_choice", options=tuple(ex["options"])))
        )
    acc, secs = {}, {}
    letters: dict[str, list[str]] = {}
    for m in METHODS:
        s = get_strategy(
            "chain_of_agents",
            memory_tokens=memory_tokens,
            chunk_tokens=chunk_tokens,
            ordering=m,
            similarity=kind,
        )
        t0 = time.perf_counter()
        answers = s.answer_many(items, llm, embedder=embedder)
        secs[m] = round(time.perf_counter() - t0, 1)
        acc[m] = round(
            sum(
                quality_correct(a.text, ex["answer"]["letter"], ex["options"])
                for a, ex in zip(answers, picked, strict=True)
            )
            / len(picked),
            4,
        )
        letters[m] = [a.text.strip()[:12] for a in answers]
        print(f"[orderings] quality {m}: acc {acc[m]} in {secs[m]} s", file=sys.stderr, flush=True)
    gold = [ex["answer"]["letter"] for ex in picked]
    return {
        "questions": len(picked),
        "doc_tokens": doc_tokens,
        "chunk_tokens": chunk_tokens,
        "memory_tokens": memory_tokens,
        "chance": 0.25,
        "majority_letter_rate": round(max(gold.count(x) for x in "ABCD") / len(gold), 4),
        "accuracy": acc,
        "seconds": secs,
        "predictions": letters,
        "gold": gold,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="hf:default?batch_size=64&max_batch_tokens=65536")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--similarity", default="dense", choices=["dense", "bm25"])
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hops", type=int, default=3)
    ap.add_argument("--distractor-chains", type=int, default=1)
    ap.add_argument("--filler-sections", type=int, default=2)
    ap.add_argument("--section-sentences", type=int, default=2)
    ap.add_argument("--memory-tokens", type=int, default=40, help="model run's memory cap")
    ap.add_argument("--batch", type=int, default=50, help="documents stepped together")
    ap.add_argument("--quality", default=str(DEFAULT_LEVAL / "quality.jsonl"))
    ap.add_argument("--quality-questions", type=int, default=6)
    ap.add_argument("--quality-doc-tokens", type=int, default=768)
    ap.add_argument("--quality-chunk-tokens", type=int, default=256)
    ap.add_argument("--quality-memory-tokens", type=int, default=48)
    ap.add_argument("--skip-model", action="store_true", help="scripted reader only")
    ap.add_argument("--skip-quality", action="store_true")
    args = ap.parse_args()
    t_all = time.perf_counter()

    from chunkwise.embed import get_embedder

    embedder = CachedEmbedder(get_embedder(args.embedder)) if args.similarity == "dense" else None
    result: dict[str, Any] = {
        "embedder": args.embedder if embedder else None,
        "similarity": args.similarity,
        "methods": list(METHODS),
    }
    shape = dict(
        hops=args.hops,
        distractor_chains=args.distractor_chains,
        filler_sections=args.filler_sections,
        section_sentences=args.section_sentences,
    )

    # (a) scripted readers on the task, and on a 2-hop variant; the cap holds the answer's
    # chain (the longest one over the records) and little else
    scripted: dict[str, Any] = {}
    for name, shp in (("task", shape), ("2hop", dict(shape, hops=2, distractor_chains=2))):
        probe = mh.memory_cap_reader(10**6)
        recs = mh.generate(n=args.n, seed=args.seed, **shp)
        cap = max(
            probe.count_tokens(" ".join(r["meta"]["facts"][str(p)] for p in r["meta"]["chain"]))
            for r in recs
        )
        reader = mh.memory_cap_reader(cap)
        res = run_multihop(reader, recs, cap, embedder, args.similarity, args.batch)
        res.pop("sample_predictions")
        scripted[name] = {
            "shape": shp,
            "cap_tokens": cap,
            **res,
            "structure": diagnostics(recs, embedder, args.similarity),
        }
    result["multihop_scripted"] = scripted

    if not args.skip_model:
        t0 = time.perf_counter()
        base = load_llm(args.model)
        llm = DedupLLM(base)
        result["model"] = args.model
        result["model_load_seconds"] = round(time.perf_counter() - t0, 1)
        recs = mh.generate(n=args.n, seed=args.seed, **shape)
        sizes = [llm.count_tokens(r["context"]) for r in recs]
        res = run_multihop(llm, recs, args.memory_tokens, embedder, args.similarity, args.batch)
        result["multihop_model"] = {
            "n": len(recs),
            "shape": shape,
            "document_tokens": {"mean": round(float(np.mean(sizes)), 1), "max": max(sizes)},
            **res,
            "structure": diagnostics(recs, embedder, args.similarity),
        }
        if not args.skip_quality and Path(args.quality).is_file():
            result["quality_model"] = run_quality(
                llm,
                Path(args.quality),
                args.quality_questions,
                args.quality_doc_tokens,
                args.quality_chunk_tokens,
                args.quality_memory_tokens,
                embedder,
                args.similarity,
            )
        elif not args.skip_quality:
            result["quality_model"] = {"skipped": f"{args.quality} not found"}
        result["dedup_cache_hits"] = llm.hits
        base.close()
    result["seconds"] = round(time.perf_counter() - t_all, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
