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
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chunkwise.config import config_to_dict, dump_yaml
from chunkwise.errors import BadInput, ChunkwiseError
from chunkwise.train.recipe import Recipe, load_recipe, training_files
from chunkwise.train.runinfo import (
    git_sha,
    machine,
    new_run_id,
    note_wandb_step,
    versions,
    wandb_init_kwargs,
    wandb_logged_step,
    wandb_mode,
)
from chunkwise.train.saving import (
    FINAL_TMP,
    TRUST_FLAG,
    checkpoints,
    hold_output_dir,
    incomplete_final,
    resume_point,
    save_checkpoint,
    save_final,
    save_full_model,
    trim_metrics,
)
from chunkwise.train.steps import Layout, _as_float, _sp_size, forward_backward, lr_at, step_counts

log = logging.getLogger(__name__)

#: test hook: SIGKILL this process right after finishing (and checkpointing) this step
KILL_ENV = "CHUNKWISE_TRAIN_KILL_AT_STEP"
#: test hook: after checkpointing this step, wait (doing nothing) until killed from outside
HOLD_ENV = "CHUNKWISE_TRAIN_HOLD_AT_STEP"


def run(recipe: Recipe, *, trust_checkpoint: bool = False) -> dict[str, Any]:
    """Train per ``recipe``; returns a summary (also written to ``train_info.json``).

    ``output_dir`` must be absent, empty or a folder chunkwise train made, and is locked for
    the run (a second run on it is refused). A resume loads the latest checkpoint only when its
    files are those its save recorded (``trust_checkpoint=True`` skips that check: resuming
    unpickles the checkpoint's files, see :func:`chunkwise.train.saving.resume_point`)."""
    with contextlib.ExitStack() as held:
        return _run(recipe, held, trust_checkpoint=trust_checkpoint)


def _run(recipe: Recipe, held: contextlib.ExitStack, *, trust_checkpoint: bool) -> dict[str, Any]:
    import torch
    from accelerate.utils import DistributedType, set_seed

    from chunkwise.train.engine import build_accelerator, load_dtype
    from chunkwise.train.example_cache import cached_examples
    from chunkwise.train.formats import examples_sha256, files_sha256
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
    files = training_files(r.data)
    cuda = torch.cuda.is_available()
    precision = tc.precision if tc.precision != "auto" else ("bf16" if cuda else "fp32")
    mode = wandb_mode(r)
    os.environ["WANDB_MODE"] = mode
    from chunkwise.train.modeling import has_module

    trackers = mode != "disabled" and has_module("wandb")
    accelerator, engine = build_accelerator(
        gradient_accumulation_steps=tc.grad_accum,
        mixed_precision="bf16" if precision == "bf16" else "no",
        log_with="wandb" if trackers else None,
        project_dir=str(out_dir),
    )
    is_main = accelerator.is_main_process
    # the main process checks and locks output_dir before any rank writes (all or none go on)
    held.enter_context(hold_output_dir(accelerator, r))
    if not is_main:  # one set of progress lines per run, not one per rank
        logging.getLogger("chunkwise").setLevel(logging.WARNING)
    deepspeed = accelerator.distributed_type == DistributedType.DEEPSPEED
    set_seed(tc.seed)

    # ---- everything that can fail on input, before the model exists ----------------------
    data_hash = files_sha256(files)
    with accelerator.main_process_first():  # rank 0 trains the tokenizer / tokenizes first
        tokenizer = build_tokenizer(r, files, is_main=is_main)
        kind = prompt_kind(r, tokenizer)
        # the others load the main process's cache (and build it only if that failed)
        examples, stats, cache_hit = cached_examples(
            r.data, tokenizer, kind, files, out_dir / "cache"
        )
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
    start, state, resume_from = 0, {}, None
    if tc.resume == "auto":  # checked here, before a model exists; loaded after prepare()
        start, state, resume_from = resume_point(
            accelerator, ckpt_root, examples_hash, trust=trust_checkpoint
        )

    # ---- model ------------------------------------------------------------------------
    lora_cfg = r.model.lora
    dtype = getattr(
        torch,
        load_dtype(
            r.model.dtype, cuda=cuda, engine=engine, lora=lora_cfg.enabled, precision=precision
        ),
    )
    ds_plugin = accelerator.state.deepspeed_plugin if deepspeed else None
    # a random-init model is built whole (it is small), outside ZeRO-3's partitioned
    # construction (zero.Init), whose initialization draws differently: every engine then
    # starts from the same seeded weights; deepspeed.initialize partitions it afterwards
    whole = ds_plugin is not None and r.model.init == "random"
    with _without_zero_init(ds_plugin) if whole else contextlib.nullcontext():
        model = build_model(r, tokenizer, cuda=cuda, dtype=dtype)
        base_saved = None
        if lora_cfg.enabled and r.model.init == "random":
            base_saved = out_dir / "base"  # the random base an adapter needs at evaluation
            if not (base_saved / "config.json").exists():
                save_full_model(model, tokenizer, base_saved, is_main=is_main)
            accelerator.wait_for_everyone()
        if lora_cfg.enabled:
            model = apply_lora(model, lora_cfg, tokenizer)
    n_params, n_trainable = count_params(model)
    arch = Arch.from_config(model.config)
    lora_params = n_trainable if lora_cfg.enabled else 0

    params = [p for p in model.parameters() if p.requires_grad]
    opt_kwargs = dict(
        lr=tc.lr, betas=tuple(tc.adam_betas), eps=tc.adam_eps, weight_decay=tc.weight_decay
    )
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
    if resume_from is not None:
        accelerator.load_state(str(resume_from))
        log.info("resumed from %s (step %d of %d)", resume_from, start, total)

    metrics_path = out_dir / "metrics.jsonl"
    repaired = incomplete_final(out_dir)
    if repaired:
        log.warning(
            "%s holds weights but no train_info.json: its last final save did not finish; "
            "this run saves the model again",
            out_dir,
        )
    if is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        trim_metrics(metrics_path, start)

    resolved = config_to_dict(r)
    sha = git_sha()
    run_config = {
        "recipe": resolved,
        "git_sha": sha,
        "data_sha256": data_hash,
        "examples_sha256": examples_hash,
        "data_stats": stats.to_dict(),
        "examples_from_cache": cache_hit,
        "prompt_kind": kind,
        "engine": engine,
        "world_size": layout.world,
        "sp_size": layout.sp,
        "params": n_params,
        "trainable_params": n_trainable,
        "versions": versions(),
        "machine": machine(),
    }
    if is_main:
        dump_yaml(r, out_dir / "recipe.yaml")
    if trackers:
        run_id = state.get("wandb_id") or new_run_id(out_dir, is_main)
        accelerator.init_trackers(
            r.wandb.project,
            config=run_config,
            init_kwargs={"wandb": wandb_init_kwargs(r, out_dir, run_id, start, mode)},
        )
        state["wandb_id"] = run_id
    log.info(
        "training %s with %s: %d examples, %d steps (%d per epoch, %d micro-batches dropped "
        "per epoch), world %d (sp %d), %s batching, %s prompts, %.1fM params (%.1fM trainable)",
        r.run_name,
        engine,
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
    # offline wandb cannot rewind: skip the steps a killed run already logged
    wandb_done = wandb_logged_step(out_dir) if trackers and mode != "online" else 0
    hold_at = int(os.environ.get(HOLD_ENV, "0") or 0)
    last: dict[str, Any] = dict(state.get("last_metrics") or {})  # a finished run keeps them
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
                stage_weights=tc.stage_weights,
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
        if (
            trackers
            and step + 1 > wandb_done
            and ((step + 1) % tc.log_steps == 0 or step + 1 == total)
        ):
            accelerator.log(
                {k: v for k, v in last.items() if k.startswith("train/") and v is not None},
                step=step + 1,
            )
            if is_main:
                note_wandb_step(out_dir, step + 1)
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
                last_metrics=last,
            )
            save_checkpoint(accelerator, ckpt_root, step + 1, state, tc.save_total_limit)
        if kill_at and step + 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if hold_at and step + 1 == hold_at:
            while True:  # a test kills the whole launch with SIGKILL from outside
                signal.pause()
    bar.close()

    # ---- final model ----------------------------------------------------------------------
    accelerator.wait_for_everyone()
    summary = {
        **run_config,
        "steps": total,
        "resumed_from": start,
        "repaired_incomplete_final": repaired,
        "final": last,
        "seconds": round(time.perf_counter() - t_start, 2),
    }
    save_final(accelerator, model, tokenizer, r, out_dir, base_saved, summary)
    if trackers:
        accelerator.end_training()
    summary["losses"] = losses
    return summary


