"""What a synthesis run is asked to do (:class:`SynthConfig`, checked), and which of its
settings shape the content a rerun into the same folder must match."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.synth.questions import parse_mix

#: settings recorded in config.json; a rerun into the same folder must give the same values
CONTENT_KEYS = (
    "model",
    "questions_per_doc",
    "window",
    "chunk_tokens",
    "fanout",
    "seed",
    "node_mix",
    "importance",
    "embedder",
    "question_attempts",
    "question_sentences",
    "prompts",
    "mapreduce_args",
    "text_column",
    "split",
    "num_shards",
)


@dataclass
class SynthConfig:
    docs: str
    out: str
    model: str = "hf:default"
    limit: int | None = None
    questions_per_doc: int = 1
    window: int = 4096
    chunk_tokens: int = 0
    fanout: int = 3
    seed: int = 0
    num_shards: int = 1
    shard_index: int = 0
    concurrency: int = 4
    node_mix: dict[str, float] = field(default_factory=lambda: parse_mix(None))
    importance: str = "embedding"
    embedder: str = "minilm"
    question_attempts: int = 3
    question_sentences: int = 5
    prompts: str = "auto"
    mapreduce_args: dict[str, Any] = field(default_factory=dict)
    text_column: str | None = None
    split: str = "train"
    push_to_hub: str | None = None
    progress: bool = True
    #: continue an --out folder started with other settings (config.json is rewritten)
    override_settings: bool = False

    def check(self) -> None:
        if self.num_shards < 1 or not 0 <= self.shard_index < self.num_shards:
            raise BadInput(
                f"--shard-index must be in [0, --num-shards={self.num_shards}), "
                f"got {self.shard_index}"
            )
        for name in ("questions_per_doc", "concurrency", "question_attempts", "question_sentences"):
            if getattr(self, name) < 1:
                raise BadInput(
                    f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}"
                )
        if self.limit is not None and self.limit < 0:
            raise BadInput(f"--limit must be >= 0, got {self.limit}")
        if self.window < 256:
            raise BadInput(f"--window {self.window} is too small (at least 256 tokens)")
        if self.chunk_tokens < 0:
            raise BadInput(f"--chunk-tokens must be >= 0 (0: automatic), got {self.chunk_tokens}")
        if self.prompts not in ("auto", "chat", "base"):
            raise BadInput(f"prompts must be auto, chat or base, got {self.prompts!r}")
        self.node_mix = parse_mix(self.node_mix)

    def content(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: d[k] for k in CONTENT_KEYS}
