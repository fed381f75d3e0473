"""One training run of a recipe, in torchtune's recipe shape: :meth:`Trainer.setup`,
:meth:`Trainer.train` (one :meth:`Trainer.train_step` per optimizer step, a
:meth:`Trainer.save_checkpoint` every ``save_steps``), :meth:`Trainer.save`.

``setup`` does, in order, everything that can fail on bad input *before* the model is loaded
(recipe checks, data paths, tokenizer, formatting every record, the batch plan), then builds the
model -> ``accelerator.prepare`` (DDP, DeepSpeed ZeRO-2/3, FSDP2 or DeepSpeed Ulysses, whatever
``accelerate launch --config_file`` set up) -> resumes from the latest checkpoint. ``save``
writes a folder ``chunkwise eval --model`` loads.

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
import time
from pathlib import Path
from typing import Any

from chunkwise.config import config_to_dict, dump_yaml
from chunkwise.errors import BadInput
from chunkwise.train.checkpoint_contents import load_state, setup_checkpoints
from chunkwise.train.engine import process_group_timeout
from chunkwise.train.multinode import check_resume_layout, check_shared_output_dir, layout_of
from chunkwise.train.recipe import Recipe, training_files
from chunkwise.train.runinfo import (
    InputPositions,
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
    base_spec,
    hold_output_dir,
    incomplete_final,
    resume_point,
    save_checkpoint,
    save_final,
    trim_metrics,
)
from chunkwise.train.steps import Layout, _as_float, _sp_size, forward_backward, lr_at, step_counts

#: the training loop's one logger (saving.py logs under it too)
log = logging.getLogger("chunkwise.train.loop")

#: test hook: SIGKILL this process right after finishing (and checkpointing) this step
KILL_ENV = "CHUNKWISE_TRAIN_KILL_AT_STEP"
#: test hook: after checkpointing this step, wait (doing nothing) until killed from outside
HOLD_ENV = "CHUNKWISE_TRAIN_HOLD_AT_STEP"


class Trainer:
    """Train per a recipe: ``setup(held)``, ``train()``, then ``save()`` returns the summary
    (also written to ``train_info.json``). :func:`chunkwise.train.loop.run` calls the three."""

    def __init__(self, recipe: Recipe, *, trust_checkpoint: bool = False) -> None:
        self.recipe = recipe
        self.tc = recipe.train
        self.out_dir = Path(recipe.output_dir)
        #: resume from a checkpoint whose files do not match their recorded sha256 (unpickles)
        self.trust_checkpoint = trust_checkpoint
        self.losses: list[float] = []

    # ---- setup ----------------------------------------------------------------------------

    def setup(self, held: contextlib.ExitStack) -> None:
        """Everything before the first step; ``held`` keeps ``output_dir`` locked until the
        caller's ``with`` ends."""
        self.t_start = time.perf_counter()
        self._setup_accelerator(held)
        # everything that can fail on input, before the model exists
        self._setup_data()
        self._setup_plan()
        self._setup_resume()
        self._setup_model()
        self._setup_run_record()

    def _setup_accelerator(self, held: contextlib.ExitStack) -> None:
        import torch
        from accelerate.utils import DistributedType, set_seed

        from chunkwise.train.engine import build_accelerator
        from chunkwise.train.modeling import has_module

        r, tc = self.recipe, self.tc
        self.files = training_files(r.data)
        self.cuda = torch.cuda.is_available()
        self.precision = (
            tc.precision if tc.precision != "auto" else ("bf16" if self.cuda else "fp32")
        )
        self.mode = wandb_mode(r)
        os.environ["WANDB_MODE"] = self.mode
        self.trackers = self.mode != "disabled" and has_module("wandb")
        self.accelerator, self.engine = build_accelerator(
            recipe=r,
            gradient_accumulation_steps=tc.grad_accum,
            mixed_precision="bf16" if self.precision == "bf16" else "no",
            log_with="wandb" if self.trackers else None,
            project_dir=str(self.out_dir),
        )
        self.is_main = self.accelerator.is_main_process
        # the main process checks and locks output_dir before any rank writes (all or none go on)
        held.enter_context(hold_output_dir(self.accelerator, r))
        check_shared_output_dir(self.accelerator, self.out_dir)  # every rank sees one folder
        if not self.is_main:  # one set of progress lines per run, not one per rank
            logging.getLogger("chunkwise").setLevel(logging.WARNING)
        self.deepspeed = self.accelerator.distributed_type == DistributedType.DEEPSPEED
        set_seed(tc.seed)

    def _setup_data(self) -> None:
        """Tokenizer and every training example, tokenized (or read from the cache)."""
        from chunkwise.train.example_cache import cached_examples
        from chunkwise.train.formats import files_sha256
        from chunkwise.train.modeling import build_tokenizer, prompt_kind

        r = self.recipe
        self.data_hash = files_sha256(self.files)
        with self.accelerator.main_process_first():  # rank 0 trains the tokenizer / tokenizes first
            self.tokenizer = build_tokenizer(r, self.files, is_main=self.is_main)
            self.kind = prompt_kind(r, self.tokenizer)
            # the others load the main process's cache (and build it only if that failed)
            self.examples, self.stats, self.cache_hit = cached_examples(
                r.data, self.tokenizer, self.kind, self.files, self.out_dir / "cache"
            )
        if r.data.mode == "mapreduce":  # what each family teaches (chunkwise train --data-mix)
            from chunkwise.train.data_mix import mix_table

            log.info("data mix by family:\n%s", mix_table(self.stats.mix))
        self.lengths = [len(e) for e in self.examples]
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else 0

    def _setup_plan(self) -> None:
        """Steps per epoch, total steps, warmup and the peak FLOP/s MFU is measured against."""
        import torch

        from chunkwise.train.mfu import peak_flops

        r, tc = self.recipe, self.tc
        self.sp_size = _sp_size(self.accelerator)
        self.dp_world = self.accelerator.num_processes // self.sp_size
        self.group = self.dp_world * tc.grad_accum
        self.multiple = math.lcm(r.batching.pad_to_multiple_of, self.sp_size)
        self.plans: dict[int, list] = {0: self.epoch_plan(0)}
        self.steps_per_epoch = len(self.plans[0]) // self.group
        if self.steps_per_epoch == 0:
            raise BadInput(
                f"{len(self.plans[0])} micro-batches per epoch, but one optimizer step needs "
                f"{self.group} ({self.dp_world} data-parallel ranks x grad_accum "
                f"{tc.grad_accum}); add data or lower train.grad_accum"
            )
        self.dropped = len(self.plans[0]) - self.steps_per_epoch * self.group
        self.total = tc.max_steps or tc.epochs * self.steps_per_epoch
        self.warmup = tc.warmup_steps or round(tc.warmup_ratio * self.total)
        self.peak = (
            tc.peak_tflops * 1e12
            if tc.peak_tflops
            else peak_flops(torch.cuda.get_device_name() if self.cuda else None)
        )

    def epoch_plan(self, epoch: int) -> list:
        """The micro-batches of ``epoch``, in the order ranks and steps take them."""
        from chunkwise.train.packing import plan_epoch

        b = self.recipe.batching
        return plan_epoch(
            self.lengths,
            strategy=b.strategy,
            max_tokens=b.max_tokens,
            batch_size=b.batch_size,
            seed=self.tc.seed,
            epoch=epoch,
            group=self.group,
        )

    def _setup_resume(self) -> None:
        """The checkpoint to resume from, checked here, before a model exists; loaded after
        ``prepare()``."""
        from chunkwise.train.formats import examples_sha256

        self.ckpt_root = self.out_dir / "checkpoints"
        self.examples_hash = examples_sha256(self.examples)
        self.start, self.state, self.resume_from = 0, {}, None
        if self.tc.resume == "auto":
            self.start, self.state, self.resume_from = resume_point(
                self.accelerator, self.ckpt_root, self.examples_hash, trust=self.trust_checkpoint
            )
        if self.resume_from is not None:
            check_resume_layout(self.state, self.resume_from, self._layout_record())

    def _setup_model(self) -> None:
        """The model (LoRA-wrapped when asked) and its optimizer, both prepared by accelerate;
        the resume checkpoint's states loaded into them."""
        from chunkwise.train.mfu import Arch
        from chunkwise.train.model_setup import build_model_and_optimizer
        from chunkwise.train.modeling import count_params, use_liger

        r, accelerator = self.recipe, self.accelerator
        model, optimizer, self.base_saved = build_model_and_optimizer(
            r,
            self.tokenizer,
            accelerator,
            cuda=self.cuda,
            engine=self.engine,
            precision=self.precision,
            deepspeed=self.deepspeed,
            is_main=self.is_main,
        )
        self.n_params, self.n_trainable = count_params(model)
        self.arch = Arch.from_config(model.config)
        self.lora_params = self.n_trainable if r.model.lora.enabled else 0
        self.positions = InputPositions(model)  # what each rank's model receives
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.layout = Layout(accelerator)
        if self.layout.sp != self.sp_size:
            raise RuntimeError(
                f"sequence-parallel size {self.layout.sp} != configured {self.sp_size}"
            )
        self.ce_impl = "liger" if use_liger(r.model.liger, self.cuda) else "torch"
        # a LoRA run checkpoints what trains; step checkpoints load with checkpoints/model/
        self.lora = r.model.lora.enabled
        base = base_spec(r, self.base_saved, self.kind) if self.lora else None
        setup_checkpoints(accelerator, self.model, self.tokenizer, self.ckpt_root, base_spec=base)
        if self.resume_from is not None:
            load_state(accelerator, str(self.resume_from), lora=self.lora)
            log.info("resumed from %s (step %d of %d)", self.resume_from, self.start, self.total)

    def _setup_run_record(self) -> None:
        """metrics.jsonl cut back to the resume step, the run's config (recipe.yaml, wandb), and
        one log line saying what is about to run."""
        r = self.recipe
        self.metrics_path = self.out_dir / "metrics.jsonl"
        self.repaired = incomplete_final(self.out_dir)
        if self.repaired:
            log.warning(
                "%s holds weights but no train_info.json: its last final save did not finish; "
                "this run saves the model again",
                self.out_dir,
            )
        if self.is_main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            trim_metrics(self.metrics_path, self.start)

        self.run_config = {
            "recipe": config_to_dict(r),
            "git_sha": git_sha(),
            "data_sha256": self.data_hash,
            "examples_sha256": self.examples_hash,
            "data_stats": self.stats.to_dict(),
            "examples_from_cache": self.cache_hit,
            "prompt_kind": self.kind,
            "engine": self.engine,
            "world_size": self.layout.world,
            "sp_size": self.layout.sp,
            "process_group_timeout_s": process_group_timeout(),
            "params": self.n_params,
            "trainable_params": self.n_trainable,
            "versions": versions(),
            "machine": machine(),
        }
        if self.is_main:
            dump_yaml(r, self.out_dir / "recipe.yaml")
        if self.trackers:
            run_id = self.state.get("wandb_id") or new_run_id(self.out_dir, self.is_main)
            self.accelerator.init_trackers(
                r.wandb.project,
                config=self.run_config,
                init_kwargs={
                    "wandb": wandb_init_kwargs(r, self.out_dir, run_id, self.start, self.mode)
                },
            )
            self.state["wandb_id"] = run_id
        log.info(
            "training %s with %s: %d examples, %d steps (%d per epoch, %d micro-batches dropped "
            "per epoch), world %d (sp %d), %s batching, %s prompts, %.1fM params (%.1fM trainable)",
            r.run_name,
            self.engine,
            len(self.examples),
            self.total,
            self.steps_per_epoch,
            self.dropped,
            self.layout.world,
            self.layout.sp,
            r.batching.strategy,
            self.kind,
            self.n_params / 1e6,
            self.n_trainable / 1e6,
        )

    # ---- train ----------------------------------------------------------------------------

    def train(self) -> None:
        """Steps ``start`` to ``total``: each one trained, recorded (metrics.jsonl, wandb, the
        progress bar and log) and, every ``save_steps`` and at the end, checkpointed."""
        from tqdm.auto import tqdm

        tc = self.tc
        kill_at = int(os.environ.get(KILL_ENV, "0") or 0)
        # offline wandb cannot rewind: skip the steps a killed run already logged
        self.wandb_done = (
            wandb_logged_step(self.out_dir) if self.trackers and self.mode != "online" else 0
        )
        hold_at = int(os.environ.get(HOLD_ENV, "0") or 0)
        # the last step's metrics (a finished run, resumed, keeps its checkpoint's)
        self.last: dict[str, Any] = dict(self.state.get("last_metrics") or {})
        self.model.train()
        bar = tqdm(
            total=self.total,
            initial=self.start,
            disable=not self.is_main,
            desc="train",
            dynamic_ncols=True,
        )
        for step in range(self.start, self.total):
            self.last = self.train_step(step)
            self.losses.append(self.last["train/loss"])
            self._record_step(step, self.last)
            bar.update(1)
            bar.set_postfix(
                loss=f"{self.last['train/loss']:.4f}", lr=f"{self.last['train/lr']:.2e}"
            )
            if (step + 1) % tc.log_steps == 0:
                _log_step(self.last, self.total)
            if (step + 1) % tc.save_steps == 0 or step + 1 == self.total:
                self.save_checkpoint(step + 1)
            if kill_at and step + 1 == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            if hold_at and step + 1 == hold_at:
                while True:  # a test kills the whole launch with SIGKILL from outside
                    signal.pause()
        bar.close()

    def train_step(self, step: int) -> dict[str, Any]:
        """One optimizer step (0-based ``step``) over this rank's micro-batches; its metrics."""
        import torch

        from chunkwise.train.loss import backward_scale
        from chunkwise.train.mfu import mfu
        from chunkwise.train.packing import collate, shard_sequence

        tc, layout, accelerator = self.tc, self.layout, self.accelerator
        epoch, in_epoch = divmod(step, self.steps_per_epoch)
        if epoch not in self.plans:
            self.plans.clear()
            self.plans[epoch] = self.epoch_plan(epoch)
        plan = self.plans[epoch]
        lr = lr_at(step, self.total, self.warmup, tc.lr, tc.min_lr_ratio)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        t0 = time.perf_counter()
        batches = []
        for m in range(tc.grad_accum):
            mb = plan[(in_epoch * tc.grad_accum + m) * layout.dp_world + layout.dp_rank]
            b = collate(
                self.examples,
                mb,
                pad_id=self.pad_id,
                weighting=tc.loss_weighting,
                pad_to_multiple_of=self.multiple,
                stage_weights=tc.stage_weights,
            )
            batches.append(shard_sequence(b, layout.sp, layout.sp_rank))
        units, tokens, flops = step_counts(
            accelerator,
            batches,
            layout,
            tc.loss_weighting,
            arch=self.arch,
            lora_params=self.lora_params,
            lora=self.recipe.model.lora.enabled,
        )
        scale = backward_scale(layout.world, tc.grad_accum, units)
        loss_sum = forward_backward(
            accelerator,
            self.model,
            batches,
            scale=scale,
            chunk=tc.ce_chunk_tokens,
            impl=self.ce_impl,
        )
        grad_norm = None
        if tc.max_grad_norm > 0:
            grad_norm = accelerator.clip_grad_norm_(self.model.parameters(), tc.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if grad_norm is None and hasattr(self.model, "get_global_grad_norm"):
            grad_norm = self.model.get_global_grad_norm()  # DeepSpeed clips and measures it itself
        loss = accelerator.reduce(loss_sum.reshape(1), reduction="sum").item() / max(units, 1e-12)
        if self.cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        last = {
            "step": step + 1,
            "epoch": round(step / self.steps_per_epoch, 4),
            "train/loss": loss,
            "train/lr": lr,
            "train/grad_norm": _as_float(grad_norm),
            "train/tok_per_sec": tokens / dt,
            "train/mfu": mfu(flops, dt, layout.world, self.peak),
            "train/step_seconds": dt,
            "train/tokens": int(tokens),
            "train/sequences": int(units) if tc.loss_weighting == "sequence" else None,
        }
        if self.cuda:
            last["train/peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
        return last

    def _record_step(self, step: int, last: dict[str, Any]) -> None:
        """Step ``step``'s metrics appended to metrics.jsonl, and to wandb every ``log_steps``."""
        if self.is_main:
            with open(self.metrics_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(last) + "\n")
        if (
            self.trackers
            and step + 1 > self.wandb_done
            and ((step + 1) % self.tc.log_steps == 0 or step + 1 == self.total)
        ):
            self.accelerator.log(
                {k: v for k, v in last.items() if k.startswith("train/") and v is not None},
                step=step + 1,
            )
            if self.is_main:
                note_wandb_step(self.out_dir, step + 1)

    def save_checkpoint(self, step: int) -> None:
        """Model, optimizer and RNG states after ``step`` steps, with the trainer's own state
        (step, data hashes, last metrics) a resume checks and continues from."""
        self.state.update(
            step=step,
            total_steps=self.total,
            examples_sha256=self.examples_hash,
            data_sha256=self.data_hash,
            loss=self.last["train/loss"],
            last_metrics=self.last,
            **self._layout_record(),
        )
        save_checkpoint(
            self.accelerator,
            self.ckpt_root,
            step,
            self.state,
            self.tc.save_total_limit,
            lora=self.lora,
        )

    def _layout_record(self) -> dict[str, Any]:
        """World size, engine and sp degree: a checkpoint records them, a resume must match."""
        return layout_of(self.accelerator.num_processes, self.engine, self.sp_size)

    # ---- save -----------------------------------------------------------------------------

    def save(self) -> dict[str, Any]:
        """The final model folder and train_info.json; returns the run's summary."""
        self.accelerator.wait_for_everyone()
        summary = {
            **self.run_config,
            "steps": self.total,
            "resumed_from": self.start,
            "repaired_incomplete_final": self.repaired,
            "final": self.last,
            "seconds": round(time.perf_counter() - self.t_start, 2),
            "input_positions_per_rank": self.positions.per_rank(self.accelerator),
        }
        save_final(
            self.accelerator,
            self.model,
            self.tokenizer,
            self.recipe,
            self.out_dir,
            self.base_saved,
            summary,
        )
        if self.trackers:
            self.accelerator.end_training()
        summary["losses"] = self.losses
        return summary


def _log_step(last: dict[str, Any], total: int) -> None:
    mfu_text = "n/a" if last["train/mfu"] is None else f"{last['train/mfu']:.1%}"
    grad_norm = last["train/grad_norm"]
    log.info(
        "step %d/%d loss %.4f lr %.2e grad_norm %s tok/s %.0f mfu %s",
        last["step"],
        total,
        last["train/loss"],
        last["train/lr"],
        "n/a" if grad_norm is None else f"{grad_norm:.3f}",
        last["train/tok_per_sec"],
        mfu_text,
    )


__all__ = ["HOLD_ENV", "KILL_ENV", "Trainer"]
