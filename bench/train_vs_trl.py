"""Our training loop against TRL's ``SFTTrainer``, same model, data, packing and steps, in one run.

Both sides start from the same saved weights (the tiny recipe's model with a fixed random init
and its trained BPE tokenizer, or ``--model embedded``: Gemma-3-270M), train on the very same
tokenized examples (the tiny recipe's Pyramid-Align MapReduce stages, built once by our
formatter, with the same assistant-only labels), pack them best-fit-decreasing into rows of
``--max-tokens`` tokens, one row per optimizer step, padding-free (TRL: ``packing=True,
packing_strategy="bfd"``, its ``DataCollatorForLanguageModeling(padding_free=True)`` with
position ids restarting per sequence; ours: the same as the loop's collate), token-mean loss
(``--train.loss_weighting=token``), AdamW (0.9, 0.95), no weight decay, clipping at 1.0,
warmup then cosine to 10% of the peak LR, gradient checkpointing as the recipe says, fp32, the
same thread count. Each side runs in its own process, one after the other (never at once).

tokens/s = real (non-pad) tokens trained / the summed wall time of the optimizer steps
(forward, backward, clip, optimizer step; setup, data preparation and saving excluded on both
sides). The order in which sequences are packed differs (each trainer shuffles with its own
RNG), so per-step losses differ a little; the comparison of loss is the mean over the last
``--tail`` steps, with each side's standard error.

    .venv/bin/python bench/train_vs_trl.py [--model tiny|embedded] [--steps 30] [--threads 2]
        [--json out.json]

Prints a table and then JSON with a top-level ``ratio`` (ours / TRL tokens/s). Needs ``trl``
(``pip install trl``, not a chunkwise dependency); without it, says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "tiny" / "pyramid_align-mapreduce.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "pyramid_align.jsonl"
GEMMA_TEMPLATE = REPO / "src" / "chunkwise" / "prompts" / "mapreduce" / "gemma_chat.jinja"


def recipe_flags(init: Path, args: argparse.Namespace, out: Path) -> list[str]:
    """The overrides of the tiny recipe both sides are configured from."""
    flags = [
        f"--data.paths=[{FIXTURE}]",
        f"--data.limit={args.records}",
        "--wandb.mode=disabled",
        "--model.init=pretrained",
        f"--model.name_or_path={init}",
        "--model.tokenizer=",
        f"--batching.max_tokens={args.max_tokens}",
        f"--data.max_length={min(args.max_tokens, 2048)}",
        "--train.loss_weighting=token",
        f"--train.max_steps={args.steps}",
        f"--train.save_steps={args.steps}",
        "--train.precision=fp32",
        f"--output_dir={out}",
    ]
    if args.model == "embedded":
        flags.append(f"--model.chat_template={GEMMA_TEMPLATE}")
    return flags


def make_init(work: Path, model: str) -> Path:
    """The starting weights both sides load: the tiny recipe's model, built once with a fixed
    seed (its BPE tokenizer trained on the data), or the embedded Gemma-3-270M."""
    if model == "embedded":
        from chunkwise.llm.embedded import converted_dir

        return converted_dir()
    import torch

    from chunkwise.train.modeling import build_model, build_tokenizer
    from chunkwise.train.recipe import load_recipe, training_files

    out = work / "init"
    r = load_recipe(str(RECIPE), [f"--data.paths=[{FIXTURE}]", f"--output_dir={work / 'tok'}"])
    tok = build_tokenizer(r, training_files(r.data))
    torch.manual_seed(0)
    m = build_model(r, tok, cuda=False, dtype=torch.float32)
    m.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def examples_for(init: Path, args: argparse.Namespace, work: Path) -> list:
    """The tokenized training examples, exactly as our loop builds them from the recipe."""
    from chunkwise.train.example_cache import cached_examples
    from chunkwise.train.modeling import build_tokenizer, prompt_kind
    from chunkwise.train.recipe import load_recipe, training_files

    r = load_recipe(str(RECIPE), recipe_flags(init, args, work / "examples"))
    files = training_files(r.data)
    tok = build_tokenizer(r, files)
    examples, _, _ = cached_examples(r.data, tok, prompt_kind(r, tok), files, None)
    return examples


# ---- one side per process -----------------------------------------------------------------


def run_ours(init: Path, args: argparse.Namespace, work: Path) -> dict:
    """train/sft.py's in-process entry on one CPU process; metrics from its metrics.jsonl."""
    from chunkwise.train.loop import run
    from chunkwise.train.recipe import load_recipe

    out = work / "ours"
    run(load_recipe(str(RECIPE), recipe_flags(init, args, out)))
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    rows.sort(key=lambda r: r["step"])
    return {
        "losses": [r["train/loss"] for r in rows],
        "tokens": sum(r["train/tokens"] for r in rows),
        "seconds": sum(r["train/step_seconds"] for r in rows),
    }


