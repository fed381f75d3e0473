"""The answer step of the tree strategies: the context budget and the one answer call."""

from __future__ import annotations

from chunkwise.llm import GenerationParams
from chunkwise.strategies.base import Query
from chunkwise.strategies.trees.calls import Prompts, TreeRun
from chunkwise.strategies.trees.select import Context
from chunkwise.text import chunk_budget


def answer_params(prompts: Prompts, query: Query, temperature: float = 0.0) -> GenerationParams:
    p = prompts.params("answer", temperature)
    if query.max_answer_tokens:
        p = p.with_(max_new_tokens=max(p.max_new_tokens, query.max_answer_tokens))
    return p


def context_budget(run: TreeRun, prompts: Prompts, query: Query, window: int, cap: int) -> int:
    """Tokens of retrieved text the answer call may read: ``cap`` or what fits the window."""
    params = answer_params(prompts, query)
    template = run.prompt_tokens(
        prompts.render(
            "answer",
            context="",
            question=query.render(),
            answer_prefix=query.answer_prefix or "Answer:",
        )
    )
    fits = chunk_budget(window, template, 0, params.max_new_tokens)
    return min(cap, fits) if cap > 0 else fits


def answer_from_context(
    run: TreeRun, prompts: Prompts, query: Query, context: Context, temperature: float = 0.0
) -> str:
    prompt = prompts.render(
        "answer",
        context=context.text,
        question=query.render(),
        answer_prefix=query.answer_prefix or "Answer:",
    )
    out = run.call(
        "answer", [prompt], answer_params(prompts, query, temperature), [context.node_ids]
    )[0]
    return out.text.strip()
