"""Single-GPU long-sequence training throughput: a Llama-3.1-8B-shaped model, random weights, bf16.

For each sequence length, one sequence per step (the document is the prompt, the last
``--answer-tokens`` tokens are the targets, as in long-context SFT), through the training code
path of chunkwise.train: gradient checkpointing, per-sequence causal attention (flash-attention
2 when installed, else PyTorch SDPA's fused kernels), only target positions through the LM head,
Liger kernels when installed, and an AdamW step. Prints JSON with tokens/s, MFU (useful FLOPs,
see chunkwise.train.mfu, over the bf16 dense peak of the GPU) and peak memory per length.

The weights and AdamW states are bf16 (no fp32 master copy): the bench measures the step's speed
and memory, not a recipe; a full fine-tune on one GPU uses ZeRO-3 offload instead
(configs/accelerate/zero3_offload.yaml).

    PYTHONPATH=src python bench/gpu_train.py --seq-lens 32768,131072 [--steps 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq-lens", default="32768,131072")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per length (after 1 warm-up)")
    ap.add_argument("--answer-tokens", type=int, default=1024)
    ap.add_argument("--optimizer", choices=["adamw", "none"], default="adamw")
    ap.add_argument("--activation-offload", action="store_true")
    ap.add_argument("--layers", type=int, default=0, help="override the layer count (0 = 32)")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run of the code path only")
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=INT",
        help="LlamaConfig field for a smaller smoke model, e.g. hidden_size=256",
    )
    args = ap.parse_args()

    import numpy as np
    import torch

    from chunkwise.train.formats import IGNORE, Example
    from chunkwise.train.loss import batch_loss_sum
    from chunkwise.train.mfu import Arch, mfu, peak_flops, step_flops
    from chunkwise.train.modeling import (
        _apply_liger,
        arch_config,
        attn_implementation,
        enable_checkpointing,
        use_liger,
    )
    from chunkwise.train.packing import MicroBatch, collate

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print(json.dumps({"bench": "gpu_train", "error": "no CUDA device"}))
        return 1
    dev = torch.device(args.device)
    name = torch.cuda.get_device_name() if cuda else "cpu"
    peak = peak_flops(name)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    def peak_mem() -> float | None:
        return round(torch.cuda.max_memory_allocated() / 2**30, 1) if cuda else None

    overrides = {"num_hidden_layers": args.layers} if args.layers else {}
    for item in args.override:
        key, _, value = item.partition("=")
        overrides[key] = int(value)
    cfg = arch_config("llama3.1-8b", overrides)
    attn = attn_implementation("auto", cuda=cuda)
    from transformers import LlamaForCausalLM

    t0 = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(dev):
        model = LlamaForCausalLM._from_config(cfg, attn_implementation=attn, dtype=torch.bfloat16)
    liger = use_liger("auto", cuda=cuda)
    if liger:
        _apply_liger(model)
    enable_checkpointing(model, offload=args.activation_offload)
    model.config.use_cache = False
    model.train()
    build_s = time.perf_counter() - t0
    params = sum(p.numel() for p in model.parameters())
    opt = None
    if args.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.95), fused=cuda)
    arch = Arch.from_config(cfg)
    out = {
        "bench": "gpu_train",
        "gpu": name,
        "peak_tflops": None if peak is None else peak / 1e12,
        "model": f"llama3.1-8b shape, {cfg.num_hidden_layers} layers, {params / 1e9:.2f}B params, "
        "random weights, bf16",
        "arch_overrides": overrides,
        "attn_implementation": attn,
        "liger": liger,
        "optimizer": args.optimizer,
        "activation_offload": args.activation_offload,
        "build_seconds": round(build_s, 1),
        "versions": {"torch": torch.__version__},
        "runs": [],
    }
    import transformers

    out["versions"]["transformers"] = transformers.__version__
    rng = np.random.default_rng(0)
    for T in [int(x) for x in args.seq_lens.split(",") if x]:
        row: dict = {"seq_len": T, "answer_tokens": args.answer_tokens}
        try:
            ids = rng.integers(0, cfg.vocab_size, size=T, dtype=np.int32)
            labels = np.full(T, IGNORE, dtype=np.int32)
            labels[-args.answer_tokens :] = ids[-args.answer_tokens :]
            batch = collate([Example("x", "bench", ids, labels)], MicroBatch(((0,),)), pad_id=0)
            tensors = {k: v.to(dev) for k, v in batch.items() if isinstance(v, torch.Tensor)}
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            times = []
            for step in range(1 + args.steps):
                sync()
                t = time.perf_counter()
                loss = batch_loss_sum(model, tensors) / batch["n_seqs"]
                loss.backward()
                if opt is not None:
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                else:
                    model.zero_grad(set_to_none=True)
                sync()
                if step:
                    times.append(time.perf_counter() - t)
            sec = sum(times) / len(times)
            flops = step_flops(arch, [T], batch["n_targets"])
            row.update(
                step_seconds=round(sec, 3),
                tok_per_sec=round(T / sec, 1),
                mfu=round(mfu(flops, sec, 1, peak), 4) if peak else None,
                tflops_per_sec=round(flops / sec / 1e12, 1),
                peak_mem_gib=peak_mem(),
                loss=round(float(loss), 4),
            )
        except torch.cuda.OutOfMemoryError as e:
            row.update(
                error="CUDA out of memory",
                detail=str(e).splitlines()[0][:300],
                peak_mem_gib=peak_mem(),
            )
            if opt is not None:
                opt.zero_grad(set_to_none=True)
            model.zero_grad(set_to_none=True)
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
        out["runs"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
