"""The CPU output head as ``(W @ x.T).T`` against torch's ``linear``, on the embedded model:
the head alone for 1-16 rows, and batched greedy decoding (map-call sized prompts), both
measured in this run. Prints a table and one JSON line.

.venv/bin/python bench/hf_output_head.py [--rows 3] [--new-tokens 64] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import time

from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.tables import markdown_table


def _time(fn, reps: int) -> float:
    fn()  # warm
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=3, help="prompts decoded together")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5, help="repetitions of the head-only timing")
    args = ap.parse_args()
    llm = load_llm("hf:default")
    head = llm.model.get_output_embeddings()
    fast_forward = head.forward

    def plain(fn):
        del head.forward
        try:
            return fn()
        finally:
            head.forward = fast_forward

    head_rows = []
    for m in (1, 2, 3, 4, 8, 16):
        x = torch.randn(m, head.in_features)
        with torch.inference_mode():
            fast_s = _time(lambda x=x: head(x), args.reps)
            plain_s = plain(lambda x=x: _time(lambda: head(x), args.reps))
        head_rows.append({"rows": m, "linear_ms": plain_s * 1e3, "fast_ms": fast_s * 1e3})

    text = "The river rose in the night and the town moved its grain to the hill. " * 40
    prompts = [text[: 3000 - 400 * i] for i in range(args.rows)]
    p = GenerationParams(max_new_tokens=args.new_tokens, stop=("\x00never",))
    reqs = [Request(x, p) for x in prompts]
    t0 = time.perf_counter()
    fast_out = llm.generate(reqs)
    fast_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    plain_out = plain(lambda: llm.generate(reqs))
    plain_s = time.perf_counter() - t0
    same = [a.text for a in fast_out] == [b.text for b in plain_out]

    rows = [
        [r["rows"], f"{r['linear_ms']:.1f}", f"{r['fast_ms']:.1f}",
         f"{r['linear_ms'] / r['fast_ms']:.2f}"]
        for r in head_rows
    ]  # fmt: skip
    print(markdown_table(rows, ["rows", "linear ms", "(W @ x.T).T ms", "ratio"], align="rrrr"))
    print(
        f"decoding {args.rows} prompts x {args.new_tokens} tokens: linear {plain_s:.1f} s, "
        f"fast head {fast_s:.1f} s, ratio {plain_s / fast_s:.2f}; same outputs: {same}"
    )
    print(
        json.dumps(
            {
                "head": [{k: round(v, 2) for k, v in r.items()} for r in head_rows],
                "decode": {
                    "rows": args.rows,
                    "new_tokens": args.new_tokens,
                    "prompt_tokens": [c.prompt_tokens for c in fast_out],
                    "linear_s": round(plain_s, 2),
                    "fast_s": round(fast_s, 2),
                    "ratio": round(plain_s / fast_s, 2),
                    "same_outputs": same,
                },
                "threads": torch.get_num_threads(),
            }
        )
    )


if __name__ == "__main__":
    main()
