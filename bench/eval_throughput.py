"""Does MapReduce over many documents keep the engine full? One run, one engine.

    .venv/bin/python bench/eval_throughput.py --model hf:default --docs 24 --doc-tokens 8000 --json out.json
    .venv-vllm/bin/python bench/eval_throughput.py --model vllm:default --docs 24 --doc-tokens 8000

1. **waves**: MapReduce answers ``--docs`` passkey documents of ``--doc-tokens`` tokens, all in
   flight at once (``chunkwise eval --parallel DOCS``: one thread per document, their calls
   merged by :class:`~chunkwise.llm.coalescing.CoalescingLLM`, so the map calls of every
   document go out as one batch, which the backend sorts by length and cuts to its token budget,
   and collapse/reduce calls join the next batch as their documents get there). Rate: document
   tokens per second of wall time, everything included (maps, collapses, reduces, decode).
2. **prefill**: the same map prompts as one flat batch with ``max_new_tokens=1``: the engine's
   saturated prefill rate, in document tokens per second.

``--mode fair`` (the default) keeps either pass from reusing the other's work: every document
is its own seeded random text (sentences of words drawn from Python's reference text,
``pydoc_data.topics``), so no chunk shares text with another chunk or document, with one pass
key needle at a depth that sweeps the documents; and a ``vllm:`` spec runs with
``prefix_cache=0``. ``--mode passkey`` is the earlier setting: InfiniteBench's passkey
documents, whose one filler line repeats across every chunk, with vLLM's prefix cache emptied
before each pass (8 documents of 2K tokens gave a "ratio" of 1.73 without that, 24 of 8K still
1.41 with it: the filler's prefill is shared within each pass).

``ratio`` = waves rate / prefill rate: 1.0 would mean MapReduce costs no more than reading the
documents once. Prints a table, then the JSON (last line) with a top-level ``ratio`` and the
``mode``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from chunkwise.data.python_reference import reference_topics
from chunkwise.data.synthetic import (
    PASSKEY_NEEDLE,
    PASSKEY_QUESTION,
    generate,
    needle_depths,
    passkey_query,
)
from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm.coalescing import CoalescingLLM, run_each
from chunkwise.strategies import get_strategy
from chunkwise.strategies.mapreduce.prompts import as_request, map_prompt

#: the issue's goal for the ratio
GOAL = 0.8
MODES = ("fair", "passkey")


def vocabulary() -> list[str]:
    """The distinct words (3+ letters, lower case) of Python's reference text: ~3,000."""
    words: set[str] = set()
    for _, text in reference_topics():
        words.update(w.lower() for w in re.findall(r"[A-Za-z]{3,}", text))
    return sorted(words)


def fair_documents(
    n: int, doc_tokens: int, seed: int, count_tokens: Callable[[str], int]
) -> list[dict[str, Any]]:
    """``n`` passkey records (InfiniteBench's shape) whose filler is seeded random sentences:
    no text repeats within or across documents, so no prefill can be reused."""
    words, rng = vocabulary(), random.Random(seed)
    docs = []
    for i, depth in enumerate(needle_depths(n)):
        key = "".join(rng.choice("0123456789") for _ in range(5))
        needle = PASSKEY_NEEDLE.format(key=key)
        sentences: list[str] = []
        total = count_tokens(needle)
        while total < doc_tokens:
            words_in = rng.randint(6, 16)
            sentence = " ".join(rng.choice(words) for _ in range(words_in)).capitalize() + ". "
            sentences.append(sentence)
            total += count_tokens(sentence)
        sentences.insert(round(depth * len(sentences)), needle)
        context = "".join(sentences)
        docs.append(
            {"id": i, "context": context, "input": PASSKEY_QUESTION, "answer": [key], "options": []}
        )
    return docs


def without_prefix_cache(spec: str) -> str:
    """A ``vllm:`` spec with ``prefix_cache=0`` added (unless it sets it); others unchanged."""
    if not spec.startswith("vllm:") or "prefix_cache=" in spec:
        return spec
    return f"{spec}{'&' if '?' in spec else '?'}prefix_cache=0"


def map_requests(mr: Any, llm: Any, docs: list[dict[str, Any]]) -> tuple[list[Request], int]:
    """Every document's map requests, as MapReduce sends them, and the documents' tokens."""
    reqs, tokens = [], 0
    for rec in docs:
        query = passkey_query(rec)
        plan = mr.plan(rec["context"], query, llm)
        tokens += llm.count_tokens(rec["context"])
        reqs += [
            as_request(llm, map_prompt(plan.prompts, c.text, query), plan.map_params)
            for c in plan.chunks
        ]
    return reqs, tokens


