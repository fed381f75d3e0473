"""The capped reader: what a bounded memory keeps of the facts read so far (the facts known
to bear on the question first, then the most recent others, while they fit), and scripted
chat models that play Chain-of-Agents' workers and manager with that rule."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from chunkwise.data.multihop.chains import CHAIN_QUESTION, FACT, chain_names, facts_in, resolve
from chunkwise.data.multihop.sections import CountTokens
from chunkwise.data.multihop.trees import (
    ASSIGNMENT,
    assignments_in,
    holders,
    path_up,
    tree_answer,
    tree_target,
)


def keep_within(
    pool: Sequence[str], relevant: Callable[[str], bool], cap: int, count: CountTokens
) -> list[str]:
    """The capped reader's rule: the relevant facts of ``pool`` (read order) first, then the
    others, most recent first, each only while the joined notes stay within ``cap`` tokens;
    the kept facts in read order."""
    ranked = [f for f in pool if relevant(f)] + [f for f in reversed(pool) if not relevant(f)]
    kept: list[str] = []
    for f in ranked:
        trial = [g for g in pool if g in kept or g == f]
        if count(" ".join(trial)) <= cap:
            kept.append(f)
    return [f for f in pool if f in kept]


def keep_facts(
    memory: Sequence[str], new: Sequence[str], obj: str, cap: int, count: CountTokens
) -> list[str]:
    """What the capped reader keeps after reading ``new`` with ``memory`` in hand: facts on
    the question's chain as known so far (head first), then other facts, most recent first,
    each only while the joined notes stay within ``cap`` tokens. Kept facts stay in the order
    they were read."""
    pool = list(dict.fromkeys([*memory, *new]))  # read order, no repeats
    on_chain = set(chain_names(pool, obj))

    def relevant(f: str) -> bool:
        m = FACT.fullmatch(f)
        if m is None:
            return False
        return m.group("obj") == obj or (m.group("mid") or m.group("tail")) in on_chain

    return keep_within(pool, relevant, cap, count)


def _capped_reader(
    worker: Callable[[str, str, str], str], manager: Callable[[str, str], str], window: int
):
    """A scripted chat model playing both Chain-of-Agents roles of the chat prompt set:
    ``worker(question, memory, chunk)`` writes the new notes, ``manager(question, memory)``
    the answer."""
    from chunkwise.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(window=window)
    llm.chat = True
    llm.rules = [
        (
            r"Question: (?P<q>[^\n]*)\n\n===== Notes from the previous reader =====\n"
            r"(?P<mem>.*?)\n===== This part of the document =====\n(?P<chunk>.*?)\n===== End",
            lambda m: worker(m.group("q"), m.group("mem"), m.group("chunk")),
        ),
        (
            r"===== Notes =====\n(?P<mem>.*?)\n===== End of notes =====\n\nQuestion: (?P<q>[^\n]*)",
            lambda m: manager(m.group("q"), m.group("mem")),
        ),
    ]
    llm.__post_init__()  # compile the rules
    return llm


def memory_cap_reader(cap: int, window: int = 8192):
    """A :class:`~chunkwise.llm.scripted.ScriptedLLM` that plays both Chain-of-Agents roles on
    this task through the chat prompt set (whose workers rewrite the memory): as a worker it
    rewrites the notes with :func:`keep_facts` under ``cap`` tokens; as the manager it follows
    the chain in the notes and answers its code ("unknown" when the chain is broken)."""
    llm: Any = None

    def worker(question: str, mem: str, chunk: str) -> str:
        q = CHAIN_QUESTION.search(question)
        obj = q.group("obj") if q else ""
        kept = keep_facts(facts_in(mem), facts_in(chunk), obj, cap, llm.count_tokens)
        return " ".join(kept) if kept else "(nothing yet)"

    def manager(question: str, mem: str) -> str:
        q = CHAIN_QUESTION.search(question)
        code = resolve(facts_in(mem), q.group("obj")) if q else None
        return f"Answer: {code or 'unknown'}"

    llm = _capped_reader(worker, manager, window)
    return llm


def keep_tree_facts(
    memory: Sequence[str], new: Sequence[str], question: str, cap: int, count: CountTokens
) -> list[str]:
    """The capped reader's choice on a tree document: the facts known so far to bear on the
    question first (the value's holders for ``all``, the asked variable's path upwards for
    ``leaf``), then the others, most recent first, each while the notes fit in ``cap``
    tokens. Kept facts stay in the order they were read."""
    pool = list(dict.fromkeys([*memory, *new]))
    value, name = tree_target(question)
    on = set(holders(pool, value)) if value is not None else set(path_up(pool, name or ""))

    def relevant(f: str) -> bool:
        m = ASSIGNMENT.fullmatch(f)
        return m is not None and m.group("name") in on

    return keep_within(pool, relevant, cap, count)


def tree_reader(cap: int, window: int = 8192):
    """The scripted capped reader for :func:`generate_tree` documents (chat prompt set): as a
    worker it keeps :func:`keep_tree_facts` under ``cap`` tokens; as the manager it answers
    from the notes ("unknown" when they do not answer)."""
    llm: Any = None

    def worker(question: str, mem: str, chunk: str) -> str:
        kept = keep_tree_facts(
            assignments_in(mem), assignments_in(chunk), question, cap, llm.count_tokens
        )
        return " ".join(kept) if kept else "(nothing yet)"

    def manager(question: str, mem: str) -> str:
        return f"Answer: {tree_answer(assignments_in(mem), question) or 'unknown'}"

    llm = _capped_reader(worker, manager, window)
    return llm
