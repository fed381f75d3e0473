"""A lean Accelerate training loop for long-context SFT.

``run(recipe)`` does, in order, everything that can fail on bad input *before* the model is
loaded (recipe checks, data paths, tokenizer, formatting every record, the batch plan), then:
build the model -> ``accelerator.prepare`` (DDP, DeepSpeed ZeRO-2/3, FSDP2 or DeepSpeed Ulysses,
whatever ``accelerate launch --config_file`` set up) -> resume from the latest checkpoint ->
train -> save a folder ``chunkwise eval --model`` loads.

One optimizer step = ``grad_accum`` micro-batches on each data-parallel rank. The batch plan of an
epoch is a deterministic function of (seed, epoch), and micro-batch ``(step, m, rank)`` is
element ``(step * grad_accum + m) * dp_world + dp_rank`` of it, so resuming at step k replays
exactly the data an uninterrupted run would see; together with the model, optimizer and RNG
states from ``accelerator.save_state`` the loss curve continues unchanged.

The learning rate is a pure function of the step (linear warmup, cosine to ``min_lr_ratio``),
set on the optimizer before each step, so it needs no state of its own.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chunkwise.config import config_to_dict, dump_yaml
from chunkwise.errors import BadInput, ChunkwiseError
from chunkwise.io import atomic_write_json
from chunkwise.train.recipe import Recipe, data_files, load_recipe

log = logging.getLogger(__name__)

#: test hook: SIGKILL this process right after finishing (and checkpointing) this step
KILL_ENV = "CHUNKWISE_TRAIN_KILL_AT_STEP"
CKPT_RE = re.compile(r"^step-(\d+)$")


# --------------------------------------------------------------------------------------------
# small helpers


def lr_at(step: int, total: int, warmup: int, peak: float, min_ratio: float) -> float:
    """Learning rate for optimizer step ``step`` (0-based): linear warmup, then cosine."""
    if warmup > 0 and step < warmup:
        return peak * (step + 1) / warmup
    span = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / span)
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def _as_float(x: Any) -> float | None:
    """A grad norm as a float (DTensors from FSDP2 are gathered first)."""
    if x is None:
        return None
    if hasattr(x, "full_tensor"):
        x = x.full_tensor()
    return float(x)


def git_sha(cwd: str | Path | None = None) -> str | None:
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("-dirty" if dirty else "")


def checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints (those with trainer_state.json, written last), oldest first."""
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        m = CKPT_RE.match(p.name)
        if m and (p / "trainer_state.json").exists():
            out.append((int(m.group(1)), p))
    return sorted(out)


def _versions() -> dict[str, str]:
    import accelerate
    import torch
    import transformers

    out = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "accelerate": accelerate.__version__,
    }
    for name in ("peft", "deepspeed", "flash_attn", "liger_kernel"):
        with contextlib.suppress(Exception):
            out[name] = __import__(name).__version__
    return out


def _wandb_mode(recipe: Recipe) -> str:
    mode = recipe.wandb.mode
    if mode == "auto":
        mode = os.environ.get("WANDB_MODE") or "offline"
    return mode


# --------------------------------------------------------------------------------------------
# distributed layout


def _sp_size(accelerator: Any) -> int:
    """Sequence-parallel degree set by the accelerate config (1 without one)."""
    pc = getattr(accelerator, "parallelism_config", None)
    return int(pc.sp_size) if pc is not None and getattr(pc, "sp_enabled", False) else 1


class Layout:
    """Which data this rank sees: data-parallel index/size and sequence-parallel rank/size."""

    def __init__(self, accelerator: Any):
        self.world = accelerator.num_processes
        self.rank = accelerator.process_index
        self.sp, self.sp_rank = 1, 0
        pc = getattr(accelerator, "parallelism_config", None)
        if pc is not None and getattr(pc, "cp_enabled", False):
            raise BadInput(
                "context parallelism (parallelism_config_cp_size > 1) is not wired into "
                "this loop; use configs/accelerate/ulysses.yaml (DeepSpeed Ulysses) for "
                "sequences longer than one GPU holds"
            )
        if pc is not None and getattr(pc, "sp_enabled", False):
            from deepspeed.utils import groups

            self.sp = groups._get_sequence_parallel_world_size()
            self.sp_rank = groups._get_sequence_parallel_rank()
            if self.sp_rank != self.rank % self.sp:
                raise RuntimeError("sequence-parallel groups are expected to be consecutive ranks")
        self.dp_world = self.world // self.sp
        self.dp_rank = self.rank // self.sp


# --------------------------------------------------------------------------------------------
# the run


