"""What the LoRA step-checkpoint tests (plain/DDP, DeepSpeed, FSDP2) share: where a step's
checkpoint is, and the next-token logits a saved model gives on one fixed prompt."""

from __future__ import annotations

from pathlib import Path


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
