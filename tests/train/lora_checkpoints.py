"""What the LoRA step-checkpoint tests (plain/DDP, DeepSpeed, FSDP2) share: the 2-rank launch
of the tiny recipe, its losses, where a step's checkpoint is, and the next-token logits a saved
model gives on one fixed prompt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ACCELERATE = Path(sys.executable).with_name("accelerate")
RECIPE = REPO / "recipes" / "tiny" / "pyramid_align-mapreduce.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "pyramid_align.jsonl"
ENV = {
    "DS_ACCELERATOR": "cpu",
    "WANDB_MODE": "disabled",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "CUDA_VISIBLE_DEVICES": "",
}


def launch(config: str, out: Path, *, lora: bool = True) -> dict:
    """The tiny recipe on 2 CPU ranks under ``configs/accelerate/<config>.yaml``: 4 steps, a
    checkpoint every 2 (LoRA r=4 on q/v unless ``lora=False``); its train_info.json."""
    cmd = [
        str(ACCELERATE),
        "launch",
        "--config_file",
        str(REPO / "configs" / "accelerate" / f"{config}.yaml"),
        "--num_processes",
        "2",
        "--main_process_port",
        "0",
        str(REPO / "train" / "sft.py"),
        str(RECIPE),
        f"--output_dir={out}",
        f"--data.paths=[{FIXTURE}]",
        "--data.limit=16",
        "--wandb.mode=disabled",
        "--train.max_steps=4",
        "--train.save_steps=2",
        "--train.save_total_limit=0",
    ]
    if lora:
        cmd += [
            "--model.lora.enabled=true",
            "--model.lora.r=4",
            "--model.lora.target_modules=[q_proj,v_proj]",
        ]
    proc = subprocess.run(
        cmd, env={**os.environ, **ENV}, cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return json.loads((out / "train_info.json").read_text())


def losses(out: Path) -> dict[int, float]:
    """Step -> training loss, from the run's metrics.jsonl."""
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return {m["step"]: m["train/loss"] for m in rows}


def step_dir(out: Path, step: int) -> Path:
    """The step checkpoint folder of the training run in ``out``."""
    return out / "checkpoints" / f"step-{step:08d}"


PROMPT = "The town of Ashford sits by the river"


def next_token_logits(spec: str, prompt: str = PROMPT):
    """The model's next-token logits after ``prompt`` (what greedy decoding picks from)."""
    import torch

    from chunkwise.llm import load_llm

    llm = load_llm(spec)
    try:
        ids = torch.tensor([llm.encode(prompt)])
        with torch.no_grad():
            return llm.model(input_ids=ids).logits[0, -1].float()
    finally:
        llm.close()