def step_counts(
    accelerator: Any,
    batches: list[dict],
    layout: Layout,
    weighting: str,
    *,
    arch: Any = None,
    lora_params: int = 0,
    lora: bool = False,
) -> tuple[float, float, float]:
    """(loss units, tokens, FLOPs) of one optimizer step summed over every rank, each sequence
    counted once per sequence-parallel group. Units: sequences with targets (weighting=sequence)
    or target tokens (weighting=token); the loss of the step is its weighted sum / units."""
    import torch

    from chunkwise.train.mfu import step_flops

    lead = layout.sp_rank == 0
    key = "n_seqs" if weighting == "sequence" else "n_targets"
    flops = 0.0
    if lead and arch is not None:
        flops = sum(
            step_flops(arch, b["seq_lengths"], b["n_targets"], lora_params=lora_params, lora=lora)
            for b in batches
        )
    local = torch.tensor(
        [
            sum(b[key] for b in batches) if lead else 0,
            sum(b["n_tokens"] for b in batches) if lead else 0,
            flops,
        ],
        dtype=torch.float64,
        device=accelerator.device,
    )
    units, tokens, total_flops = accelerator.reduce(local, reduction="sum").tolist()
    return units, tokens, total_flops


def forward_backward(
    accelerator: Any,
    model: Any,
    batches: list[dict],
    *,
    scale: float,
    chunk: int = 8192,
    impl: str = "torch",
) -> Any:
    """Forward and backward every micro-batch of one step (gradient sync on the last one);
    returns this rank's summed, unscaled weighted loss (a detached scalar tensor)."""
    import torch

    from chunkwise.train.loss import batch_loss_sum

    loss_sum = torch.zeros((), dtype=torch.float32, device=accelerator.device)
    for b in batches:
        with accelerator.accumulate(model):
            tensors = {
                k: v.to(accelerator.device) for k, v in b.items() if isinstance(v, torch.Tensor)
            }
            s = batch_loss_sum(model, tensors, chunk=chunk, impl=impl)
            accelerator.backward(s * scale)
            loss_sum += s.detach().float()
    return loss_sum


