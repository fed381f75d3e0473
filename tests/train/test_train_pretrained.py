"""The embedded Gemma-3-270M checkpoint (what ``model.name_or_path: default`` loads) fine-tuned
with LoRA under DeepSpeed ZeRO-3 on 2 CPU ranks (gloo, DeepSpeed's CPU accelerator): the model
is built partitioned (``zero3_init_flag``) from the real weights, and the run's step-1 loss is
the checkpoint's own loss on step 1's sequences, computed in this process with plain
transformers (one sequence at a time), far below ln(vocab) = 12.5 that random weights give.

The tiny model under every engine is in tests/train/test_train_engines.py."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pretrained_base import DATA, ENV, RECIPE, REPO, own_step1_loss, pretrained_flags

pytest.importorskip("deepspeed")

pytestmark = pytest.mark.slow

ACCELERATE = Path(sys.executable).with_name("accelerate")
STEPS = 2
#: the Gemma turn template the packaged MapReduce adapter trains under; short examples (4
#: records of the tiny fixture, cut to 512 tokens) keep a step at seconds on one core per rank
GEMMA = [
    f"--model.chat_template={REPO / 'src/chunkwise/prompts/mapreduce/gemma_chat.jinja'}",
    "--data.limit=4",
    "--data.max_length=512",
    "--batching.max_tokens=512",
]
LORA = [
    "--model.lora.enabled=true",
    "--model.lora.r=4",
    "--model.lora.target_modules=[q_proj,v_proj]",
]
#: |relative difference| allowed between the launch's step-1 loss and the model's own (fp32
#: both; the launch packs sequences and runs our varlen attention, the reference one at a time)
REL_TOL = 1e-3


def test_embedded_gemma_lora_on_zero3_starts_from_its_own_loss(tmp_path):
    from chunkwise.llm.embedded import converted_dir

    saved = converted_dir()
    out = tmp_path / "gemma-zero3-lora"
    cmd = [
        str(ACCELERATE),
        "launch",
        "--config_file",
        str(REPO / "configs" / "accelerate" / "zero3.yaml"),
        "--num_processes",
        "2",
        "--main_process_port",
        "0",
        str(REPO / "train" / "sft.py"),
        str(RECIPE),
        *DATA,
        *pretrained_flags(saved),
        *GEMMA,
        *LORA,
        f"--train.max_steps={STEPS}",
        f"--output_dir={out}",
    ]
    proc = subprocess.run(
        cmd,
        env={**os.environ, **ENV, "DS_ACCELERATOR": "cpu"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert "with deepspeed-zero3:" in log
    info = json.loads((out / "train_info.json").read_text())
    assert info["world_size"] == 2 and info["engine"] == "deepspeed-zero3"
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["train/loss"] for r in sorted(rows, key=lambda r: r["step"])]
    assert len(losses) == STEPS
    assert (out / "adapter_model.safetensors").exists()
    own, vocab = own_step1_loss(saved, tmp_path / "reference", overrides=GEMMA)
    print(
        "\ngemma zero3+lora:",
        json.dumps({"own": own, "ln_vocab": math.log(vocab), "losses": losses}),
    )
    assert own < 0.5 * math.log(vocab), (own, vocab)
    assert losses[0] == pytest.approx(own, rel=REL_TOL), (losses, own)
    assert all(x < 0.5 * math.log(vocab) for x in losses), losses
