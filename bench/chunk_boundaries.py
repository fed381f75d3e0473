"""How often does chunking cut a family's evidence in two? For each generated family and length,
the held-out documents of the generated benchmark (``--data heldout:LENGTH``) are chunked as
MapReduce chunks them (``--chunk-tokens``, the embedded model's tokenizer) and every evidence
span the generator recorded is checked: inside one chunk, or cut by a boundary. Run once with
the chunker as it is and once without its clause level (cuts after a comma or semicolon), the
level added when the evidence audit found kv_retrieval's straddling pairs all lost
(docs/evaluation.md, "What the funnels show").

    .venv/bin/python bench/chunk_boundaries.py --families kv_retrieval --lengths 4096,8192 --n 50

Tokenization only, no model call: a few seconds per family and length. Prints a table, then
the JSON (last line); ``--json PATH`` writes it too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chunkwise.text.chunker as chunker
from chunkwise.benchmarks.generated.loader import GeneratedSpec
from chunkwise.data.families import FAMILIES, get_family
from chunkwise.text import HFTokenCounter, chunk_document

#: chunker levels this bench can switch off (name -> module attribute)
LEVELS = {"clause": "_CLAUSE"}
_NEVER = re.compile(r"(?!)")  # matches nothing: the level is skipped


@contextlib.contextmanager
def without(level: str | None) -> Iterator[None]:
    """The chunker with ``level`` switched off (``None``: as it is)."""
    if level is None:
        yield
        return
    attr = LEVELS[level]
    saved = getattr(chunker, attr)
    setattr(chunker, attr, _NEVER)
    try:
        yield
    finally:
        setattr(chunker, attr, saved)


def cut_spans(docs: list[Any], counter: HFTokenCounter, chunk_tokens: int) -> tuple[int, int]:
    """(evidence spans cut by a chunk boundary, evidence spans) over ``docs``."""
    cut = total = 0
    for d in docs:
        chunks = chunk_document(d.context, counter, chunk_tokens)
        for ev in d.evidence:
            total += 1
            cut += not any(c.start_char <= ev.start and ev.end <= c.end_char for c in chunks)
    return cut, total


def measure(families: list[str], lengths: list[int], n: int, chunk_tokens: int) -> dict[str, Any]:
    from transformers import AutoTokenizer

    from chunkwise.llm.embedded import converted_dir

    counter = HFTokenCounter(AutoTokenizer.from_pretrained(str(converted_dir())))
    rows = []
    for family in families:
        for length in lengths:
            spec = GeneratedSpec("heldout", length)
            docs = get_family(family).make(n=n, seed=spec.seed(), length_tokens=length,
                                           count_tokens=counter.count_tokens)  # fmt: skip
            row: dict[str, Any] = {"family": family, "length": length, "docs": len(docs)}
            for name, level in (("chunker", None), *((f"no_{lv}", lv) for lv in LEVELS)):
                with without(level):
                    cut, total = cut_spans(docs, counter, chunk_tokens)
                row[name] = {"cut": cut, "spans": total}
            rows.append(row)
    return {"chunk_tokens": chunk_tokens, "n": n, "rows": rows}


def table(out: dict[str, Any]) -> str:
    arms = [k for k in out["rows"][0] if isinstance(out["rows"][0][k], dict)] if out["rows"] else []
    lines = ["| family | length | " + " | ".join(f"cut ({a})" for a in arms) + " |",
             "|---|---|" + "---|" * len(arms)]  # fmt: skip
    for r in out["rows"]:
        cells = [f"{r[a]['cut']} of {r[a]['spans']}" for a in arms]
        lines.append(f"| {r['family']} | {r['length']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--lengths", default="4096,8192")
    ap.add_argument("--n", type=int, default=50, help="documents per family and length")
    ap.add_argument("--chunk-tokens", type=int, default=500, help="hf:default-mr's chunk size")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    families = [f for f in args.families.split(",") if f]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        print(f"unknown families {unknown}; valid: {', '.join(FAMILIES)}", file=sys.stderr)
        return 2
    try:
        lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    except ValueError:
        lengths = []
    if not lengths or min(lengths) < 200 or args.n < 1 or args.chunk_tokens < 1:
        print(f"--lengths {args.lengths!r} (token counts of at least 200, e.g. 4096,8192), "
              f"--n {args.n} and --chunk-tokens {args.chunk_tokens} (at least 1)",
              file=sys.stderr)  # fmt: skip
        return 2
    out = measure(families, lengths, args.n, args.chunk_tokens)
    print(table(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
