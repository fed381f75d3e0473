"""hf:default on this CPU: the automatic dtype (chunkwise.llm.cpu) against fp32, in one run.

    .venv/bin/python bench/cpu_dtype.py [--long-tokens 2000] [--passkeys 6]

For each spec: one prefill of --long-tokens tokens (after a warm-up) and --passkeys generated
passkey documents of ~600 tokens answered with the standard strategy. Prints a table, then JSON
with the prefill ratio auto/fp32 (one run: ratios hold on a shared machine, absolute times
don't) and how many passkeys each got right.
"""

from __future__ import annotations

import argparse
import json
import os

from backends import make_prompt, timed

from chunkwise.benchmarks.infinitebench.metrics import score_one
from chunkwise.data.synthetic import generate, passkey_query
from chunkwise.llm import load_llm
from chunkwise.llm.cpu import CPU_DTYPE_ENV, choose_cpu_dtype
from chunkwise.strategies import get_strategy
from chunkwise.tables import markdown_table


def measure(spec: str, args: argparse.Namespace) -> dict:
    llm = load_llm(spec)
    try:
        timed(llm, [make_prompt(llm, 600, 900)], 4)  # warm-up
        t, out = timed(llm, [make_prompt(llm, args.long_tokens, 1)], 1)
        docs = generate(
            "passkey", length_tokens=600, n=args.passkeys, seed=11, count_tokens=llm.count_tokens
        )
        answers = [
            get_strategy("standard").answer(d["context"], passkey_query(d), llm).text for d in docs
        ]
        right = [
            score_one("passkey", a, d["answer"]) == 1.0 for a, d in zip(answers, docs, strict=True)
        ]
        return {
            "dtype": str(llm.model.dtype).removeprefix("torch."),
            "prefill_tok_per_s": round(out[0].prompt_tokens / t, 1),
            "prefill_tokens": out[0].prompt_tokens,
            "passkeys_right": sum(right),
            "passkeys": len(right),
            "answers": answers,
        }
    finally:
        llm.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--long-tokens", type=int, default=2000)
    ap.add_argument("--passkeys", type=int, default=6)
    args = ap.parse_args()
    os.environ.pop(CPU_DTYPE_ENV, None)
    dtype, why = choose_cpu_dtype()
    res = {}
    for spec in ("hf:default", "hf:default?dtype=float32"):
        res[spec] = measure(spec, args)
        print(json.dumps({spec: res[spec]}), flush=True)  # partial results as they come
    auto, fp32 = res["hf:default"], res["hf:default?dtype=float32"]
    rows = [
        [s, r["dtype"], r["prefill_tok_per_s"], f"{r['passkeys_right']}/{r['passkeys']}"]
        for s, r in res.items()
    ]
    same = sum(a == b for a, b in zip(auto["answers"], fp32["answers"], strict=True))
    print(
        json.dumps(
            {
                "auto_dtype": dtype,
                "why": why,
                "prefill_ratio_auto_over_fp32": round(
                    auto["prefill_tok_per_s"] / fp32["prefill_tok_per_s"], 2
                ),
                "same_answer_as_fp32": f"{same}/{len(auto['answers'])}",
                "results": res,
            }
        ),
        flush=True,
    )
    print(markdown_table(rows, ["spec", "dtype", "prefill tok/s", "passkeys right"]))


if __name__ == "__main__":
    main()
