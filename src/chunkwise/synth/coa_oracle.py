"""The Chain-of-Agents oracle: exact worker and manager targets for tree-shaped variable
tracking (:func:`chunkwise.data.multihop.generate_tree`), as chat records to train a
worker/manager head on (``make default-coa``).

Like the MapReduce oracle (:mod:`chunkwise.synth.oracle`) it does not re-implement the
strategy: it runs ``chain_of_agents`` itself, with the ``mr`` prompt set, the real model's
tokenizer and a hard memory cap, on a stand-in model (:class:`CoAOracleLLM`) that answers each
call from the document's assignments:

* a **worker** (memory so far + one chunk) rewrites the memory as the capped reader of
  :func:`~chunkwise.data.multihop.keep_tree_facts` would: the assignments known so far to bear
  on the question (the value's holders for "which variables", the asked variable's path
  upwards for "which value") first, then the others, newest first, while they fit in the cap;
  the kept ones in the order they were read (the memory copied, the chunk's facts appended,
  the oldest unrelated ones dropped when it is full: the easiest rule for a small model to
  learn, since the cap itself is not in the prompt);
* the **manager** follows the assignments in the final memory and answers (``[NO
  INFORMATION]`` when they do not reach an answer), with the chain it followed as rationale.

Every call of every run is recorded as a LongAlign record ``{id, messages, meta}``: the exact
messages the strategy sent plus the oracle's reply. Training on them teaches the paper's
rewrite-memory worker (CU_i = W(CU_{i-1}, c_i, q)) on this one task; which ordering of the
chunks a run used is drawn per group of documents from the four the strategy offers, so the
worker meets the memory states of every ordering.

    python -m chunkwise.synth.coa_oracle --out runs/default-coa/data/coa.jsonl --groups 1
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chunkwise.data import multihop as mh
from chunkwise.errors import BadInput
from chunkwise.io import atomic_write_text, check_output_file, dumps_json
from chunkwise.llm import LLM, Completion, Request
from chunkwise.prompts import prompt_set
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.ordering import ORDERINGS
from chunkwise.strategies.protocol import NO_INFO
from chunkwise.synth.calls import Delegate

#: the prompt set the head is trained and decoded with (chain_of_agents ``prompts=mr``)
PROMPTS = "mr"
#: documents' seeds start here; bench/orderings.py reads seed 0 onwards (held out)
TRAIN_SEED = 1_000_000
#: memory caps, as factors of the largest evidence of a group (bench/orderings.py's rule;
#: 1.0 is its default): the cap is not in the prompt, so one factor keeps the rule learnable
CAP_FACTORS = (1.0,)


def _text(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)


def worker_target(part: str, question: str, cap: int, count: Any, label: str, empty: str) -> str:
    """The rewritten memory for a worker that reads ``part`` (memory + chunk)."""
    kept = mh.keep_tree_facts([], mh.assignments_in(part), question, cap, count)
    return f"{label} {' '.join(kept) if kept else empty}"


def manager_target(memory: str, question: str) -> str:
    """``Rationale: ...`` (the assignments followed) and ``Answer: ...`` for the final memory."""
    facts = mh.assignments_in(memory)
    answer = mh.tree_answer(facts, question)
    used = mh.tree_support(facts, question)
    if answer is None:
        why = "The findings do not connect the question to a value."
        return f"Rationale: {why}\nAnswer: {NO_INFO}"
    return f"Rationale: Following the assignments: {' '.join(used)}\nAnswer: {answer}"


class CoAOracleLLM(Delegate):
    """Answers chain_of_agents calls (``mr`` prompts) on tree documents from their text;
    token counting and chat wrapping are the wrapped model's. ``calls`` records every call."""

    def __init__(self, inner: LLM, cap: int):
        super().__init__(inner)
        self.spec = "oracle:coa"
        self.cap = cap
        t = prompt_set("chain_of_agents", PROMPTS, "qa")
        self.worker_head = t["worker"].split("\n", 1)[0]
        self.manager_head = t["manager"].split("\n", 1)[0]
        self.label = t["memory_label"]
        self.empty = t["empty_markers"][0]
        self.calls: list[dict[str, Any]] = []

    def target(self, prompt: Any) -> tuple[str, str]:
        """(role, reply) for one call."""
        text = _text(prompt)
        m = mh.TREE_QUESTION.search(text)
        if m is None:
            raise BadInput(f"not a tree question: {text[-200:]!r}")
        question = m.group(0)
        if text.startswith(self.worker_head):
            part = text.split("===== Part of the document =====\n", 1)[-1]
            part = part.split("\n===== End of part =====", 1)[0]
            reply = worker_target(
                part, question, self.cap, self.count_tokens, self.label, self.empty
            )
            return "worker", reply
        if text.startswith(self.manager_head):
            return "manager", manager_target(text, question)
        raise BadInput(f"neither a worker nor a manager prompt: {text[:120]!r}")

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = []
        for req in requests:
            t0 = time.perf_counter()
            role, reply = self.target(req.prompt)
            used = self.count_tokens(reply)
            if used > req.params.max_new_tokens:
                budget = req.params.max_new_tokens
                raise AssertionError(
                    f"the oracle's {role} target is {used} tokens, over the {budget} "
                    f"decoding gives it: {reply[:80]!r}"
                )
            self.calls.append({"role": role, "prompt": req.prompt, "reply": reply})
            out.append(
                Completion(
                    text=reply,
                    prompt_tokens=self.prompt_tokens(req.prompt),
                    completion_tokens=used,
                    finish_reason="stop",
                    latency_s=time.perf_counter() - t0,
                )
            )
        return out


