"""Backend throughput on this machine: prefill, decode, and a wave of map-sized prompts.

    .venv-vllm/bin/python bench/backends.py                       # hf fp32, hf bf16, vllm
    .venv/bin/python bench/backends.py --models hf:default,hf:default?dtype=bfloat16

For each model spec, in one process (ratios are measured within one run; absolute times on
shared machines vary ~1.7x between runs):
  prefill   one long prompt (--long-tokens), 1 new token: prompt tokens / seconds
  decode    a short prompt, --new-tokens greedy tokens: generated tokens / seconds
  wave      --wave prompts of --map-tokens each (a MapReduce map wave) in one generate call,
            --map-new-tokens each: prompt tokens / seconds, and the wall time
Every measured prompt is new to the engine (different words), so vLLM's prefix cache does
not answer it from an earlier run. Prints a table and then one JSON object with the ratios
vllm/hf-at-its-best-dtype and bf16/fp32, and greedy parity: how many of 20 short prompts get
the same 12-token continuation as on hf fp32 (or the first model).
"""

from __future__ import annotations

import argparse
import json
import random
import time

from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm.parity import PARITY_PROMPTS
from chunkwise.tables import markdown_table

WORDS = (
    "the grass is green the sky is blue a reader takes notes while the model reads "
    "each chunk of the long document and answers the question with care river stone "
    "window paper lamp garden winter number seven orange quiet market bridge"
).split()


#: short prompts whose greedy continuations are compared across the models (parity)
PARITY = PARITY_PROMPTS


def make_prompt(llm, tokens: int, seed: int) -> str:
    rng = random.Random(seed)
    text = " ".join(rng.choice(WORDS) for _ in range(int(tokens * 1.1)))
    return llm.decode(llm.encode(text)[:tokens]) + "\n\nQuestion: what colour is the sky?\nAnswer:"


def timed(llm, prompts: list[str], new_tokens: int) -> tuple[float, list]:
    reqs = [Request(p, GenerationParams(max_new_tokens=new_tokens)) for p in prompts]
    t0 = time.perf_counter()
    out = llm.generate(reqs)
    return time.perf_counter() - t0, out


def measure(spec: str, args: argparse.Namespace, seed: int) -> dict:
    t0 = time.perf_counter()
    llm = load_llm(spec)
    load_s = time.perf_counter() - t0
    timed(llm, [make_prompt(llm, 600, seed + 900)], 4)  # warm-up (kernels, allocator)
    t, out = timed(llm, [make_prompt(llm, args.long_tokens, seed + 1)], 1)
    prefill = {"tokens": out[0].prompt_tokens, "s": round(t, 2)}
    prefill["tok_per_s"] = round(out[0].prompt_tokens / t, 1)
    t, out = timed(llm, [make_prompt(llm, 32, seed + 2)], args.new_tokens)
    decode = {"tokens": out[0].completion_tokens, "s": round(t, 2)}
    decode["tok_per_s"] = round(out[0].completion_tokens / t, 1)
    prompts = [make_prompt(llm, args.map_tokens, seed + 10 + i) for i in range(args.wave)]
    t, out = timed(llm, prompts, args.map_new_tokens)
    n_prompt = sum(c.prompt_tokens for c in out)
    wave = {"prompts": len(prompts), "prompt_tokens": n_prompt, "s": round(t, 2)}
    wave["prompt_tok_per_s"] = round(n_prompt / t, 1)
    texts = [c.text for c in timed(llm, PARITY, 12)[1]]
    llm.close()
    return {
        "load_s": round(load_s, 1),
        "prefill": prefill,
        "decode": decode,
        "wave": wave,
        "parity_texts": texts,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--models", default="vllm:default,hf:default?dtype=bfloat16,hf:default?dtype=float32"
    )
    ap.add_argument("--long-tokens", type=int, default=4000)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--map-tokens", type=int, default=1000)
    ap.add_argument("--map-new-tokens", type=int, default=16)
    ap.add_argument("--wave", type=int, default=4)
    ap.add_argument("--json", help="also write the JSON here")
    args = ap.parse_args()
    specs = [s for s in args.models.split(",") if s]
    results = {}
    for i, spec in enumerate(specs):
        results[spec] = measure(spec, args, seed=100 * i)
        print(json.dumps({spec: results[spec]}), flush=True)  # partial results as they come
    head = ["model", "load s", f"prefill tok/s ({args.long_tokens})", "decode tok/s",
            f"wave of {args.wave}x{args.map_tokens}: s", "wave prompt tok/s"]  # fmt: skip
    rows = [
        [spec, r["load_s"], r["prefill"]["tok_per_s"], r["decode"]["tok_per_s"], r["wave"]["s"],
         r["wave"]["prompt_tok_per_s"]]
        for spec, r in results.items()
    ]  # fmt: skip
    print(markdown_table(rows, head))
    ratios: dict[str, float] = {}
    hf = {s: r for s, r in results.items() if s.startswith("hf:")}
    vl = {s: r for s, r in results.items() if s.startswith("vllm:")}
    fp32 = next((r for s, r in hf.items() if "float32" in s), None)
    bf16 = next((r for s, r in hf.items() if "bfloat16" in s), None)
    if fp32 and bf16:
        for k, f in (
            ("prefill", "tok_per_s"),
            ("decode", "tok_per_s"),
            ("wave", "prompt_tok_per_s"),
        ):
            ratios[f"hf_bf16_over_fp32_{k}"] = round(bf16[k][f] / fp32[k][f], 2)
    if hf and vl:
        best = max(hf.values(), key=lambda r: r["prefill"]["tok_per_s"])
        for i, (vspec, v) in enumerate(vl.items()):
            # the first vllm spec keeps the plain key; others (e.g. ?reserved_cpus=0) name theirs
            tag = "" if i == 0 else f"[{vspec}]"
            for k, f in (
                ("prefill", "tok_per_s"),
                ("decode", "tok_per_s"),
                ("wave", "prompt_tok_per_s"),
            ):
                ratios[f"vllm_over_best_hf_{k}{tag}"] = round(v[k][f] / best[k][f], 2)
    fp32_spec = next((s for s in results if s.startswith("hf:") and "float32" in s), specs[0])
    ref = results[fp32_spec]["parity_texts"]
    parity = {
        spec: f"{sum(a == b for a, b in zip(r['parity_texts'], ref, strict=True))}/{len(ref)}"
        for spec, r in results.items()
    }
    out = {
        "args": vars(args),
        "results": results,
        "ratios": ratios,
        "parity_vs": fp32_spec,
        "parity": parity,
    }
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