def waves(mr: Any, llm: Any, docs: list[dict[str, Any]]) -> dict[str, Any]:
    shared = CoalescingLLM(llm)
    t0 = time.perf_counter()
    answers = []
    for rec, ans in run_each(
        docs, lambda r: mr.answer(r["context"], passkey_query(r), shared), shared, len(docs)
    ):
        if isinstance(ans, BaseException):
            raise ans
        answers.append((rec, ans))
    wall = time.perf_counter() - t0
    correct = sum(any(str(x) in a.text for x in r["answer"]) for r, a in answers)
    return {
        "wall": wall,
        "seconds": round(wall, 2),
        "backend_batches": len(shared.batch_sizes),
        "calls_per_batch_max": max(shared.batch_sizes, default=0),
        "llm_calls": sum(a.stats.llm_calls for _, a in answers),
        "passkeys_found": f"{correct}/{len(answers)}",
    }


def fresh_cache(llm: Any) -> None:
    """Forget vLLM's prefix cache, so the second pass does not reuse the first one's prefill."""
    reset = getattr(getattr(llm, "engine", None), "reset_prefix_cache", None)
    if reset is not None:
        reset()


def prefill(llm: Any, reqs: list[Request]) -> float:
    flat = [Request(r.prompt, GenerationParams(max_new_tokens=1)) for r in reqs]
    t0 = time.perf_counter()
    llm.generate(flat)
    return time.perf_counter() - t0


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo, else what platform knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="hf:default")
    ap.add_argument("--docs", type=int, default=24)
    ap.add_argument("--doc-tokens", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--mode",
        choices=MODES,
        default="fair",
        help="fair: random text, vLLM prefix cache off; passkey: repeated filler (see above)",
    )
    ap.add_argument("--json", help="also write the JSON here")
    args = ap.parse_args(argv)

    fair = args.mode == "fair"
    spec = without_prefix_cache(args.model) if fair else args.model
    t0 = time.perf_counter()
    llm = load_llm(spec)
    load_s = time.perf_counter() - t0
    mr = get_strategy("mapreduce")
    if fair:
        docs = fair_documents(args.docs, args.doc_tokens, args.seed, llm.count_tokens)
    else:
        docs = generate(
            "passkey",
            length_tokens=args.doc_tokens,
            n=args.docs,
            seed=args.seed,
            count_tokens=llm.count_tokens,
        )
    reqs, doc_tokens = map_requests(mr, llm, docs)
    llm.generate([Request(reqs[0].prompt, GenerationParams(max_new_tokens=1))])  # warm-up
    if not fair:
        fresh_cache(llm)
    flat_s = prefill(llm, reqs)
    print(f"prefill pass: {flat_s:.1f} s; MapReduce waves next", file=sys.stderr, flush=True)
    if not fair:
        fresh_cache(llm)
    wave = waves(mr, llm, docs)
    flat_rate = doc_tokens / flat_s
    wave_rate = doc_tokens / wave.pop("wall")
    ratio = wave_rate / flat_rate
    opts = getattr(llm, "max_batch_tokens", None), getattr(llm, "batch_size", None)
    result = {
        "model": args.model,
        "mode": args.mode,
        "model_loaded": spec,
        "docs": args.docs,
        "doc_tokens": doc_tokens,
        "map_calls": len(reqs),
        "hf_batch": {"max_batch_tokens": opts[0], "batch_size": opts[1]} if opts[0] else None,
        "prefill": {"seconds": round(flat_s, 2), "doc_tokens_per_s": round(flat_rate, 1)},
        "waves": {**wave, "doc_tokens_per_s": round(wave_rate, 1)},
        "ratio": round(ratio, 3),
        "goal": GOAL,
        "met": ratio >= GOAL,
        "load_s": round(load_s, 1),
        "cpu": cpu_name(),
    }
    rows = [
        ("prefill: map prompts, one flat batch, 1 new token", flat_s, flat_rate),
        ("MapReduce waves: all documents in flight", wave["seconds"], wave_rate),
    ]
    print(
        f"{args.docs} documents, {doc_tokens} tokens, {len(reqs)} map calls on {spec} ({args.mode})"
    )
    print(f"{'pass':<52} {'seconds':>8} {'doc tok/s':>10}")
    for name, s, r in rows:
        print(f"{name:<52} {s:>8.1f} {r:>10.1f}")
    print(f"ratio {ratio:.3f} (goal >= {GOAL}: {'met' if ratio >= GOAL else 'not met'})")
    text = json.dumps(result)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    close = getattr(llm, "close", None)
    if close:
        close()
    return result


if __name__ == "__main__":
    main()
