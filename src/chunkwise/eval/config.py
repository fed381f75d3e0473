"""What one evaluation is: :class:`EvalConfig`, a recipe under ``recipes/eval/`` or the flags of
``chunkwise eval``, and the checks that make it a valid one."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from chunkwise.config.convert import InvalidOption
from chunkwise.errors import BadInput

PROMPT_KINDS = ("auto", "chat", "base")
#: the largest seed: every generator the seed reaches (random, numpy) takes 0 .. 2**63 - 1
MAX_SEED = 2**63 - 1
#: whole-number keys that may be left unset
OPTIONAL_WHOLE = frozenset({"context_window", "wandb_step", "plan_reply_tokens"})
TRUNCATIONS = ("document", "official")

#: config keys that may change between sessions of one run: they do not change any prediction
RESUME_EXEMPT = frozenset(
    {
        "output",
        "scorer",
        "extract",
        "log_samples",
        "audit",
        "lengths",
        "effective_threshold",
        "plan",
        "plan_rates",
        "plan_reply_tokens",
        "parallel",
        "wandb",
        "wandb_project",
        "wandb_entity",
        "wandb_tags",
        "wandb_step",
        "wandb_group",
        "checkpoints",
    }
)


@dataclass
class EvalConfig:
    """One evaluation: a recipe under ``recipes/eval/`` or the flags of ``chunkwise eval``."""

    #: model spec or training output folder (hf:default, openai:M@URL, vllm:ID?tp=8, a folder)
    model: str = "hf:default"
    #: decoding mode: any registered strategy (standard, mapreduce, chain_of_agents, ...)
    strategy: str = "standard"
    #: the strategy's options, k=v,k2=v2 (chunk_tokens=500,grounding=true); options the model
    #: carries in its strategy.json fill the rest (results.json records which came from where)
    strategy_args: dict[str, Any] = field(default_factory=dict)
    #: benchmark: infinitebench, ruler, qasper, ...
    benchmark: str = "infinitebench"
    #: task names, comma-separated (passkey,kv_retrieval), or all (every task the data can
    #: provide)
    tasks: list[str] = field(default_factory=lambda: ["passkey"])
    #: hub | a folder of official <task>.jsonl files | synthetic:LENGTH
    data: str = "hub"
    #: Hub dataset revision (default: the benchmark's pinned one)
    revision: str | None = None
    #: first N examples of each task (synthetic: generate N), or a fraction below 1 (0.1: that
    #: share of each task's examples, rounded up)
    limit: int | float | None = None
    #: synthetic data seed (also the bootstrap's seed)
    seed: int = 0
    #: cap the context window the strategy may use below the model's own (tokens)
    context_window: int | None = None
    #: question wording: auto (chat when the model takes chat messages) | chat | base
    prompts: Literal["auto", "chat", "base"] = "auto"
    #: your copy of InfiniteBench's src/prompt.py: use its official templates (read as data,
    #: never run) instead of ours
    prompt_source: str | None = None
    #: template family in it: gpt4 | claude2 | kimi | yarn_mistral (| yi-6b-200k ...)
    prompt_family: str | None = None
    #: document: cut the document's middle, room kept for the output | official: cut the whole
    #: prompt's middle to the window, as InfiniteBench's scripts do
    truncation: Literal["document", "official"] = "document"
    #: official | lenient
    scorer: str = "official"
    #: answer extraction before scoring: auto (under mapreduce the answer the strategy parsed
    #: from our prompts' Answer: field, else none) | none | parsed | mapreduce (LLM×MapReduce's
    #: own process_answer, for replies in the reference's format) | answer_field. Rerunning a
    #: finished run with another --extract or --scorer rescores it without loading the model
    extract: str = "auto"
    #: run folder, e.g. runs/NAME (rerun to resume)
    output: str = "runs/eval"
    #: keep each strategy trace (every LLM call) in the prediction lines
    save_trace: bool = True
    #: answer N examples at once, their model calls merged into one batch (worth it on vLLM
    #: and batched HF decoding; predictions are written as they finish)
    parallel: int = 1
    #: store every call's exact prompt in the prediction lines and write samples/<task>.jsonl
    #: (prompt, raw output, extracted answer, per-sample score)
    log_samples: bool = False
    #: the evidence audit: each prediction line gets an ``audit`` (where the gold evidence is,
    #: what the strategy did with it, one outcome) and results.json a funnel per task; read
    #: from the trace, no model call. Rerun a finished run with it to audit saved predictions
    audit: bool = False
    #: log to Weights & Biases (WANDB_MODE=offline unless you set it)
    wandb: bool = False
    #: wandb project
    wandb_project: str = "chunkwise-eval"
    #: wandb entity (team or user)
    wandb_entity: str | None = None
    #: extra wandb tags, comma-separated
    wandb_tags: list[str] = field(default_factory=list)
    #: log the metrics at this step (e.g. the training step of the checkpoint)
    wandb_step: int | None = None
    #: wandb group of the run (a checkpoint sweep puts all its runs in one group)
    wandb_group: str | None = None
    #: effective context length: run the same tasks at each length (4K,8K,16K: K = 1024
    #: tokens) into OUTPUT/len-<L>/ and write OUTPUT/lengths.json and lengths.png; --data must
    #: have a length (synthetic:LENGTH, heldout:LENGTH, train:LENGTH)
    lengths: list[str] = field(default_factory=list)
    #: with --lengths: a score (percent) a length must stay above, reported beside RULER's
    #: 85.6 (Llama-2-7B at 4K)
    effective_threshold: float | None = None
    #: print what the evaluation would take (examples, LLM calls, prefill and decode tokens,
    #: time) without running it
    plan: bool = False
    #: with --plan: prefill=TOK_PER_S,decode=TOK_PER_S for the time estimate, probe (measure
    #: both on the model with two short calls), or kept (the pace of the calls --output keeps)
    plan_rates: str | None = None
    #: with --plan: assume each call writes this many tokens (default: its whole output budget,
    #: an upper bound)
    plan_reply_tokens: int | None = None
    #: with --model RUN_DIR (a training run's folder): evaluate its step checkpoints and final
    #: model into OUTPUT/step-<N>/ and OUTPUT/final/, then OUTPUT/curve.json and curve.png:
    #: all, last, steps (2,4,6), or watch (as the training writes them, until it finishes)
    checkpoints: str | None = None

    def __post_init__(self) -> None:
        # what each value must be, checked as the config is read (the error names the recipe
        # line or the flag); resolved() checks again once window=N among the strategy options
        # has joined context_window
        _check_limit(self.limit)
        _check_whole("context_window", self.context_window, 1, "tokens")
        _check_whole("parallel", self.parallel, 1, "examples")
        _check_whole("seed", self.seed, 0, "", high=MAX_SEED)
        _check_whole("wandb_step", self.wandb_step, 0, "steps")
        _check_whole("plan_reply_tokens", self.plan_reply_tokens, 1, "tokens")

    def resolved(self) -> EvalConfig:
        """A checked copy: tasks split on commas, options as text, the Hub revision pinned."""
        tasks: list[str] = []
        for t in self.tasks:
            tasks.extend(p.strip() for p in str(t).split(",") if p.strip())
        args = {str(k): _option_text(v) for k, v in (self.strategy_args or {}).items()}
        context_window = _window(self.context_window, args.pop("window", None), self.strategy)
        if self.prompts not in PROMPT_KINDS:
            raise InvalidOption("prompts", self.prompts, "one of " + ", ".join(PROMPT_KINDS))
        if self.truncation not in TRUNCATIONS:
            raise InvalidOption("truncation", self.truncation, "one of " + ", ".join(TRUNCATIONS))
        if (self.prompt_source is None) != (self.prompt_family is None):
            raise BadInput(
                "--prompt-source (InfiniteBench's src/prompt.py) and --prompt-family "
                "(e.g. gpt4) go together"
            )
        limit = _check_limit(self.limit)
        _check_whole("context_window", context_window, 1, "tokens")
        _check_whole("parallel", self.parallel, 1, "examples")
        _check_whole("seed", self.seed, 0, "", high=MAX_SEED)
        _check_whole("wandb_step", self.wandb_step, 0, "steps")
        if not str(self.output).strip():
            raise BadInput("output (the run folder) is empty")
        revision = self.revision
        if self.data.strip() == "hub" and revision is None:
            from chunkwise.benchmarks import get_benchmark

            revision = get_benchmark(self.benchmark).hub_revision
        return dataclasses.replace(
            self,
            tasks=tasks,
            strategy_args=args,
            context_window=context_window,
            revision=revision,
            data=self.data.strip(),
            limit=limit,
            wandb_tags=[str(t) for t in self.wandb_tags],
        )


def _check_whole(key: str, value: Any, low: int, unit: str, *, high: int | None = None) -> None:
    """``value`` (of config key ``key``) is None or a whole number in [low, high]: checked
    with the config, so that nothing fails after the predictions are written."""
    if value is None and key in OPTIONAL_WHOLE:
        return
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= low
    if ok and (high is None or value <= high):
        return
    what = f"a whole number of {unit}" if unit else "a whole number"
    bound = f"from {low} to {high}" if high is not None else f"{low} or more"
    raise InvalidOption(key, value, f"{what} ({bound})")


def _window(context_window: Any, text: str | None, strategy: str) -> Any:
    """The window cap: ``context_window``, or ``window=N`` given among the strategy options
    (stored as context_window, so both spellings make the same run)."""
    if text is None:
        return context_window
    from chunkwise.options import convert_option

    window = convert_option(f"strategy {strategy!r}", "window", text, int | None)
    if context_window is not None and window is not None and window != context_window:
        raise BadInput(
            f"the window is given twice with different values: window={text} among the "
            f"strategy options and context_window={context_window}; give one of them"
        )
    return context_window if window is None else window


def _check_limit(limit: int | float | None) -> int | float | None:
    if limit is None:
        return None
    ok = not isinstance(limit, bool) and isinstance(limit, (int, float)) and math.isfinite(limit)
    if ok and 0 < limit < 1:
        return float(limit)
    if not ok or limit < 1 or limit != int(limit):
        raise InvalidOption(
            "limit",
            limit,
            "a whole number of examples (at least 1) or a fraction between 0 and 1",
        )
    return int(limit)


def take(examples: list[Any], limit: int | float | None) -> list[Any]:
    """The first ``limit`` examples (a fraction: that share, rounded up, at least one)."""
    if limit is None:
        return examples
    if isinstance(limit, float) and limit < 1:
        return examples[: max(1, math.ceil(limit * len(examples)))]
    return examples[: int(limit)]


def _option_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


__all__ = [
    "PROMPT_KINDS",
    "RESUME_EXEMPT",
    "TRUNCATIONS",
    "EvalConfig",
    "take",
]
