"""Chain-of-Agents accuracy under the four chunk orderings (default, dense, chowliu, dfs) on
documents whose evidence is a tree, with a memory that cannot hold every fact.

    .venv/bin/python bench/orderings.py --skip-model --out runs/bench/orderings      # control
    .venv-vllm/bin/python bench/orderings.py --model vllm:default-coa --n 100 \\
        --out runs/bench/orderings_coa                                               # real model

**Task** (:func:`chunkwise.data.multihop.generate_tree`): variable tracking whose assignments
form a tree, one root holding a value and ``--branches`` chains of ``--depth`` variables
copying it, among ``--distractor-trees`` trees of the same shape holding other values and
``--filler-sections`` sections without a fact; one section per chunk, sections in a random
order. Two questions, each a setting: ``all`` ("Which variables are assigned the value V?",
needs the root and every branch) and ``leaf`` ("Which value is VAR X assigned?", needs the root
and one branch). A reader can tell that an assignment matters only once it has read the one it
copies from, so what survives a tight memory depends on the order: the Chow-Liu claim is that
a breadth-first walk of the similarity tree from the query's chunk keeps related chunks
together and loses less.

**Memory caps that bind**: each ``--caps`` factor times the tokens of the answer's evidence
facts (the largest over the documents, in the reader's tokenizer); the results say for every
setting whether the cap is below the tokens of all the document's facts (``binds``), i.e.
whether the memory cannot hold every fact.

**Arms**: ``scripted`` (the control, always run): :func:`~chunkwise.data.multihop.tree_reader`,
a capped reader that keeps the facts it knows matter, then the newest others; ``model``
(``--model``, unless ``--skip-model``): the real model with the strategy's own prompts
(``--prompts auto``: the ``mr`` set, rewrite workers, for ``default-coa`` and ``default-mr``;
``--model`` defaults to ``hf:default-coa``, the head trained for this).
Documents are batched with ``ChainOfAgents.answer_many`` (``--batch`` documents stepped
together, one ``generate`` wave per worker step), and identical requests are sent once (the
orderings' first steps often share the query's chunk and the empty memory).

**Reported** per setting and ordering: accuracy (exact: ``all`` names exactly the tree's
variables; ``leaf`` gives the value) with n and its 95% Wilson interval, RULER's recall for
``all``, memory truncations, calls and tokens; per setting, chowliu minus each other ordering
with a paired bootstrap 95% interval and an exact McNemar p-value (the same documents are read
under every ordering), and the winner, called clear only when McNemar separates it from every
other ordering at p < 0.05. Also how well the
similarities see the tree (``structure``): whether the Chow-Liu root is the evidence's entry
point, the share of the answer tree's edges in the spanning tree, and per ordering the share
of evidence edges read parent first.

**Ledger**: every finished (arm, question, cap, ordering) cell is appended to
``--out/cells.jsonl`` at once, so a crash loses at most one cell; a rerun with the same
settings skips finished cells. Writes ``results.json``, ``table.md`` and ``orderings.png`` to
``--out`` and prints the table.

The earlier QuALITY part (6 questions on documents cut to 768 tokens) is gone: at that size
it could not tell the orderings apart, so it was neither cheap enough to grow nor honest as
it was.

**Measured** (defaults: 3 branches of depth 2, one distractor tree, 2 filler sections: 16
sections per document; n = 100 per cell; 2-core CPU):

- Scripted control, MiniLM similarities: chowliu has the highest accuracy in all four
  settings (``all`` 1.0x: 64 [54, 73] against dfs 61, dense 60, default 30; ``leaf`` 1.0x: 97
  against dfs 96, dense 86, default 42) but beats dfs and dense clearly in none but ``leaf``
  against dense (+11, paired bootstrap [4, 18]); every ordering beats the document order. With BM25,
  dense wins ``leaf`` outright (100 against chowliu 87) and no ordering wins ``all``. The
  similarities see the tree poorly: the spanning tree holds 40-43% of the answer tree's edges
  with MiniLM and 19-23% with BM25, so the claim is tested against a weak proxy of the
  dependencies, not against the dependencies themselves.
- ``hf:default-mr`` (the MapReduce head, with the ``mr`` set): its workers carry the first
  relevant fact forward but do not add later ones, and its manager answers from that one fact:
  ``--model vllm:default-mr --n 4`` gave 0 of 4 in all eight cells. It measures the adapter,
  not the order.
- ``vllm:default-coa`` (the Chain-of-Agents head of ``make default-coa``, trained on the
  oracle's rewrites of other seeds of this task), ``--n 100``; ``leaf``, cap 34 tokens
  (binds): default 8 [4, 15], dense 24 [17, 33], **chowliu 39 [30, 49]**, dfs 32 [24, 42].
  chowliu minus default +31 (paired bootstrap [21, 41], McNemar p < 0.001), minus dense +15
  ([5, 25], p = 0.011), minus dfs +7 ([-2, 16], p = 0.21): chowliu wins but not clearly, the
  same ranking as the scripted control at n = 100 (42 / 86 / 97 / 96). On ``all`` (cap 77)
  the head scored 0 of 100 under every ordering: its manager (64 training examples) repeats
  variable names instead of listing the tree's, and on ``leaf`` it too often lists names instead of the value, so absolute accuracy is the
  manager's ceiling, the differences the workers' and the order's. Worker memories were
  truncated by the cap in 203-351 of the 1,600 worker calls per cell.
- Cost per document (``mr`` set, 17 calls): ~7,100 prompt tokens (~420 per call, most of them
  the shared instructions, which vLLM's prefix cache reuses) and ~620 generated tokens on
  ``default-coa``; a ``leaf`` cell of 100 documents took 3-8 minutes on ``vllm:default-coa``
  (2 cores, ``--batch 50``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.data import multihop as mh
from chunkwise.eval.plots import interval_bars
from chunkwise.experiments.ledger import Ledger, ledger_key
from chunkwise.llm import LLM, Completion, Request, load_llm
from chunkwise.prompts import prompt_set
from chunkwise.stats import mcnemar_exact, paired_bootstrap, wilson_interval
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.ordering import ORDERINGS, apply_ordering, similarities
from chunkwise.tables import estimate, markdown_table

METHODS = tuple(ORDERINGS)
#: bootstrap resamples of the paired differences
ROUNDS = 4000
#: per-cell numbers carried from the ledger into results.json
CELL_STATS = (
    "memory_truncations", "llm_calls", "prompt_tokens", "completion_tokens", "seconds",
    "prompt_kind", "prompt_version",
)  # fmt: skip


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

    def as_prompt(self, text: str) -> Any:
        return self.inner.as_prompt(text)

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

    def close(self) -> None:
        self.inner.close()


# -- the task ------------------------------------------------------------------------------


def documents(args: argparse.Namespace, question: str) -> list[dict[str, Any]]:
    return mh.generate_tree(
        n=args.n,
        seed=args.seed,
        question=question,
        branches=args.branches,
        depth=args.depth,
        distractor_trees=args.distractor_trees,
        filler_sections=args.filler_sections,
        section_sentences=args.section_sentences,
    )


def cap_for(records: list[dict[str, Any]], factor: float, count: Any) -> dict[str, Any]:
    """The memory cap for ``factor`` x the answer's evidence tokens, and whether it binds."""
    evidence = max(
        count(" ".join(r["meta"]["facts"][str(p)] for p in r["meta"]["evidence"])) for r in records
    )
    every = min(count(" ".join(r["meta"]["facts"].values())) for r in records)
    cap = max(1, math.ceil(factor * evidence))
    return {
        "cap_tokens": cap,
        "evidence_tokens_max": evidence,
        "all_facts_tokens_min": every,
        "binds": cap < every,
    }


