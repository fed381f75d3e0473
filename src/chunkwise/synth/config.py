"""What a synthesis run is asked to do (:class:`SynthConfig`, checked), and which of its
settings shape the content a rerun into the same folder must match."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from chunkwise.config.convert import InvalidOption
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


def _at_least(key: str, value: int | None, low: int) -> None:
    if value is not None and value < low:
        raise InvalidOption(key, value, f"a whole number >= {low}")


@dataclass
class SynthConfig:
    """One synthesis run (``chunkwise synth``; its flags are generated from these fields)."""

    #: output folder (a rerun continues it)
    out: str
    #: LongAlign-format JSONL (the long user turn is the document), a folder of .txt files, a
    #: save_to_disk folder, or a hub dataset id with a text column (required with --teacher llm)
    docs: str | None = None
    #: model spec
    model: str = "hf:default"
    #: use only the first N documents of the source
    limit: int | None = None
    #: questions per document
    questions_per_doc: int = 1
    #: context window of every call, in tokens
    window: int = 4096
    #: leaf size in tokens (0: what lets 3 leaves share one summary call)
    chunk_tokens: int = 0
    #: children per summary node of the pyramid
    fanout: int = 3
    #: seed of the question sampling
    seed: int = 0
    #: split the documents over N processes (default: $WORLD_SIZE under accelerate/torchrun,
    #: else 1)
    num_shards: int = 1
    #: which shard this process runs (default: $RANK, else 0)
    shard_index: int = 0
    #: documents in flight; their LLM calls are batched together
    concurrency: int = 4
    #: question nodes by kind
    node_mix: dict[str, float] = field(default_factory=lambda: parse_mix(None))
    #: leaf sentence importance: embedding (centrality, no LLM calls) | llm (LLM-rated)
    importance: Literal["embedding", "llm"] = "embedding"
    #: sentence embedder: minilm (offline default) | st:PATH | hashing
    embedder: str = "minilm"
    #: tries at a question for a node before it is skipped
    question_attempts: int = 3
    #: sentences of a node shown to the question writer
    question_sentences: int = 5
    #: prompt wording: auto (chat when the model takes chat messages) | chat | base
    prompts: Literal["auto", "chat", "base"] = "auto"
    #: MapReduce options for the answers, k=v,k2=v2
    mapreduce_args: dict[str, Any] = field(default_factory=dict)
    #: text column of a dataset source
    text_column: str | None = None
    #: dataset split
    split: str = "train"
    #: also push the dataset to the hub under this name
    push_to_hub: str | None = None
    #: show a progress bar
    progress: bool = True
    #: continue an --out folder started with other settings (config.json is rewritten; records
    #: made under both stay in one folder)
    override_settings: bool = False

    def __post_init__(self) -> None:
        # what each value must be, checked as the settings are read (an error names the flag)
        for name in ("questions_per_doc", "concurrency", "question_attempts", "question_sentences"):
            _at_least(name, getattr(self, name), 1)
        _at_least("limit", self.limit, 0)
        _at_least("window", self.window, 256)
        _at_least("chunk_tokens", self.chunk_tokens, 0)
        _at_least("num_shards", self.num_shards, 1)
        if not 0 <= self.shard_index < self.num_shards:
            expected = f"a whole number in [0, num_shards={self.num_shards})"
            raise InvalidOption("shard_index", self.shard_index, expected)

    def check(self) -> None:
        if not self.docs:
            raise BadInput("--docs is required with --teacher llm (the default)")
        if self.prompts not in ("auto", "chat", "base"):
            raise InvalidOption("prompts", self.prompts, "one of auto, chat, base")
        self.node_mix = parse_mix(self.node_mix)

    def content(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: d[k] for k in CONTENT_KEYS}