def cap_tokens(records: Sequence[dict[str, Any]], factor: float, count: Any) -> int:
    """``factor`` x the largest evidence of ``records`` in tokens (bench/orderings.py's caps)."""
    evidence = max(
        count(" ".join(r["meta"]["facts"][str(p)] for p in r["meta"]["evidence"])) for r in records
    )
    return max(1, math.ceil(factor * evidence))


def synthesize(
    out: Path,
    *,
    groups: int,
    group_size: int = 8,
    seed: int = TRAIN_SEED,
    counter: LLM | None = None,
    embedder: Any = "minilm",
    methods: Sequence[str] = tuple(ORDERINGS),
    progress: bool = True,
) -> dict[str, Any]:
    """Write the calls of ``groups`` groups of ``group_size`` documents per (question,
    ordering, cap factor) to ``out``: LongAlign records, one per distinct call. Returns
    counts."""
    if groups < 1 or group_size < 1:
        raise BadInput("groups and group_size must be at least 1")
    check_output_file(out, "--out")  # before the work, not after it
    if counter is None:
        from chunkwise.llm.default_mr import counting_llm

        counter = counting_llm()
    if isinstance(embedder, str):
        from chunkwise.embed import get_embedder

        embedder = get_embedder(embedder)
    seen: set[str] = set()
    stats: Counter[str] = Counter()
    rng = random.Random(seed)
    lines: list[str] = []
    plan = [
        (g, q, m, f)
        for g in range(groups)
        for q in mh.TREE_QUESTIONS
        for m in methods
        for f in CAP_FACTORS
    ]
    rng.shuffle(plan)
    for i, (_g, question, method, factor) in enumerate(plan):
        group_seed = seed + i
        records = mh.generate_tree(n=group_size, seed=group_seed, question=question)
        cap = cap_tokens(records, factor, counter.count_tokens)
        oracle = CoAOracleLLM(counter, cap)
        s = get_strategy(
            "chain_of_agents",
            memory_tokens=cap,
            chunk_tokens=mh.chunk_tokens_for(records, counter.count_tokens),
            ordering=method,
            embedder=embedder,
            prompts=PROMPTS,
        )
        s.answer_many([(r["context"], Query(r["input"])) for r in records], oracle)
        for k, call in enumerate(oracle.calls):
            key = _text(call["prompt"])
            if key in seen:
                stats["duplicates"] += 1
                continue
            seen.add(key)
            stats[call["role"]] += 1
            messages = [*call["prompt"], {"role": "assistant", "content": call["reply"]}]
            lines.append(
                dumps_json(
                    {
                        "id": f"coa-{group_seed}-{k}",
                        "messages": messages,
                        "meta": {
                            "teacher": "coa_oracle",
                            "role": call["role"],
                            "question": question,
                            "ordering": method,
                            "cap_tokens": cap,
                            "cap_factor": factor,
                            "seed": group_seed,
                        },
                    }
                )
            )
        if progress:
            print(
                f"[coa-oracle] {i + 1}/{len(plan)} {question} {method} cap {cap}: {dict(stats)}",
                file=sys.stderr,
                flush=True,
            )
    atomic_write_text(out, "".join(line + "\n" for line in lines))
    return {"records": stats["worker"] + stats["manager"], **stats, "groups": len(plan)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chunkwise.synth.coa_oracle", description=__doc__)
    ap.add_argument("--out", type=Path, required=True, help="the LongAlign JSONL to write")
    ap.add_argument("--groups", type=int, default=1, help="groups per (question, ordering, cap)")
    ap.add_argument("--group-size", type=int, default=8, help="documents per group")
    ap.add_argument("--seed", type=int, default=TRAIN_SEED)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    try:
        stats = synthesize(
            args.out,
            groups=args.groups,
            group_size=args.group_size,
            seed=args.seed,
            progress=not args.no_progress,
        )
    except BadInput as e:
        print(f"coa-oracle: error: {e}", file=sys.stderr)
        return 2
    print(stats)
    return 0


__all__ = ["CoAOracleLLM", "cap_tokens", "manager_target", "synthesize", "worker_target"]


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
