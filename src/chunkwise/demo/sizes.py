"""How big each demo is: one dataclass per size, the pipeline is the same for all of them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from chunkwise.errors import BadInput


@dataclass(frozen=True)
class DemoSize:
    name: str
    #: documents cut from the Python reference, and tokens each (a target)
    documents: int
    document_tokens: int
    #: the last this-many documents are held out of training; their questions are evaluated
    heldout_documents: int
    questions_per_doc: int
    #: the window the synthesis teacher (hf:default) works in
    synth_window: int
    #: MapReduce chunk size in synthesis, in the trained map examples and at evaluation
    map_chunk_tokens: int
    #: optimizer steps per training mode and the longest training sequence (tokens)
    train_steps: int
    train_max_length: int
    lora_r: int
    #: evaluation: the window both strategies get, the length of the InfiniteBench retrieval
    #: documents (tokens, beyond the window) and which tasks, examples per retrieval task,
    #: held-out questions evaluated
    eval_window: int
    eval_length: int
    retrieval_tasks: tuple[str, ...]
    eval_n: int
    heldout_questions: int
    #: what a quiet 2-core CPU takes, said before starting
    expected: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


SIZES: dict[str, DemoSize] = {
    # CI: every stage and artifact, minutes on 2 cores
    "smoke": DemoSize(
        name="smoke",
        documents=3,
        document_tokens=700,
        heldout_documents=1,
        questions_per_doc=1,
        synth_window=768,
        map_chunk_tokens=256,
        train_steps=2,
        train_max_length=512,
        lora_r=4,
        eval_window=512,
        eval_length=900,
        retrieval_tasks=("passkey",),
        eval_n=1,
        heldout_questions=1,
        expected="about 4 minutes",
    ),
    # `make demo`: the whole loop on a laptop CPU, retrieval beyond an 8K window
    "small": DemoSize(
        name="small",
        documents=4,
        document_tokens=2500,
        heldout_documents=1,
        questions_per_doc=2,
        synth_window=2048,
        map_chunk_tokens=768,
        train_steps=16,
        train_max_length=1024,
        lora_r=16,
        eval_window=8192,
        eval_length=10000,
        retrieval_tasks=("passkey", "kv_retrieval"),
        eval_n=1,
        heldout_questions=2,
        expected="about 15 minutes on 2 CPU cores",
    ),
    # more of everything (an hour or more on 2 cores; minutes on a GPU)
    "full": DemoSize(
        name="full",
        documents=10,
        document_tokens=6000,
        heldout_documents=2,
        questions_per_doc=3,
        synth_window=4096,
        map_chunk_tokens=1024,
        train_steps=120,
        train_max_length=2048,
        lora_r=16,
        eval_window=8192,
        eval_length=16000,
        retrieval_tasks=("passkey", "kv_retrieval"),
        eval_n=3,
        heldout_questions=6,
        expected="one to two hours on 2 CPU cores",
    ),
}


def get_size(name: str) -> DemoSize:
    try:
        return SIZES[name]
    except KeyError:
        raise BadInput(f"unknown demo size {name!r}; valid: {', '.join(SIZES)}") from None


__all__ = ["SIZES", "DemoSize", "get_size"]