def structure(records: list[dict[str, Any]], embedder: Any, kind: str) -> dict[str, Any]:
    """How the similarities see the answer's tree: root, edges, parents read first."""
    root_entry = edges_in = edges_all = 0
    parent_first: dict[str, list[float]] = {m: [] for m in METHODS}
    last: dict[str, list[int]] = {m: [] for m in METHODS}
    for r in records:
        meta = r["meta"]
        S, q = similarities(meta["sections"], r["input"], kind, embedder)
        ev = meta["evidence"]
        tree = {int(k): v for k, v in meta["tree"].items()}
        pairs = [(tree[c], c) for c in ev if tree[c] is not None and tree[c] in ev]
        cl = apply_ordering("chowliu", S, q)
        # the entry point: the tree's root for `all`, the asked leaf for `leaf`
        entry = meta["root"] if meta["question"] == "all" else ev[-1]
        root_entry += cl.root == entry
        span = {(min(i, j), max(i, j)) for i, j, _ in cl.edges}
        edges_in += sum((min(p, c), max(p, c)) in span for p, c in pairs)
        edges_all += len(pairs)
        for m in METHODS:
            order = apply_ordering(m, S, q).order
            pos = {c: k for k, c in enumerate(order)}
            if pairs:
                parent_first[m].append(sum(pos[p] < pos[c] for p, c in pairs) / len(pairs))
            last[m].append(max(pos[c] for c in ev))
    n = len(records)
    return {
        "chowliu_root_is_entry": round(root_entry / n, 4),
        "tree_edges_in_spanning_tree": round(edges_in / max(1, edges_all), 4),
        "evidence_edges_read_parent_first": {
            m: round(float(np.mean(v)), 4) for m, v in parent_first.items() if v
        },
        "mean_step_reading_last_evidence": {
            m: round(float(np.mean(v)), 3) for m, v in last.items()
        },
    }


