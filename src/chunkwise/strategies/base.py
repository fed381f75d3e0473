"""The strategy contract: ``answer(document, query, llm) -> Answer``, and the registry.

Every way of reading a long document (standard decoding, MapReduce, Chain-of-Agents, summary
trees, retrieval) is a peer behind this one signature, so benchmarks, synthesis and the CLI
never special-case a strategy.
"""

from __future__ import annotations

import dataclasses
import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from chunkwise.config.convert import bad_value
from chunkwise.errors import BadInput
from chunkwise.llm import LLM, Completion, Request
from chunkwise.options import convert_options, parse_strategy_args  # noqa: F401 (re-exported)

TaskFamily = Literal["qa", "multiple_choice", "summary", "retrieval", "code", "math", "dialogue"]
TASK_FAMILIES: tuple[str, ...] = (
    "qa",
    "multiple_choice",
    "summary",
    "retrieval",
    "code",
    "math",
    "dialogue",
)

TRUNCATIONS: tuple[str, ...] = ("document", "official")


@dataclass(frozen=True)
class Query:
    """What is asked about a document."""

    question: str
    task: str = "qa"
    options: tuple[str, ...] = ()
    #: for completion-style (base model) prompts: the words the answer continues, e.g.
    #: "The pass key is" (InfiniteBench's open-model templates); default "Answer:"
    answer_prefix: str = ""
    #: budget for the final answer, e.g. InfiniteBench's per-task output lengths (None: the
    #: prompt set's default; strategies never go below what their answer format needs)
    max_answer_tokens: int | None = None
    #: a benchmark's whole single-call prompt, as (text before the document, text after it);
    #: single-call strategies (standard) send exactly ``before + document + after`` instead of
    #: their own prompt set; multi-call strategies read ``question`` as usual
    frame: tuple[str, str] | None = None
    #: how a single-call strategy fits an over-long prompt: ``document`` (cut the document's
    #: middle, room kept for the question and the output) or ``official`` (InfiniteBench's
    #: scripts: the whole prompt's token ids cut in the middle to the window, no marker, no
    #: room reserved for the output)
    truncation: str = "document"
    #: a task's own hint on the answer's form (overrides the prompt set's per-family hint)
    hint: str | None = None

    def __post_init__(self) -> None:
        if self.truncation not in TRUNCATIONS:
            raise BadInput(
                f"unknown truncation {self.truncation!r}; valid: {', '.join(TRUNCATIONS)}"
            )
        if self.task not in TASK_FAMILIES:
            raise BadInput(f"unknown task family {self.task!r}; valid: {', '.join(TASK_FAMILIES)}")
        if not self.question.strip():
            raise BadInput("the question is empty")
        object.__setattr__(self, "options", tuple(self.options))

    def render(self) -> str:
        """The question as the model sees it, options lettered A, B, C, ..."""
        if not self.options:
            return self.question.strip()
        letters = "ABCDEFGHIJ"
        opts = "\n".join(f"{letters[i]}. {o}" for i, o in enumerate(self.options))
        return f"{self.question.strip()}\n{opts}"


@dataclass
class TraceEvent:
    """One LLM call of a strategy: which stage, what it read, what came back."""

    stage: str
    inputs: list[Any]
    output: dict[str, Any]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    round: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Stats:
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, completions: Sequence[Completion]) -> None:
        self.llm_calls += len(completions)
        self.prompt_tokens += sum(c.prompt_tokens for c in completions)
        self.completion_tokens += sum(c.completion_tokens for c in completions)

    def to_dict(self) -> dict[str, Any]:
        d = {
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3),
        }
        d.update(self.extra)
        return d


@dataclass
class Answer:
    text: str
    trace: list[TraceEvent] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)

    def to_dict(self, with_trace: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {"answer": self.text, "stats": self.stats.to_dict()}
        if with_trace:
            d["trace"] = [e.to_dict() for e in self.trace]
        return d


class Strategy:
    """Base class: subclasses set ``name`` and implement :meth:`run`.

    A strategy's options are its constructor's annotated parameters, each documented in the
    class docstring's Options table (one line per option, its name then its meaning;
    :func:`chunkwise.options.option_docs` reads it). Every strategy takes:

    window              cap on the context window the strategy may use, below the model's own
                        (tokens; none: the model's)
    """

    name: ClassVar[str] = ""

    def __init__(self, window: int | None = None):
        self.window = window

    def effective_window(self, llm: LLM) -> int:
        return min(self.window, llm.context_window) if self.window else llm.context_window

    def answer(self, document: str, query: Query, llm: LLM) -> Answer:
        t0 = time.perf_counter()
        ans = self.run(document, query, llm)
        ans.stats.seconds = time.perf_counter() - t0
        return ans

    def run(self, document: str, query: Query, llm: LLM) -> Answer:  # pragma: no cover
        raise NotImplementedError

    def for_planning(self) -> Strategy:
        """The strategy ``chunkwise eval --plan`` runs against its stand-in model, whose
        replies are filler: this one, unless a strategy would drop those replies for not being
        what its model writes (:meth:`MapReduce.for_planning`)."""
        return self

    # helper shared by strategies: one wave of calls, counted
    @staticmethod
    def call(llm: LLM, requests: Sequence[Request], stats: Stats) -> list[Completion]:
        out = llm.generate(requests)
        stats.add(out)
        return out


STRATEGIES: dict[str, type[Strategy]] = {}

#: the modules whose import registers the built-in strategies (imported by name on first
#: lookup, as the model backends are, so that this module imports none of its peers)
BUILTIN_MODULES = tuple(
    f"chunkwise.strategies.{m}"
    for m in ("standard", "mapreduce", "chain_of_agents", "retrieval", "raptor", "dtcrs")
)


def register(cls: type[Strategy]) -> type[Strategy]:
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    STRATEGIES[cls.name] = cls
    return cls


def check_option(
    strategy: str,
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    choices: Sequence[Any] | None = None,
    fraction: bool = False,
) -> None:
    """A strategy's own check of what an option's value means, in the one error format
    (``strategy 'raptor': option top_k=-1 is not valid; expected a number >= 0``): ``value``
    must be one of ``choices``, ``>= minimum``, or (``fraction``) in ``[0, 1)``."""
    where = f"strategy {strategy!r}"
    if choices is not None and value not in choices:
        expected = "one of " + ", ".join(str(c) for c in choices)
        raise bad_value(where, name, value, expected=expected)
    if minimum is not None and value < minimum:
        raise bad_value(where, name, value, expected=f"a number >= {minimum:g}")
    if fraction and not 0.0 <= value < 1.0:
        raise bad_value(where, name, value, expected="a number in [0, 1)")


def strategy_class(name: str) -> type[Strategy]:
    """The registered strategy called ``name`` (built-in ones are imported on first use)."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    if name not in STRATEGIES:
        raise BadInput(f"unknown strategy {name!r}; valid: {', '.join(sorted(STRATEGIES))}")
    return STRATEGIES[name]


def get_strategy(name: str, **kwargs: Any) -> Strategy:
    """Instantiate a registered strategy; text values (``--strategy-args k=v``) are converted
    by each option's declared type (:mod:`chunkwise.options`)."""
    cls = strategy_class(name)
    return cls(**convert_options(f"strategy {name!r}", cls, kwargs))