def run(recipe: Recipe) -> dict[str, Any]:
    """Train per ``recipe``; returns a summary (also written to ``train_info.json``)."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DistributedType, set_seed

    from chunkwise.train.formats import build_examples, examples_sha256, files_sha256
    from chunkwise.train.loss import backward_scale
    from chunkwise.train.mfu import Arch, mfu, peak_flops
    from chunkwise.train.modeling import (
        apply_lora,
        build_model,
        build_tokenizer,
        count_params,
        prompt_kind,
        use_liger,
    )
    from chunkwise.train.packing import collate, plan_epoch, shard_sequence

    t_start = time.perf_counter()
    r, tc = recipe, recipe.train
    out_dir = Path(r.output_dir)
    files = data_files(r.data.paths)
    cuda = torch.cuda.is_available()
    precision = tc.precision if tc.precision != "auto" else ("bf16" if cuda else "fp32")
    mode = _wandb_mode(r)
    os.environ["WANDB_MODE"] = mode
    from chunkwise.train.modeling import has_module

    trackers = mode != "disabled" and has_module("wandb")
    accelerator = Accelerator(
        cpu=not cuda,  # without it, torchrun ranks on a CPU machine each run alone (no gloo group)
        gradient_accumulation_steps=tc.grad_accum,
        mixed_precision="bf16" if precision == "bf16" else "no",
        log_with="wandb" if trackers else None,
        project_dir=str(out_dir),
    )
    is_main = accelerator.is_main_process
    if not is_main:  # one set of progress lines per run, not one per rank
        logging.getLogger("chunkwise").setLevel(logging.WARNING)
    deepspeed = accelerator.distributed_type == DistributedType.DEEPSPEED
    set_seed(tc.seed)

    # ---- everything that can fail on input, before the model exists ----------------------
    data_hash = files_sha256(files)
    tokenizer = build_tokenizer(r, files, is_main=is_main)
    kind = prompt_kind(r, tokenizer)
    examples, stats = build_examples(r.data, tokenizer, kind, files)
    lengths = [len(e) for e in examples]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    # ---- the plan -------------------------------------------------------------------------
    sp_size = _sp_size(accelerator)
    dp_world = accelerator.num_processes // sp_size
    group = dp_world * tc.grad_accum
    multiple = math.lcm(r.batching.pad_to_multiple_of, sp_size)

    def epoch_plan(epoch: int) -> list:
        return plan_epoch(
            lengths,
            strategy=r.batching.strategy,
            max_tokens=r.batching.max_tokens,
            batch_size=r.batching.batch_size,
            seed=tc.seed,
            epoch=epoch,
            group=group,
        )

    plans: dict[int, list] = {0: epoch_plan(0)}
    steps_per_epoch = len(plans[0]) // group
    if steps_per_epoch == 0:
        raise BadInput(
            f"{len(plans[0])} micro-batches per epoch, but one optimizer step needs "
            f"{group} ({dp_world} data-parallel ranks x grad_accum "
            f"{tc.grad_accum}); add data or lower train.grad_accum"
        )
    dropped = len(plans[0]) - steps_per_epoch * group
    total = tc.max_steps or tc.epochs * steps_per_epoch
    warmup = tc.warmup_steps or round(tc.warmup_ratio * total)
    peak = (
        tc.peak_tflops * 1e12
        if tc.peak_tflops
        else peak_flops(torch.cuda.get_device_name() if cuda else None)
    )

    # ---- resume ---------------------------------------------------------------------------
    ckpt_root = out_dir / "checkpoints"
    examples_hash = examples_sha256(examples)
    start = 0
    state: dict[str, Any] = {}
    found = checkpoints(ckpt_root) if tc.resume == "auto" else []
    if found:
        step_found, path = found[-1]
        state = json.loads((path / "trainer_state.json").read_text())
        if state.get("examples_sha256") != examples_hash:
            raise BadInput(
                f"{path}: the training examples changed since this checkpoint (data, "
                "tokenizer or format settings); use a new output_dir or "
                "--train.resume=never"
            )
        start = step_found

    # ---- model ------------------------------------------------------------------------
    if r.model.dtype == "auto":
        dtype = torch.bfloat16 if (deepspeed and cuda) else torch.float32
    else:
        dtype = getattr(torch, r.model.dtype)
    lora_cfg = r.model.lora
    model = build_model(r, tokenizer, cuda=cuda, dtype=dtype)
    base_saved = None
    if lora_cfg.enabled and r.model.init == "random" and is_main:
        base_saved = out_dir / "base"  # the random base an adapter needs at evaluation time
        if not (base_saved / "config.json").exists():
            model.save_pretrained(base_saved)
            tokenizer.save_pretrained(base_saved)
    if lora_cfg.enabled:
        model = apply_lora(model, lora_cfg)
    n_params, n_trainable = count_params(model)
    arch = Arch.from_config(model.config)
    lora_params = n_trainable if lora_cfg.enabled else 0

    params = [p for p in model.parameters() if p.requires_grad]
    opt_kwargs = dict(
        lr=tc.lr, betas=tuple(tc.adam_betas), eps=tc.adam_eps, weight_decay=tc.weight_decay
    )
    ds_plugin = accelerator.state.deepspeed_plugin if deepspeed else None
    if ds_plugin is not None:
        ds_cfg = ds_plugin.deepspeed_config
        ds_cfg["train_micro_batch_size_per_gpu"] = 1
        ds_cfg["gradient_accumulation_steps"] = tc.grad_accum
        ds_cfg["gradient_clipping"] = tc.max_grad_norm
        offload = ((ds_cfg.get("zero_optimization") or {}).get("offload_optimizer") or {}).get(
            "device"
        )
        if offload in ("cpu", "nvme"):
            from deepspeed.ops.adam import DeepSpeedCPUAdam

            optimizer = DeepSpeedCPUAdam(params, **opt_kwargs)
        else:
            optimizer = torch.optim.AdamW(params, **opt_kwargs)
    else:
        optimizer = torch.optim.AdamW(params, **opt_kwargs, foreach=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    layout = Layout(accelerator)
    if layout.sp != sp_size:
        raise RuntimeError(f"sequence-parallel size {layout.sp} != configured {sp_size}")
    ce_impl = "liger" if use_liger(r.model.liger, cuda) else "torch"
    if found:
        accelerator.load_state(str(found[-1][1]))
        log.info("resumed from %s (step %d of %d)", found[-1][1], start, total)

    metrics_path = out_dir / "metrics.jsonl"
    if is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        _trim_metrics(metrics_path, start)

    resolved = config_to_dict(r)
    sha = git_sha()
    run_config = {
        "recipe": resolved,
        "git_sha": sha,
        "data_sha256": data_hash,
        "examples_sha256": examples_hash,
        "data_stats": stats.to_dict(),
        "prompt_kind": kind,
        "world_size": layout.world,
        "sp_size": layout.sp,
        "params": n_params,
        "trainable_params": n_trainable,
        "versions": _versions(),
    }
    if is_main:
        dump_yaml(r, out_dir / "recipe.yaml")
    if trackers:
        run_id = state.get("wandb_id") or _new_run_id(out_dir, is_main)
        accelerator.init_trackers(
            r.wandb.project,
            config=run_config,
            init_kwargs={
                "wandb": {
                    "name": r.run_name,
                    "dir": str(out_dir),
                    "id": run_id,
                    "resume": "allow",
                    "group": r.wandb.group or None,
                    "tags": list(r.wandb.tags) or None,
                }
            },
        )
        state["wandb_id"] = run_id
    log.info(
        "training %s: %d examples, %d steps (%d per epoch, %d micro-batches dropped per "
        "epoch), world %d (sp %d), %s batching, %s prompts, %.1fM params (%.1fM trainable)",
        r.run_name,
        len(examples),
        total,
        steps_per_epoch,
        dropped,
        layout.world,
        layout.sp,
        r.batching.strategy,
        kind,
        n_params / 1e6,
        n_trainable / 1e6,
    )

    # ---- train ----------------------------------------------------------------------------
    kill_at = int(os.environ.get(KILL_ENV, "0") or 0)
    last: dict[str, Any] = {}
    losses: list[float] = []
    model.train()
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=start, disable=not is_main, desc="train", dynamic_ncols=True)
    for step in range(start, total):
        epoch, in_epoch = divmod(step, steps_per_epoch)
        if epoch not in plans:
            plans.clear()
            plans[epoch] = epoch_plan(epoch)
        plan = plans[epoch]
        lr = lr_at(step, total, warmup, tc.lr, tc.min_lr_ratio)
        for g in optimizer.param_groups:
            g["lr"] = lr
        t0 = time.perf_counter()
        batches = []
        for m in range(tc.grad_accum):
            mb = plan[(in_epoch * tc.grad_accum + m) * layout.dp_world + layout.dp_rank]
            b = collate(
                examples,
                mb,
                pad_id=pad_id,
                weighting=tc.loss_weighting,
                pad_to_multiple_of=multiple,
            )
            batches.append(shard_sequence(b, layout.sp, layout.sp_rank))
        units, tokens, flops = step_counts(
            accelerator,
            batches,
            layout,
            tc.loss_weighting,
            arch=arch,
            lora_params=lora_params,
            lora=lora_cfg.enabled,
        )
        scale = backward_scale(layout.world, tc.grad_accum, units)
        loss_sum = forward_backward(
            accelerator, model, batches, scale=scale, chunk=tc.ce_chunk_tokens, impl=ce_impl
        )
        grad_norm = None
        if tc.max_grad_norm > 0:
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), tc.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if grad_norm is None and hasattr(model, "get_global_grad_norm"):
            grad_norm = model.get_global_grad_norm()  # DeepSpeed clips and measures it itself
        loss = accelerator.reduce(loss_sum.reshape(1), reduction="sum").item() / max(units, 1e-12)
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        losses.append(loss)
        last = {
            "step": step + 1,
            "epoch": round(step / steps_per_epoch, 4),
            "train/loss": loss,
            "train/lr": lr,
            "train/grad_norm": _as_float(grad_norm),
            "train/tok_per_sec": tokens / dt,
            "train/mfu": mfu(flops, dt, layout.world, peak),
            "train/step_seconds": dt,
            "train/tokens": int(tokens),
            "train/sequences": int(units) if tc.loss_weighting == "sequence" else None,
        }
        if cuda:
            last["train/peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        if is_main:
            with open(metrics_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(last) + "\n")
        if trackers and ((step + 1) % tc.log_steps == 0 or step + 1 == total):
            accelerator.log(
                {k: v for k, v in last.items() if k.startswith("train/") and v is not None},
                step=step + 1,
            )
        bar.update(1)
        bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}")
        if (step + 1) % tc.log_steps == 0:
            mfu_text = "n/a" if last["train/mfu"] is None else f"{last['train/mfu']:.1%}"
            log.info(
                "step %d/%d loss %.4f lr %.2e grad_norm %s tok/s %.0f mfu %s",
                step + 1,
                total,
                loss,
                lr,
                "n/a" if last["train/grad_norm"] is None else f"{last['train/grad_norm']:.3f}",
                last["train/tok_per_sec"],
                mfu_text,
            )
        if (step + 1) % tc.save_steps == 0 or step + 1 == total:
            state.update(
                step=step + 1,
                total_steps=total,
                examples_sha256=examples_hash,
                data_sha256=data_hash,
                loss=loss,
            )
            _save_checkpoint(accelerator, ckpt_root, step + 1, state, tc.save_total_limit)
        if kill_at and step + 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    bar.close()

    # ---- final model ----------------------------------------------------------------------
    accelerator.wait_for_everyone()
    summary = {
        **run_config,
        "steps": total,
        "resumed_from": start,
        "final": last,
        "seconds": round(time.perf_counter() - t_start, 2),
    }
    _save_final(accelerator, model, tokenizer, r, out_dir, base_saved, summary)
    if trackers:
        accelerator.end_training()
    summary["losses"] = losses
    return summary


def _new_run_id(out_dir: Path, is_main: bool) -> str:
    import uuid

    path = out_dir / "wandb_id.txt"
    if path.exists():
        return path.read_text().strip()
    run_id = uuid.uuid4().hex[:12]
    if is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(run_id)
    return run_id


def _trim_metrics(path: Path, upto: int) -> None:
    """Drop metric lines past step ``upto`` (left by a run killed after its last checkpoint)."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line)["step"] <= upto:
                keep.append(line)
        except (ValueError, KeyError, TypeError):
            continue
    from chunkwise.io import atomic_write_text

    atomic_write_text(path, "".join(x + "\n" for x in keep))


