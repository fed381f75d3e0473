"""Chunking a 10M-character document vs tokenizing it once: prints both times and their ratio.

.venv/bin/python bench/chunker_speed.py [--chars 10000000] [--max-tokens 2048]
"""

from __future__ import annotations

import argparse
import json
import random
import time

from transformers import AutoTokenizer

from chunkwise.llm.embedded import converted_dir
from chunkwise.text import HFTokenCounter, chunk_document


def make_document(chars: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = "the of and to in a is that for it as was with be by on not he this are or his".split()
    words += "model context window chunk token budget paragraph sentence document reader".split()
    parts, size = [], 0
    while size < chars:
        sent = " ".join(rng.choice(words) for _ in range(rng.randint(5, 25))).capitalize() + "."
        sep = "\n\n" if rng.random() < 0.08 else ("\n" if rng.random() < 0.1 else " ")
        parts.append(sent + sep)
        size += len(sent) + len(sep)
    return "".join(parts)[:chars]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chars", type=int, default=10_000_000)
    ap.add_argument("--max-tokens", type=int, default=2048)
    args = ap.parse_args()
    counter = HFTokenCounter(AutoTokenizer.from_pretrained(converted_dir()))
    doc = make_document(args.chars)
    t0 = time.perf_counter()
    n_tokens = counter.count_tokens(doc)
    t_tok = time.perf_counter() - t0
    t0 = time.perf_counter()
    chunks = chunk_document(doc, counter, args.max_tokens)
    t_chunk = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "chars": len(doc),
                "tokens": n_tokens,
                "chunks": len(chunks),
                "max_tokens": args.max_tokens,
                "tokenize_s": round(t_tok, 2),
                "chunk_s": round(t_chunk, 2),
                "ratio_chunk_over_tokenize": round(t_chunk / t_tok, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
