"""`chunkwise chunk`: cut a document into token-budgeted chunks, one JSON line each."""

from __future__ import annotations

import argparse
import json

HELP = "cut a document into chunks of at most N tokens (one JSON line per chunk)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="UTF-8 text file")
    p.add_argument("--model", default="hf:default", help="model spec whose tokenizer counts")
    p.add_argument("--max-tokens", type=int, required=True, help="token budget per chunk")
    p.add_argument("--overlap", type=int, default=0, help="tokens repeated between chunks")


def run(args: argparse.Namespace) -> int:
    import sys

    from chunkwise.documents import read_document
    from chunkwise.errors import BadInput
    from chunkwise.llm import load_llm
    from chunkwise.text import chunk_document

    if args.max_tokens < 1:
        raise BadInput(f"--max-tokens must be at least 1, got {args.max_tokens}")
    text = read_document(args.file)
    with load_llm(args.model) as llm:
        chunks = chunk_document(text, llm, args.max_tokens, overlap=args.overlap)
    out = sys.stdout
    for c in chunks:
        out.write(json.dumps(c.to_dict(), ensure_ascii=False) + "\n")
    return 0