def _save_checkpoint(accelerator: Any, root: Path, step: int, state: dict, limit: int) -> None:
    """accelerator.save_state into step-N.tmp, then trainer_state.json, then rename: a kill
    at any moment leaves either a complete checkpoint or none."""
    final = root / f"step-{step:08d}"
    tmp = root / f"step-{step:08d}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        atomic_write_json(tmp / "trainer_state.json", state)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        if limit > 0:
            for _, old in checkpoints(root)[:-limit]:
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def _save_final(
    accelerator: Any,
    model: Any,
    tokenizer: Any,
    r: Recipe,
    out_dir: Path,
    base_saved: Path | None,
    summary: dict,
) -> None:
    from chunkwise.llm.hf import BASE_SPEC_FILE
    from chunkwise.train.modeling import EMBEDDED_NAMES

    state_dict = accelerator.get_state_dict(model)  # gathers ZeRO-3 / FSDP shards (all ranks)
    if not accelerator.is_main_process:
        accelerator.wait_for_everyone()
        return
    unwrapped = accelerator.unwrap_model(model)
    cfg = getattr(unwrapped, "config", None)
    if cfg is not None:
        cfg.use_cache = True
    unwrapped.save_pretrained(out_dir, state_dict=state_dict)
    tokenizer.save_pretrained(out_dir)
    if r.model.lora.enabled:
        if base_saved is not None:
            base = "hf:" + str(base_saved.resolve())
        elif r.model.name_or_path in EMBEDDED_NAMES:
            base = "hf:default"
        else:
            p = Path(r.model.name_or_path).expanduser()
            base = "hf:" + (str(p.resolve()) if p.exists() else r.model.name_or_path)
        atomic_write_json(out_dir / BASE_SPEC_FILE, {"base": base})
    dump_yaml(r, out_dir / "recipe.yaml")
    atomic_write_json(out_dir / "train_info.json", summary)
    log.info("saved %s to %s", "LoRA adapter" if r.model.lora.enabled else "model", out_dir)
    accelerator.wait_for_everyone()


