"""Does a log-probability confidence help the embedded base model? MapReduce on passkey
documents with each confidence source (and with the confidence floor switched off).

    .venv/bin/python bench/confidence_sources.py --length 16000 --n 3

The base prompt set asks for no self-rated score (a 270M base model cannot follow the
four-field protocol), so ``self`` means: no confidence at all, every finding reaches reduce
(the floor keeps unscored records; ``unscored_kept`` counts them and ``confidence_source`` says
``none``). ``off`` is the explicit no-confidence ablation.
"""

from __future__ import annotations

import argparse
import json
import time

from chunkwise.benchmarks.infinitebench.metrics import score_one
from chunkwise.data.synthetic import generate, passkey_query
from chunkwise.llm import load_llm
from chunkwise.strategies import get_strategy

VARIANTS = {
    "logprob": {"confidence": "logprob"},
    "self": {"confidence": "self"},
    "logprob_no_floor": {"confidence": "logprob", "min_confidence": "0"},
    "off": {"confidence": "off"},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hf:default")
    ap.add_argument("--length", type=int, default=16000)
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--window", type=int, default=8192)
    args = ap.parse_args()
    llm = load_llm(args.model)
    records = generate(
        "passkey", length_tokens=args.length, n=args.n, seed=1, count_tokens=llm.count_tokens
    )
    out: dict = {"model": args.model, "length": args.length, "n": args.n, "variants": {}}
    for name, opts in VARIANTS.items():
        strategy = get_strategy("mapreduce", window=args.window, **opts)
        t0 = time.perf_counter()
        correct = 0
        preds, sources = [], []
        for r in records:
            ans = strategy.answer(r["context"], passkey_query(r), llm)
            ok = score_one("passkey", ans.text, r["answer"]) > 0
            correct += ok
            preds.append(ans.text)
            sources.append(ans.stats.extra.get("confidence_source"))
        out["variants"][name] = {
            "accuracy": 100.0 * correct / len(records),
            "n": len(records),
            "wall_s": round(time.perf_counter() - t0, 1),
            "predictions": preds,
            "confidence_source": sources,
        }
        print(json.dumps({name: out["variants"][name]}), flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