# --------------------------------------------------------------------------------------------
# entry


USAGE = """usage: train/sft.py RECIPE.yaml [--key=value ...] [--trust_checkpoint]

Fine-tune per a recipe (recipes/*/*.yaml); --key=value overrides any recipe key, e.g.
--train.lr=1e-5 --data.max_length=32768 --output_dir=runs/train/x. Launch on GPUs with
  accelerate launch --config_file configs/accelerate/zero3.yaml train/sft.py RECIPE.yaml
A rerun with the same output_dir resumes from its latest checkpoint, once its files match the
sha256 recorded at save; --trust_checkpoint skips that check (resuming unpickles the files:
only for checkpoints you trust, e.g. written by an older chunkwise)."""


@contextlib.contextmanager
def _without_zero_init(ds_plugin: Any) -> Any:
    """transformers builds models under ``deepspeed.zero.Init`` while accelerate's DeepSpeed
    config is registered with it; unregister it for the block, then register it again.
    (accelerate's own ``zero3_init_context_manager(enable=False)`` re-registers the same
    ZeRO-3 config, which transformers still reads as ZeRO-3.)"""
    from transformers.integrations import unset_hf_deepspeed_config

    unset_hf_deepspeed_config()
    try:
        yield
    finally:
        ds_plugin.set_deepspeed_weakref()


def main(argv: Sequence[str] | None = None) -> int:
    from chunkwise.logs import setup_logging

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    verbose = "-v" in args or "--verbose" in args
    trust = TRUST_FLAG in args
    args = [a for a in args if a not in ("-v", "--verbose", TRUST_FLAG)]
    setup_logging(verbose=verbose)
    path, overrides = args[0], args[1:]
    if path.startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        recipe = load_recipe(path, overrides)
        summary = run(recipe, trust_checkpoint=trust)
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


__all__ = [
    "FINAL_TMP",
    "HOLD_ENV",
    "KILL_ENV",
    "Layout",
    "checkpoints",
    "forward_backward",
    "incomplete_final",
    "lr_at",
    "main",
    "run",
    "step_counts",
]