# --------------------------------------------------------------------------------------------
# entry


USAGE = """usage: train/sft.py RECIPE.yaml [--key=value ...]

Fine-tune per a recipe (recipes/*/*.yaml); --key=value overrides any recipe key, e.g.
--train.lr=1e-5 --data.max_length=32768 --output_dir=runs/train/x. Launch on GPUs with
  accelerate launch --config_file configs/accelerate/zero3.yaml train/sft.py RECIPE.yaml
A rerun with the same output_dir resumes from its latest checkpoint."""


def main(argv: Sequence[str] | None = None) -> int:
    from chunkwise.logs import setup_logging

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    verbose = "-v" in args or "--verbose" in args
    args = [a for a in args if a not in ("-v", "--verbose")]
    setup_logging(verbose=verbose)
    path, overrides = args[0], args[1:]
    if path.startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        recipe = load_recipe(path, overrides)
        summary = run(recipe)
    except ChunkwiseError as e:
        print(f"train: error: {e}", file=sys.stderr)
        return 2
    if int(os.environ.get("RANK", "0") or 0) != 0:
        return 0
    final = summary.get("final") or {}
    print(
        json.dumps(
            {
                "output_dir": recipe.output_dir,
                "steps": summary["steps"],
                "final_loss": final.get("train/loss"),
                "seconds": summary["seconds"],
            }
        )
    )
    return 0


__all__ = ["Layout", "checkpoints", "forward_backward", "lr_at", "main", "run", "step_counts"]
