"""The phases of bench/gpu_check.sh, one per call, each writing ``<out>/<phase>.json``.

    python bench/gpu_check.py PHASE --out DIR [--dry-run]
    python bench/gpu_check.py summary --out DIR        # the one JSON summary of every phase

Phases (the shell script runs each under ``timeout``; see its header for the budget):

* ``env``: versions (torch, transformers, accelerate, peft; deepspeed / flash-attn / vLLM / Liger
  present or not), the GPU, its datasheet bf16 peak (chunkwise.train.mfu) and a measured bf16
  matmul rate.
* ``sdpa``: bf16 GQA attention forward + backward at 64K tokens (two packed sequences) through
  ``chunkwise_varlen`` (src/chunkwise/train/attention.py) with SDPA restricted to its flash
  backend, so an O(T^2) math fallback fails instead of running; checked against the math kernel
  on a 2K slice.
* ``resume``: the tiny recipe straight, and killed (SIGKILL) right after step K then rerun: the
  rerun resumes from its checkpoint onto the straight run's losses.
* ``pretrained``: the straight run's saved model reloaded with ``model.init=pretrained`` (step-1
  loss near its last loss, far below ln(vocab)) and with LoRA on a bf16 base.
* ``gpu_train``: bench/gpu_train.sh at 64K and 128K tokens (tokens/s, MFU, peak memory).
* ``generate``: prefill and decode rates of transformers' ``generate`` on a Llama-3.1-8B-shaped
  model with random weights (``--layers`` of its 32 layers; the JSON says how many).
* ``eval2``: eval/run.py on 2 ranks (torchrun) sharing one GPU, on the resume phase's model.

``--dry-run`` runs every phase's logic on CPU with tiny sizes (CI: tests/bench/test_gpu_check.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "tiny" / "pyramid_align-mapreduce.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "pyramid_align.jsonl"
PHASES = ("env", "sdpa", "resume", "pretrained", "gpu_train", "generate", "eval2")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


# ---- env ----------------------------------------------------------------------------------


def phase_env(args: argparse.Namespace) -> dict:
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    import torch

    from chunkwise.train.mfu import peak_flops

    def ver(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    out: dict[str, Any] = {
        "python": sys.version.split()[0],
        "versions": {p: ver(p) for p in ("torch", "transformers", "accelerate", "peft")},
        "optional": {
            m: importlib.util.find_spec(m) is not None
            for m in ("deepspeed", "flash_attn", "vllm", "liger_kernel")
        },
        "cuda": _cuda(),
    }
    dev = "cuda" if out["cuda"] else "cpu"
    if out["cuda"]:
        out["gpu"] = torch.cuda.get_device_name()
        out["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        out["cuda_version"] = torch.version.cuda
    peak = peak_flops(out.get("gpu"))
    out["peak_bf16_tflops"] = None if peak is None else peak / 1e12
    n = 256 if args.dry_run else 8192
    dtype = torch.float32 if args.dry_run else torch.bfloat16
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    for _ in range(3):
        a @ b
    _sync()
    t = time.perf_counter()
    reps = 10
    for _ in range(reps):
        a @ b
    _sync()
    out["matmul_tflops"] = round(2 * n**3 * reps / (time.perf_counter() - t) / 1e12, 2)
    out["matmul"] = f"{n}x{n}x{n} {str(dtype).removeprefix('torch.')}"
    out["ok"] = True
    return out


# ---- sdpa ---------------------------------------------------------------------------------


def phase_sdpa(args: argparse.Namespace) -> dict:
    import contextlib

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from chunkwise.train.attention import varlen_sdpa_forward

    cuda = _cuda()
    dev = "cuda" if cuda else "cpu"
    T = 512 if args.dry_run else 65536
    heads, kv_heads, dim = (4, 2, 16) if args.dry_run else (32, 8, 128)
    dtype = torch.bfloat16 if cuda else torch.float32
    split = T * 5 // 8  # two packed sequences: position ids restart at `split`
    position_ids = torch.cat([torch.arange(split), torch.arange(T - split)])[None].to(dev)
    g = torch.Generator(device=dev).manual_seed(0)

    def rand(h: int) -> torch.Tensor:
        x = torch.randn(1, h, T, dim, device=dev, dtype=dtype, generator=g)
        return x.requires_grad_(True)

    q, k, v = rand(heads), rand(kv_heads), rand(kv_heads)

    class Module:  # the attention module argument: only .training is read
        training = True

    # flash only on CUDA (an unsupported input then raises instead of falling back); the CPU
    # dry run has no flash kernel and runs whatever SDPA picks
    flash = sdpa_kernel([SDPBackend.FLASH_ATTENTION]) if cuda else contextlib.nullcontext()
    out: dict[str, Any] = {
        "tokens": T,
        "sequences": [split, T - split],
        "heads": heads,
        "kv_heads": kv_heads,
        "head_dim": dim,
        "dtype": str(dtype).removeprefix("torch."),
        "backend": "flash only" if cuda else "cpu (any)",
    }
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(3):
        q.grad = k.grad = v.grad = None
        _sync()
        t = time.perf_counter()
        with flash:
            o, _ = varlen_sdpa_forward(
                Module(), q, k, v, None, scaling=dim**-0.5, position_ids=position_ids
            )
            o.float().square().mean().backward()
        _sync()
        times.append(time.perf_counter() - t)
    sec = min(times[1:])
    # causal attention FLOPs: fwd 2 matmuls of T_i^2/2 * dim per head, bwd 2.5x that
    flops = sum(4 * (n * n / 2) * dim * heads for n in (split, T - split)) * 3.5
    out.update(
        seconds=round(sec, 4),
        tflops_per_sec=round(flops / sec / 1e12, 1),
        peak_mem_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        grads_finite=all(bool(torch.isfinite(x.grad).all()) for x in (q, k, v)),
    )
    # correctness on a slice against the math kernel in fp32 (the first 2K of each sequence)
    m = min(2048, T - split)
    idx = torch.cat([torch.arange(m), torch.arange(split, split + m)]).to(dev)
    pos = torch.cat([torch.arange(m), torch.arange(m)])[None].to(dev)
    with torch.no_grad(), flash:
        fast, _ = varlen_sdpa_forward(
            Module(), q[:, :, idx], k[:, :, idx], v[:, :, idx], None, position_ids=pos
        )
    with torch.no_grad(), sdpa_kernel([SDPBackend.MATH]):
        ref = torch.cat(
            [
                torch.nn.functional.scaled_dot_product_attention(
                    q[:, :, s].float(),
                    k[:, :, s].float(),
                    v[:, :, s].float(),
                    is_causal=True,
                    enable_gqa=True,
                )
                for s in (idx[:m], idx[m:])
            ],
            dim=2,
        ).transpose(1, 2)
    out["max_abs_diff_vs_math"] = float((fast.float() - ref).abs().max())
    out["ok"] = out["grads_finite"] and out["max_abs_diff_vs_math"] < (0.05 if cuda else 1e-4)
    return out


# ---- tiny recipe: resume and pretrained ---------------------------------------------------


def _train(out: Path, *flags: str, env: dict | None = None, timeout: float = 600) -> dict:
    """One single-process run of the tiny recipe; (rc, losses by step, log tail)."""
    cmd = [sys.executable, str(REPO / "train" / "sft.py"), str(RECIPE)]
    cmd += [f"--data.paths=[{FIXTURE}]", "--data.limit=16", "--wandb.mode=disabled"]
    cmd += [f"--output_dir={out}", *flags]
    e = {**os.environ, "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    proc = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    losses: dict[int, float] = {}
    metrics = out / "metrics.jsonl"
    if metrics.exists():
        for line in metrics.read_text().splitlines():
            row = json.loads(line)
            losses[row["step"]] = row["train/loss"]
    return {"rc": proc.returncode, "losses": losses, "log": (proc.stdout + proc.stderr)[-1500:]}


def _steps(args: argparse.Namespace) -> tuple[int, int]:
    """(total steps, the step the killed run dies after): the recipe's 30 steps, enough for the
    pretrained phase to tell a trained model from a random one, in seconds even on CPU."""
    return 30, 6


def phase_resume(args: argparse.Namespace) -> dict:
    from chunkwise.train.loop import KILL_ENV

    total, kill = _steps(args)
    common = [f"--train.max_steps={total}", f"--train.save_steps={kill}"]
    straight = _train(args.out / "tiny-straight", *common)
    killed_dir = args.out / "tiny-killed"
    killed = _train(killed_dir, *common, env={KILL_ENV: str(kill)})
    resumed = _train(killed_dir, *common)
    info_path = killed_dir / "train_info.json"
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    a = [straight["losses"].get(s) for s in range(1, total + 1)]
    b = [resumed["losses"].get(s) for s in range(1, total + 1)]
    diff = max(
        (abs(x - y) for x, y in zip(a, b, strict=True) if x is not None and y is not None),
        default=math.inf,
    )
    out = {
        "steps": total,
        "killed_after": kill,
        "killed_rc": killed["rc"],
        "resumed_from": info.get("resumed_from"),
        "straight_losses": a,
        "resumed_losses": b,
        "max_abs_loss_diff": diff,
        "ok": straight["rc"] == 0
        and killed["rc"] != 0
        and resumed["rc"] == 0
        and info.get("resumed_from") == kill
        and None not in a + b
        and diff < 1e-3,
    }
    if not out["ok"]:
        out["logs"] = {"straight": straight["log"], "resumed": resumed["log"]}
    return out


def phase_pretrained(args: argparse.Namespace) -> dict:
    saved = args.out / "tiny-straight"
    if not (saved / "model.safetensors").exists():
        return {"ok": False, "error": f"no saved model in {saved} (the resume phase makes it)"}
    cfg = json.loads((saved / "config.json").read_text())
    ln_v = math.log(cfg["vocab_size"])
    # one step's loss swings with its batch: the trained level is the mean of the last 5
    tail = [json.loads(x)["train/loss"] for x in (saved / "metrics.jsonl").read_text().splitlines()]
    last = sum(tail[-5:]) / len(tail[-5:])
    init = ["--model.init=pretrained", f"--model.name_or_path={saved}", "--model.tokenizer="]
    runs = {}
    for name, extra in (
        ("full", []),
        ("lora_bf16_base", ["--model.lora.enabled=true", "--model.dtype=bfloat16"]),
    ):
        r = _train(args.out / f"pretrained-{name}", *init, *extra, "--train.max_steps=2")
        first = r["losses"].get(1)
        runs[name] = {
            "rc": r["rc"],
            "step1_loss": first,
            "ok": r["rc"] == 0
            and first is not None
            and first < (last + ln_v) / 2,  # nearer the trained level than a random model's
        }
        if not runs[name]["ok"]:
            runs[name]["log"] = r["log"]
    return {
        "saved_last5_mean_loss": last,
        "ln_vocab": ln_v,
        "runs": runs,
        "ok": all(r["ok"] for r in runs.values()),
    }


# ---- gpu_train ----------------------------------------------------------------------------


def phase_gpu_train(args: argparse.Namespace) -> dict:
    env = {**os.environ, "PYTHON": sys.executable}
    if args.dry_run:
        env.update(SEQ_LENS="256,512", STEPS="1")
        extra = ["--device", "cpu", "--layers", "1", "--answer-tokens", "32"]
        extra += [
            f"--override={k}={v}"
            for k, v in dict(
                hidden_size=64,
                intermediate_size=128,
                num_attention_heads=4,
                num_key_value_heads=2,
                vocab_size=512,
            ).items()
        ]
    else:
        env.update(SEQ_LENS="65536,131072", STEPS="2")
        extra = ["--layers", str(args.layers)]
    proc = subprocess.run(
        ["bash", str(REPO / "bench" / "gpu_train.sh"), *extra],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=args.timeout,
    )
    try:
        res = json.loads(proc.stdout[proc.stdout.index("{") :])
    except ValueError:
        return {"ok": False, "rc": proc.returncode, "log": (proc.stdout + proc.stderr)[-2000:]}
    res["ok"] = proc.returncode == 0 and all("error" not in r for r in res.get("runs", []))
    return res


# ---- generate -----------------------------------------------------------------------------


def phase_generate(args: argparse.Namespace) -> dict:
    import torch
    from transformers import LlamaForCausalLM

    from chunkwise.train.modeling import arch_config

    cuda = _cuda()
    dev = "cuda" if cuda else "cpu"
    if args.dry_run:
        over = dict(
            num_hidden_layers=1,
            hidden_size=64,
            intermediate_size=128,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=512,
        )
        prompt, new, batches = 128, 8, (1, 4)
    else:
        over = dict(num_hidden_layers=args.layers)
        prompt, new, batches = 8192, 128, (1, 8)
    cfg = arch_config("llama3.1-8b", over)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if cuda else torch.float32
    with torch.device(dev):
        model = LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa", dtype=dtype).eval()
    out: dict[str, Any] = {
        "model": f"llama3.1-8b shape, {cfg.num_hidden_layers} of 32 layers, random weights, "
        f"{str(dtype).removeprefix('torch.')}, sdpa, transformers generate (greedy)",
        "layers": cfg.num_hidden_layers,
        "prompt_tokens": prompt,
        "new_tokens": new,
        "runs": [],
    }
    for bs in batches:
        ids = torch.randint(0, cfg.vocab_size, (bs, prompt), device=dev)
        with torch.no_grad():
            model(ids[:, :16])  # warm-up
            _sync()
            t = time.perf_counter()
            model(ids, logits_to_keep=1)
            _sync()
            prefill = time.perf_counter() - t
            t = time.perf_counter()
            model.generate(
                ids, max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0
            )
            _sync()
            total = time.perf_counter() - t
        decode = max(total - prefill, 1e-9)
        row = {
            "batch": bs,
            "prefill_tok_per_sec": round(bs * prompt / prefill, 1),
            "decode_tok_per_sec": round(bs * new / decode, 1),
        }
        # the full 32-layer model: the layer stack scales the time (the head does not: upper bound)
        scale = 32 / cfg.num_hidden_layers
        row["prefill_tok_per_sec_32_layers_est"] = round(row["prefill_tok_per_sec"] / scale, 1)
        row["decode_tok_per_sec_32_layers_est"] = round(row["decode_tok_per_sec"] / scale, 1)
        out["runs"].append(row)
    if cuda:
        out["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    out["ok"] = all(
        r["prefill_tok_per_sec"] > 0 and r["decode_tok_per_sec"] > 0 for r in out["runs"]
    )
    return out


# ---- eval on 2 ranks ----------------------------------------------------------------------


def phase_eval2(args: argparse.Namespace) -> dict:
    model = args.out / "tiny-straight"
    if not (model / "model.safetensors").exists():
        return {"ok": False, "error": f"no saved model in {model} (the resume phase makes it)"}
    run = args.out / "eval2"
    # --standalone: a local rendezvous on a free port (a static one on port 0 never meets)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    cmd += [str(REPO / "eval" / "run.py")]
    cmd += ["--config", str(REPO / "recipes" / "eval" / "passkey-smoke.yaml")]
    cmd += [f"--model=hf:{model}", "--data=synthetic:400", "--limit=4", f"--output={run}"]
    cmd += ["--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    if not _cuda():
        env["CUDA_VISIBLE_DEVICES"] = ""
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, cwd=REPO, timeout=args.timeout
    )
    results = run / "results.json"
    preds = run / "predictions" / "passkey.jsonl"
    n = len(preds.read_text().splitlines()) if preds.exists() else 0
    world = None
    for line in proc.stdout.splitlines():
        if line.startswith("{") and '"world_size"' in line:
            world = json.loads(line).get("world_size")
    out = {"rc": proc.returncode, "world_size": world, "predictions": n}
    out["ok"] = proc.returncode == 0 and results.exists() and n == 4 and world == 2
    if not out["ok"]:
        out["log"] = (proc.stdout + proc.stderr)[-2000:]
    return out


# ---- summary ------------------------------------------------------------------------------


def summary(out_dir: Path) -> dict:
    phases = {}
    for name in PHASES:
        path = out_dir / f"{name}.json"
        if path.exists():
            phases[name] = json.loads(path.read_text())
        else:
            rc_path = out_dir / f"{name}.rc"
            rc = rc_path.read_text().strip() if rc_path.exists() else "not run"
            log = out_dir / f"{name}.log"
            phases[name] = {
                "ok": False,
                "rc": rc,
                "error": "timed out" if rc in ("124", "137") else "no result",
                "log": log.read_text()[-1500:] if log.exists() else "",
            }
        sec = out_dir / f"{name}.seconds"
        if sec.exists():
            phases[name]["seconds"] = float(sec.read_text())
    return {"ok": all(p.get("ok") for p in phases.values()), "phases": phases}


RUN = {
    "env": phase_env,
    "sdpa": phase_sdpa,
    "resume": phase_resume,
    "pretrained": phase_pretrained,
    "gpu_train": phase_gpu_train,
    "generate": phase_generate,
    "eval2": phase_eval2,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("phase", choices=(*PHASES, "summary"))
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--dry-run", action="store_true", help="CPU, tiny sizes (CI)")
    p.add_argument("--layers", type=int, default=8, help="layers of the 8B shape (of 32)")
    p.add_argument("--timeout", type=float, default=600, help="seconds for a sub-process")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.phase == "summary":
        print(json.dumps(summary(args.out), indent=2))
        return 0
    t = time.perf_counter()
    try:
        res = RUN[args.phase](args)
    except Exception as e:  # a phase's failure is a result, not a crash of the check
        res = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:1000]}"}
    res["seconds"] = round(time.perf_counter() - t, 1)
    (args.out / f"{args.phase}.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(json.dumps({"phase": args.phase, "ok": res.get("ok"), "seconds": res["seconds"]}))
    return 0 if res.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