def run_trl(init: Path, args: argparse.Namespace, work: Path) -> dict:
    """TRL's SFTTrainer on the same examples (pre-tokenized: input_ids + labels)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    from chunkwise.train.recipe import load_recipe

    r = load_recipe(str(RECIPE), recipe_flags(init, args, work / "trl-recipe"))
    tc = r.train
    examples = examples_for(init, args, work)
    data = Dataset.from_dict(
        {
            "input_ids": [e.input_ids.tolist() for e in examples],
            "labels": [e.labels.tolist() for e in examples],
        }
    )
    tok = AutoTokenizer.from_pretrained(str(init))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if args.trl_attn == "chunkwise_varlen":
        from chunkwise.train.attention import register

        register()
    model = AutoModelForCausalLM.from_pretrained(
        str(init), dtype=torch.float32, attn_implementation=args.trl_attn
    )
    config = SFTConfig(
        output_dir=str(work / "trl"),
        max_steps=tc.max_steps,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=1,
        learning_rate=tc.lr,
        lr_scheduler_type="cosine_with_min_lr",
        lr_scheduler_kwargs={"min_lr_rate": tc.min_lr_ratio},
        warmup_steps=tc.warmup_steps,
        weight_decay=tc.weight_decay,
        adam_beta1=tc.adam_betas[0],
        adam_beta2=tc.adam_betas[1],
        max_grad_norm=tc.max_grad_norm,
        optim="adamw_torch",
        gradient_checkpointing=r.model.gradient_checkpointing,
        gradient_checkpointing_kwargs={"use_reentrant": False},
        packing=True,
        packing_strategy="bfd",
        padding_free=True,
        max_length=r.batching.max_tokens,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,  # SFTConfig turns bf16 autocast on by default; ours runs fp32 here
        seed=tc.seed,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    steps: list[dict] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            steps.append({"seconds": time.perf_counter() - self.t0})

    trainer = SFTTrainer(
        model=model, args=config, train_dataset=data, processing_class=tok, callbacks=[Clock()]
    )
    tokens: list[int] = []
    collator = trainer.data_collator

    def counting(batch):  # real tokens per micro-batch (padding-free: no padding at all)
        out = collator(batch)
        tokens.append(int(sum(len(b["input_ids"]) for b in batch)))
        return out

    trainer.data_collator = counting
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {
        "losses": losses,
        "tokens": sum(tokens[: len(steps)]),
        "seconds": sum(s["seconds"] for s in steps),
    }


# ---- the comparison -----------------------------------------------------------------------


def tail_stats(losses: list[float], tail: int) -> dict:
    xs = losses[-tail:]
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")
    return {"mean": statistics.fmean(xs), "se": se, "n": len(xs)}


def side(name: str, args: argparse.Namespace, work: Path, init: Path) -> dict:
    cmd = [sys.executable, __file__, "--side", name, "--work", str(work), "--init", str(init)]
    cmd += [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k in PASS]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "WANDB_MODE": "disabled"}
    env["TOKENIZERS_PARALLELISM"] = "false"
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        sys.exit(f"train_vs_trl: the {name} side failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


PASS = ("model", "steps", "records", "max_tokens", "threads", "trl_attn")


def compare(args: argparse.Namespace) -> dict:
    """Each side ``--repeats`` times, alternating which goes first (other jobs on the machine
    change its speed over minutes); per side the median tokens/s, the ratio of the medians."""
    runs: dict[str, list[dict]] = {"ours": [], "trl": []}
    with tempfile.TemporaryDirectory(prefix="train_vs_trl-") as tmp:
        work = Path(tmp)
        init = make_init(work, args.model)
        for i in range(args.repeats):
            order = ("trl", "ours") if i % 2 == 0 else ("ours", "trl")
            for name in order:
                res = side(name, args, work / f"repeat-{i}", init)
                res["tok_per_sec"] = res["tokens"] / res["seconds"]
                runs[name].append(res)
    results = {}
    for name, reps in runs.items():
        results[name] = {
            **reps[0],
            "tok_per_sec": statistics.median(r["tok_per_sec"] for r in reps),
            "tok_per_sec_runs": [r["tok_per_sec"] for r in reps],
            "tail_loss": tail_stats(reps[0]["losses"], args.tail),
        }
    ours, trl = results["ours"], results["trl"]
    gap = ours["tail_loss"]["mean"] - trl["tail_loss"]["mean"]
    se = math.hypot(ours["tail_loss"]["se"], trl["tail_loss"]["se"])
    return {
        "ratio": ours["tok_per_sec"] / trl["tok_per_sec"],
        "ratio_runs": [
            a["tok_per_sec"] / b["tok_per_sec"]
            for a, b in zip(runs["ours"], runs["trl"], strict=True)
        ],
        "repeats": args.repeats,
        "model": args.model,
        "steps": args.steps,
        "max_tokens": args.max_tokens,
        "threads": args.threads,
        "trl_attn": args.trl_attn,
        "load_average": os.getloadavg(),
        "tail_loss_gap": gap,
        "tail_loss_gap_95ci": [gap - 1.96 * se, gap + 1.96 * se],
        "ours": ours,
        "trl": trl,
        "versions": _versions(),
    }


def _versions() -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "transformers", "trl", "accelerate", "chunkwise")}


def table(res: dict) -> str:
    lines = [
        f"{'':6} {'tokens':>8} {'seconds':>8} {'tok/s med':>9} {'tail loss':>14}",
    ]
    for name in ("ours", "trl"):
        s = res[name]
        t = s["tail_loss"]
        lines.append(
            f"{name:6} {s['tokens']:8d} {s['seconds']:8.1f} {s['tok_per_sec']:9.0f} "
            f"{t['mean']:7.4f}±{1.96 * t['se']:.4f}"
        )
    lo, hi = res["tail_loss_gap_95ci"]
    runs = ", ".join(f"{x:.2f}" for x in res["ratio_runs"])
    lines.append(f"ratio ours/trl: {res['ratio']:.2f}x (runs: {runs})")
    lines.append(f"tail loss gap ours - trl: {lo:+.4f}..{hi:+.4f} (95%)")
    lines.append("step  ours     trl")
    for i, (a, b) in enumerate(zip(res["ours"]["losses"], res["trl"]["losses"], strict=False)):
        lines.append(f"{i + 1:4d}  {a:.4f}  {b:.4f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=("tiny", "embedded"), default="tiny")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--records", type=int, default=16, help="Pyramid-Align records of the fixture")
    p.add_argument("--max-tokens", type=int, default=4096, help="tokens per packed row (step)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--trl-attn",
        choices=("sdpa", "chunkwise_varlen"),
        default="sdpa",
        help="TRL's attention (chunkwise_varlen: ours, to see what the gap is made of)",
    )
    p.add_argument("--repeats", type=int, default=1, help="runs of each side, alternating")
    p.add_argument("--tail", type=int, default=10, help="last steps whose loss is compared")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per side")
    p.add_argument("--json", type=Path, help="also write the JSON here")
    p.add_argument("--side", choices=("ours", "trl"), help=argparse.SUPPRESS)
    p.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--init", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        import trl  # noqa: F401
    except ImportError:
        print("train_vs_trl: trl is not installed (pip install trl); nothing to compare against")
        return 0
    if args.side:  # one side, in its own process: print its JSON last
        import torch

        torch.set_num_threads(args.threads)
        fn = run_ours if args.side == "ours" else run_trl
        print(json.dumps(fn(args.init, args, args.work)))
        return 0
    res = compare(args)
    print(table(res))
    text = json.dumps(res, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