# -- cells and the ledger ------------------------------------------------------------------


def _prompt_versions() -> list[str]:
    return [prompt_set("chain_of_agents", k, "qa")["version"] for k in ("chat", "base", "mr")]


def cell_key(arm: dict[str, Any], question: str, factor: float, method: str, args: Any) -> str:
    """What makes a finished cell reusable: arm, model, prompts, task shape, cap, ordering."""
    shape = [args.n, args.seed, args.branches, args.depth, args.distractor_trees,
             args.filler_sections, args.section_sentences]  # fmt: skip
    return ledger_key(
        arm["name"], arm["model"], arm["prompts"], _prompt_versions(), question, factor, method,
        shape, args.similarity, args.embedder if args.similarity == "dense" else None,
    )  # fmt: skip


def run_cell(
    llm: LLM,
    records: list[dict[str, Any]],
    cap: int,
    method: str,
    prompts: str,
    args: argparse.Namespace,
    embedder: Any,
) -> dict[str, Any]:
    s = get_strategy(
        "chain_of_agents",
        memory_tokens=cap,
        chunk_tokens=mh.chunk_tokens_for(records, llm.count_tokens),
        ordering=method,
        similarity=args.similarity,
        embedder=args.embedder,
        prompts=prompts,
    )
    t0 = time.perf_counter()
    answers = []
    for b in range(0, len(records), args.batch):
        part = records[b : b + args.batch]
        answers += s.answer_many(
            [(r["context"], Query(r["input"])) for r in part], llm, embedder=embedder
        )
    seconds = time.perf_counter() - t0
    chunks = {a.stats.extra["chunks"] for a in answers}
    sections = {len(r["meta"]["sections"]) for r in records}
    if chunks != sections:  # one section per chunk, or the task is not the one described
        raise SystemExit(f"orderings: chunks per document {chunks} != sections {sections}")
    return {
        "scores": [mh.tree_score(a.text, r) for a, r in zip(answers, records, strict=True)],
        "recall": [mh.tree_recall(a.text, r) for a, r in zip(answers, records, strict=True)],
        "predictions": [a.text[:160] for a in answers],
        "memory_truncations": sum(a.stats.extra["memory_truncations"] for a in answers),
        "llm_calls": sum(a.stats.llm_calls for a in answers),
        "prompt_tokens": sum(a.stats.prompt_tokens for a in answers),
        "completion_tokens": sum(a.stats.completion_tokens for a in answers),
        "prompt_kind": answers[0].stats.extra["prompt_kind"],
        "prompt_version": answers[0].stats.extra["prompt_version"],
        "seconds": round(seconds, 1),
    }


# -- summaries -----------------------------------------------------------------------------


def summarize(scores: list[float]) -> dict[str, Any]:
    k, n = round(sum(scores)), len(scores)
    lo, hi = wilson_interval(k, n)
    return {
        "accuracy": round(100 * k / n, 2) if n else None,
        "n": n,
        "ci95": [round(lo, 2), round(hi, 2)],
    }


def paired_diff(a: list[float], b: list[float]) -> dict[str, Any]:
    """Mean of a - b over the same documents, in points, with a paired bootstrap 95% interval
    and the exact McNemar p-value."""
    d = paired_bootstrap(a, b, rounds=ROUNDS)
    return {
        "points": round(100 * d.mean, 2),
        "ci95": [round(100 * d.low, 2), round(100 * d.high, 2)],
        "mcnemar_p": round(mcnemar_exact(a, b), 4),
    }


