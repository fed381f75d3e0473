"""How big each demo is: one dataclass per size, the pipeline is the same for all of them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from chunkwise.errors import BadInput


@dataclass(frozen=True)
class DemoSize:
    name: str
    #: training documents: generated families with ground truth (chunkwise.data.families),
    #: this many per family and length, from the training seed
    train_families: tuple[str, ...]
    train_lengths: tuple[int, ...]
    train_docs: int
    #: MapReduce chunk size in the oracle's records, in the trained map examples and at
    #: evaluation (every model reads the same chunks)
    map_chunk_tokens: int
    #: optimizer steps per training mode, the longest training sequence (tokens), LoRA rank
    #: and peak learning rate
    train_steps: int
    train_max_length: int
    lora_r: int
    lr: float
    #: evaluation: generated documents of ``eval_length`` tokens from the held-out seeds (never
    #: trained on) for every task in ``eval_tasks``, ``eval_n`` per task; the families not in
    #: ``train_families`` were never trained on at all. Both decodings get ``eval_window``.
    eval_tasks: tuple[str, ...]
    eval_length: int
    eval_window: int
    eval_n: int
    #: a packaged adapter trained by the same pipeline at full length (``make default-mr``),
    #: evaluated beside the demo's checkpoints under mapreduce decoding; None: not evaluated
    reference: str | None
    #: what a quiet 2-core CPU takes, said before starting
    expected: str
    #: cap on each MapReduce call's new tokens (0: the protocol's own, 384 for a map call); the
    #: smoke size caps it, since its barely trained checkpoints write until the cap
    max_new_tokens: int = 0
    #: optimizer steps of the standard-mode run (0: ``train_steps``). A document makes one
    #: standard example but one map example per chunk and a reduce example in mapreduce mode,
    #: so the same pass over the documents takes mapreduce mode several times the steps
    standard_steps: int = 0
    #: held-out documents answered at once, their model calls merged into one batch
    #: (``chunkwise eval --parallel``). The small size answers all 20 of a task at once (its
    #: checkpoints are merged into the base for vLLM, and no collapse round is needed)
    eval_parallel: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def steps(self, mode: str) -> int:
        """Optimizer steps of the ``mode`` (standard | mapreduce) training run."""
        if mode == "standard" and self.standard_steps:
            return self.standard_steps
        return self.train_steps

    def unseen_families(self) -> tuple[str, ...]:
        return tuple(t for t in self.eval_tasks if t not in self.train_families)


SIZES: dict[str, DemoSize] = {
    # CI: every stage and artifact, minutes on 2 cores
    "smoke": DemoSize(
        name="smoke",
        train_families=("passkey",),
        train_lengths=(900,),
        train_docs=4,
        map_chunk_tokens=700,
        train_steps=1,
        train_max_length=1280,
        lora_r=4,
        lr=1e-3,
        eval_tasks=("number_string",),
        eval_length=1400,
        eval_window=1280,
        eval_n=1,
        reference=None,
        expected="about 5 minutes",
        max_new_tokens=64,
    ),
    # `make demo`: the whole loop on a laptop CPU in under 15 minutes, 20 held-out documents per
    # task and cell. Sized so that no model's MapReduce needs a collapse round: 5 map records
    # of at most 80 tokens fit beside the reduce prompt in the window (the oracle's longest map
    # target here is 71 tokens). It trains number_string,
    # where the base model's mapreduce decoding fails (it never abstains), and holds out
    # passkey, which the base model already reads well.
    "small": DemoSize(
        name="small",
        train_families=("number_string",),
        train_lengths=(2000,),
        train_docs=16,
        map_chunk_tokens=500,
        train_steps=24,
        standard_steps=6,
        train_max_length=2048,
        lora_r=16,
        lr=1e-3,
        eval_tasks=("number_string", "passkey"),
        eval_length=2000,
        eval_window=1200,
        eval_n=20,
        reference=None,
        expected="7-13 minutes on 2 CPU cores with vLLM (training 2.5-5 min, then 12 cells "
        "of 20 documents, 4-8 min); minutes on a GPU",
        max_new_tokens=80,
        eval_parallel=20,
    ),
    # the demo's own training long enough to learn the protocol (`make default-mr`'s scale)
    "full": DemoSize(
        name="full",
        train_families=("passkey", "kv_retrieval", "number_string", "conflicting"),
        train_lengths=(2000, 3000, 4000),
        train_docs=12,
        map_chunk_tokens=500,
        train_steps=240,
        train_max_length=2048,
        lora_r=16,
        lr=1e-3,
        eval_tasks=("passkey", "kv_retrieval", "conflicting", "multihop"),
        eval_length=4000,
        eval_window=2048,
        eval_n=50,
        reference="hf:default-mr",
        expected="two to three hours on 2 CPU cores (minutes on a GPU)",
    ),
}


def get_size(name: str) -> DemoSize:
    try:
        return SIZES[name]
    except KeyError:
        raise BadInput(f"unknown demo size {name!r}; valid: {', '.join(SIZES)}") from None


__all__ = ["SIZES", "DemoSize", "get_size"]
