"""`chunkwise order`: the order in which Chain-of-Agents workers would read a document's chunks."""

from __future__ import annotations

import argparse
import json

HELP = "order a document's chunks for a question (default | dense | chowliu | dfs)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from chunkwise.strategies.ordering import ORDERINGS, SIMILARITIES

    p.add_argument("--doc", required=True, metavar="FILE", help="UTF-8 text file")
    p.add_argument("--question", required=True, help="the question the chunks are ordered for")
    p.add_argument(
        "--method", default="chowliu", choices=list(ORDERINGS), help="ordering (default: chowliu)"
    )
    p.add_argument(
        "--chunk-tokens", type=int, required=True, metavar="N", help="token budget per chunk"
    )
    p.add_argument(
        "--similarity",
        default="dense",
        choices=list(SIMILARITIES),
        help="dense (sentence embeddings) or bm25 (default: dense)",
    )
    p.add_argument(
        "--embedder",
        default="minilm",
        help="embedder for --similarity dense: minilm (offline all-MiniLM-L6-v2), "
        "hashing, st:PATH or a local sentence-transformers folder",
    )
    p.add_argument(
        "--model",
        default="hf:default",
        help="model spec whose tokenizer counts chunk tokens (default: hf:default)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (default: a short human-readable summary)",
    )


def run(args: argparse.Namespace) -> int:
    from chunkwise.documents import read_document
    from chunkwise.errors import BadInput
    from chunkwise.strategies.ordering import order_chunks
    from chunkwise.text import chunk_document

    if args.chunk_tokens < 1:
        raise BadInput(f"--chunk-tokens must be at least 1, got {args.chunk_tokens}")
    if not args.question.strip():
        raise BadInput("--question is empty")
    text = read_document(args.doc)
    counter = _counter(args.model)
    chunks = chunk_document(text, counter, args.chunk_tokens)
    out = order_chunks(
        args.method,
        [c.text for c in chunks],
        args.question,
        similarity=args.similarity,
        embedder=args.embedder,
    )
    d = out.to_dict()
    if args.method == "default":
        # no similarities were needed; compute them anyway so the output is always complete
        from chunkwise.strategies.ordering import similarities

        S, q = similarities([c.text for c in chunks], args.question, args.similarity, args.embedder)
        d["query_similarity"] = [round(float(x), 4) for x in q]
        d["similarity"] = [[round(float(x), 4) for x in row] for row in S]
        d["similarity_kind"] = args.similarity
    if args.json:
        print(json.dumps(d, ensure_ascii=False))
        return 0
    print(
        f"{d['chunks']} chunks of at most {args.chunk_tokens} tokens; method {args.method}, "
        f"{d['similarity_kind']} similarity; root {d['root']}"
    )
    print("order: " + " ".join(str(i) for i in d["order"]))
    for i in d["order"]:
        preview = " ".join(chunks[i].text.split())[:70]
        print(f"  [{i:>3}] q-sim {d['query_similarity'][i]:+.3f}  {preview}")
    return 0


def _counter(model: str):
    """The model's tokenizer without loading weights where that is possible."""
    from chunkwise.llm.spec import parse_spec

    ms = parse_spec(model)
    if ms.backend == "hf" and ms.target == "default" and not ms.adapter:
        from transformers import AutoTokenizer

        from chunkwise.llm.embedded import converted_dir
        from chunkwise.text import HFTokenCounter

        return HFTokenCounter(AutoTokenizer.from_pretrained(converted_dir()))
    from chunkwise.llm import load_llm

    return load_llm(model)
