"""Training throughput of packed vs padded batching on a LongAlign-like length mix (CPU, tiny model).

LongAlign-10k holds documents of 8K-64K tokens with short answers; scaled down by 64 that is
128-1024 tokens with answers of 2-6% of the length (lengths log-uniform, a long tail). Every
strategy trains on the same examples with the same tiny Llama, loss and optimizer (the
training loop's own collate / loss / backward / AdamW step); tokens/s counts real tokens only.

* packed: best-fit-decreasing packs of 1024 tokens (= max_length, as LongAlign packs to 64K),
  one pack per micro-batch, per-sequence causal attention (chunkwise_varlen)
* padded: random batches of --batch-size sequences padded to the batch's longest
* padded_to_max: one sequence per row padded to max_length (LongAlign's pre-tokenized rows)

    .venv/bin/python bench/packing.py [--examples 64] [--batch-size 4] [--seed 0] [--threads 1]

Prints JSON: each strategy's tokens/s and the ratios packed / padded and packed / padded_to_max.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time

import numpy as np
import torch

from chunkwise.train.attention import register
from chunkwise.train.formats import IGNORE, Example
from chunkwise.train.loss import batch_loss_sum
from chunkwise.train.modeling import arch_config
from chunkwise.train.packing import MicroBatch, collate, padding_efficiency, plan_epoch

MAX_LEN = 1024
SCALE = 64  # LongAlign's 8K-64K tokens / 64


def length_mix(n: int, seed: int) -> list[tuple[int, int]]:
    """(length, answer tokens): log-uniform 8K-64K scaled down, answers 2-6% of the length."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        length = int(math.exp(rng.uniform(math.log(8192), math.log(65536))) / SCALE)
        out.append((length, max(4, int(length * rng.uniform(0.02, 0.06)))))
    return out


def make_examples(mix: list[tuple[int, int]], vocab: int, seed: int) -> list[Example]:
    rng = np.random.default_rng(seed)
    exs = []
    for i, (length, answer) in enumerate(mix):
        ids = rng.integers(0, vocab, size=length, dtype=np.int32)
        labels = np.full(length, IGNORE, dtype=np.int32)
        labels[-answer:] = ids[-answer:]
        exs.append(Example(f"b{i}", "chat", ids, labels))
    return exs


def train_pass(model, optimizer, examples, plan, pad_width: int | None = None) -> dict:
    batches = [collate(examples, mb, pad_id=0, pad_to_multiple_of=pad_width or 1) for mb in plan]
    t0 = time.perf_counter()
    for b in batches:
        loss = batch_loss_sum(model, b) / max(b["n_seqs"], 1)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - t0
    tokens = sum(b["n_tokens"] for b in batches)
    return {
        "tok_per_sec": round(tokens / seconds, 1),
        "seconds": round(seconds, 2),
        "micro_batches": len(batches),
        "real_tokens": tokens,
        "padding_efficiency": round(padding_efficiency(batches), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--examples", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (1: steady numbers on a shared machine)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import LlamaForCausalLM

    vocab = 1024
    mix = length_mix(args.examples, args.seed)
    examples = make_examples(mix, vocab, args.seed)
    lengths = [len(e) for e in examples]
    plans = {
        "packed": (
            plan_epoch(
                lengths,
                strategy="packed",
                max_tokens=MAX_LEN,
                batch_size=1,
                seed=args.seed,
                epoch=0,
            ),
            None,
        ),
        "padded": (
            plan_epoch(
                lengths,
                strategy="padded",
                max_tokens=MAX_LEN,
                batch_size=args.batch_size,
                seed=args.seed,
                epoch=0,
            ),
            None,
        ),
        "padded_to_max": ([MicroBatch(((i,),)) for i in range(len(examples))], MAX_LEN),
    }
    results = {}
    for name, (plan, width) in plans.items():
        torch.manual_seed(0)
        model = LlamaForCausalLM._from_config(
            arch_config("tiny", {}, vocab), attn_implementation=register()
        )
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        train_pass(model, optimizer, examples, plan[:2], width)  # warm-up
        results[name] = train_pass(model, optimizer, examples, plan, width)
    out = {
        "bench": "packing",
        "model": "tiny llama (2 layers, hidden 64, vocab 1024), fp32, CPU",
        "threads": torch.get_num_threads(),
        "examples": len(examples),
        "length_mix": {
            "min": min(lengths),
            "mean": round(sum(lengths) / len(lengths), 1),
            "max": max(lengths),
            "note": "LongAlign-10k's 8K-64K tokens scaled down 64x",
        },
        "max_length": MAX_LEN,
        "padded_batch_size": args.batch_size,
        **results,
        "ratio_packed_vs_padded": round(
            results["packed"]["tok_per_sec"] / results["padded"]["tok_per_sec"], 2
        ),
        "ratio_packed_vs_padded_to_max": round(
            results["packed"]["tok_per_sec"] / results["padded_to_max"]["tok_per_sec"], 2
        ),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
