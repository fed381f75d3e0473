"""`chunkwise demo`: the project's main job at laptop scale (see chunkwise.demo.pipeline)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = (
    "synthesize Pyramid-Align data, LoRA-train in standard and mapreduce mode, evaluate and "
    "compare, offline (resumes)"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from chunkwise.demo.sizes import SIZES

    p.add_argument(
        "--size",
        default="small",
        choices=list(SIZES),
        help="smoke: minutes (CI); small: make demo (n=20 per cell; about 15 minutes on 2 "
        "CPU cores with vLLM); full: hours",
    )
    p.add_argument("--out", default="runs/demo", help="folder for everything (rerun to resume)")
    p.add_argument("--model", default="hf:default", help="teacher and base model (hf specs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--engine",
        default="auto",
        choices=("auto", "hf", "vllm"),
        help="evaluation engine; auto: vLLM when `make vllm` has set it up, else hf",
    )
    p.add_argument("--fresh", action="store_true", help="delete --out first and start over")


def run(args: argparse.Namespace) -> int:
    from chunkwise.demo import Demo, get_size
    from chunkwise.demo.fresh import remove_demo_folder
    from chunkwise.demo.summary import final_text
    from chunkwise.demo.training import check_model
    from chunkwise.io import check_output_dir

    # every check first: --fresh deletes only after the run is known to be able to start
    size = get_size(args.size)
    check_model(args.model)
    out = Path(args.out)
    check_output_dir(out, "--out")
    if args.fresh:
        remove_demo_folder(out)  # only a folder with a demo ledger; refuses anything else
    print(
        f"chunkwise demo --size {size.name}: {size.expected}; everything goes to {out} "
        "(a rerun reuses finished stages)",
        flush=True,
    )
    from chunkwise.llm.sigterm import exit_on_sigterm

    # a SIGTERM unwinds like Ctrl-C: the running stage is recorded as interrupted and its child
    # process (training, or evaluation in .venv-vllm) is stopped instead of left running
    exit_on_sigterm()
    demo = Demo(
        out,
        size,
        model=args.model,
        seed=args.seed,
        engine=args.engine,
        echo=lambda s: print(s, flush=True),
    )
    demo.run()
    print(final_text(demo))
    return 0