def verdict(cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """chowliu against each other ordering (paired), and which ordering wins, if clearly:
    the best accuracy, clear when an exact McNemar test separates it from every other
    ordering at p < 0.05 (a paired bootstrap is overconfident at small n)."""
    out: dict[str, Any] = {}
    if "chowliu" in cells:
        out["chowliu_minus"] = {
            m: paired_diff(cells["chowliu"]["scores"], c["scores"])
            for m, c in cells.items()
            if m != "chowliu"
        }
    acc = {m: float(np.mean(c["scores"])) for m, c in cells.items()}
    best = max(acc, key=acc.__getitem__)
    ties = sorted(m for m in acc if acc[m] == acc[best])
    clear = len(ties) == 1 and all(
        mcnemar_exact(cells[best]["scores"], c["scores"]) < 0.05
        for m, c in cells.items()
        if m != best
    )
    out["best"] = ties if len(ties) > 1 else best
    out["clear"] = clear
    return out


def table(result: dict[str, Any]) -> str:
    methods = result["methods"]
    rows = []
    for st in result["settings"]:
        cells = [st["cells"].get(m) for m in methods]
        v = st.get("verdict", {})
        best = v.get("best", "")
        best = "/".join(best) if isinstance(best, list) else best
        rows.append(
            [st["arm"], st["question"], f"{st['cap_factor']}x = {st['cap_tokens']}",
             "yes" if st["binds"] else "NO",
             *("" if c is None else f"{estimate(c['accuracy'], *c['ci95'])} n={c['n']}"
               for c in cells),
             f"{best} ({'clear' if v.get('clear') else 'not clear'})" if best else "",
             _vs_next_best(st, methods)]
        )  # fmt: skip
    head = ["arm", "question", "cap (tokens)", "binds", *methods, "winner", "chowliu vs next best"]
    return markdown_table(rows, head, align="llrl" + "r" * len(methods) + "ll") + (
        "\n\naccuracy % [95% Wilson interval]; winner: highest accuracy, clear when an exact "
        "McNemar test on the same documents separates it from every other ordering (p < 0.05); "
        "chowliu minus the best other ordering in points [95% paired bootstrap], McNemar p"
    )


def _vs_next_best(setting: dict[str, Any], methods: list[str]) -> str:
    """chowliu minus the most accurate other ordering (the first of ties): ``+7 [-2, +16] vs
    dfs, p = 0.21``. A result transcribed from a published table may lack the interval or p."""
    cells = setting["cells"]
    others = [m for m in methods if m != "chowliu" and m in cells]
    if "chowliu" not in cells or not others:
        return ""
    nxt = max(others, key=lambda m: cells[m]["accuracy"])
    d = setting.get("verdict", {}).get("chowliu_minus", {}).get(nxt)
    if d is None:
        return ""
    text = estimate(d["points"], *d["ci95"], signed=True) if "ci95" in d else f"{d['points']:+.0f}"
    text += f" vs {nxt}"
    p = d.get("mcnemar_p")
    if p is not None:
        text += ", p < 0.001" if p < 0.001 else f", p = {p:.2g}"
    return text


def plot(result: dict[str, Any], path: Path) -> None:
    settings = result["settings"]
    if not settings:
        return
    groups = [f"{s['arm']}\n{s['question']} {s['cap_factor']}x" for s in settings]
    series = {
        m: [
            (c["accuracy"], *c["ci95"]) if (c := st["cells"].get(m)) is not None else None
            for st in settings
        ]
        for m in result["methods"]
    }
    interval_bars(path, groups, series, fontsize=7)


# -- the run -------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"orderings: unknown ordering(s) {unknown}; known: {list(METHODS)}")
    questions = [q.strip() for q in args.questions.split(",") if q.strip()]
    factors = [float(x) for x in args.caps.split(",")]
    if args.out.exists() and not args.out.is_dir():
        raise SystemExit(f"orderings: --out {args.out} is a file, not a folder")
    args.out.mkdir(parents=True, exist_ok=True)

    embedder = None
    if args.similarity == "dense":
        from chunkwise.embed import get_embedder

        embedder = CachedEmbedder(get_embedder(args.embedder))
    arms = [{"name": "scripted", "model": "scripted:tree_reader", "prompts": "chat"}]
    if not args.skip_model:
        arms.append({"name": "model", "model": args.model, "prompts": args.prompts})
    recs = {q: documents(args, q) for q in questions}
    result: dict[str, Any] = {
        "task": {
            "generator": "chunkwise.data.multihop.generate_tree",
            "n": args.n,
            "seed": args.seed,
            "branches": args.branches,
            "depth": args.depth,
            "distractor_trees": args.distractor_trees,
            "filler_sections": args.filler_sections,
            "section_sentences": args.section_sentences,
            "sections_per_document": len(recs[questions[0]][0]["meta"]["sections"]),
        },
        "similarity": args.similarity,
        "embedder": args.embedder if args.similarity == "dense" else None,
        "methods": methods,
        "structure": {q: structure(recs[q], embedder, args.similarity) for q in questions},
        "settings": [],
    }
    model: Any = None
    t_all = time.perf_counter()
    with Ledger(args.out / "cells.jsonl") as done:  # a line cut by a crash: that cell reruns
        for arm in arms:
            for q in questions:
                for factor in factors:
                    keys = {m: cell_key(arm, q, factor, m, args) for m in methods}
                    if arm["name"] == "scripted":
                        probe = mh.tree_reader(1)
                        caps = cap_for(recs[q], factor, probe.count_tokens)
                        llm: Any = mh.tree_reader(caps["cap_tokens"])
                    else:
                        if model is None and any(k not in done for k in keys.values()):
                            t0 = time.perf_counter()
                            model = DedupLLM(load_llm(args.model))
                            result["model_load_seconds"] = round(time.perf_counter() - t0, 1)
                        llm = model
                        caps = None
                    setting: dict[str, Any] = {
                        "arm": arm["name"],
                        "model": arm["model"],
                        "question": q,
                        "cap_factor": factor,
                        "cells": {},
                    }
                    for m in methods:
                        if keys[m] not in done:
                            if caps is None:
                                caps = cap_for(recs[q], factor, llm.count_tokens)
                            row = done.put(
                                keys[m],
                                {**caps, **run_cell(llm, recs[q], caps["cap_tokens"], m,
                                                    arm["prompts"], args, embedder)},
                            )  # fmt: skip
                            print(
                                f"[orderings] {arm['name']} {q} {factor}x {m}: "
                                f"{summarize(row['scores'])} in {row['seconds']} s",
                                file=sys.stderr,
                                flush=True,
                            )
                        row = done.rows[keys[m]]
                        for k in ("cap_tokens", "evidence_tokens_max", "all_facts_tokens_min",
                                  "binds"):  # fmt: skip
                            setting[k] = row[k]
                        setting["cells"][m] = {
                            **summarize(row["scores"]),
                            "recall": round(100 * float(np.mean(row["recall"])), 2),
                            **{k: row[k] for k in CELL_STATS},
                            "scores": row["scores"],
                            "predictions": row["predictions"][:5],
                        }
                    setting["verdict"] = verdict(setting["cells"])
                    result["settings"].append(setting)
    if model is not None:
        result["dedup_cache_hits"] = model.hits
        model.close()
    result["seconds"] = round(time.perf_counter() - t_all, 1)
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="hf:default-coa", help="the real reader (model spec)")
    ap.add_argument("--prompts", default="auto", choices=["auto", "chat", "base", "mr"])
    ap.add_argument("--skip-model", action="store_true", help="the scripted control arm only")
    ap.add_argument("--n", type=int, default=100, help="documents per setting")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--questions", default="all,leaf", help="all, leaf or both")
    ap.add_argument("--caps", default="1.0", help="memory caps: factors of the evidence tokens")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--branches", type=int, default=3)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--distractor-trees", type=int, default=1)
    ap.add_argument("--filler-sections", type=int, default=2)
    ap.add_argument("--section-sentences", type=int, default=2)
    ap.add_argument("--similarity", default="dense", choices=["dense", "bm25"])
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--batch", type=int, default=50, help="documents stepped together")
    ap.add_argument("--out", type=Path, default=Path("runs/bench/orderings"))
    args = ap.parse_args(argv)
    result = run(args)
    (args.out / "results.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    md = table(result)
    (args.out / "table.md").write_text(md + "\n", encoding="utf-8")
    plot(result, args.out / "orderings.png")
    slim = {
        **result,
        "settings": [
            {**s, "cells": {m: {**c, "scores": None} for m, c in s["cells"].items()}}
            for s in result["settings"]
        ],
    }
    print(json.dumps(slim))
    print(md)
    return result


if __name__ == "__main__":
    main()
