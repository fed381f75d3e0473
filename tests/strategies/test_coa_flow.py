"""Chain-of-Agents control flow with the scripted double (fast, deterministic)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkwise.errors import BadInput
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import STRATEGIES, Query, get_strategy
from chunkwise.strategies.chain_of_agents import truncate_tokens
from chunkwise.strategies.ordering import order_chunks
from chunkwise.text import chunk_document

NOTES = re.compile(r"===== Notes from the previous reader =====\n(.*?)\n===== This part", re.S)
PART = re.compile(r"===== This part of the document =====\n(.*?)\n===== End of this part", re.S)
FINAL = re.compile(r"===== Notes =====\n(.*?)\n===== End of notes", re.S)


def doc(n_paras: int, words: int = 40) -> str:
    return "\n\n".join(
        " ".join([f"P{i}."] + [f"w{i}x{j}" for j in range(words)]) for i in range(n_paras)
    )


def text_of(req) -> str:
    return req.prompt[0]["content"] if isinstance(req.prompt, list) else req.prompt


def chat_llm(rules, window=400, default="nothing"):
    llm = ScriptedLLM(rules=rules, default=default, window=window)
    llm.chat = True
    return llm


def _worker_reply(text: str) -> str:
    """Notes = previous notes + the paragraph tag of this part (P3.), so order is visible."""
    notes = NOTES.search(text).group(1)
    part = PART.search(text).group(1)
    tag = part.split()[0]
    prev = "" if notes.startswith("(no notes yet") else notes + " "
    return prev + tag


def scripted_chain(window=400, manager=lambda notes: f"Answer: {notes}"):
    def reply(m: re.Match) -> str:
        text = m.string
        if "===== This part of the document" in text:
            return _worker_reply(text)
        return manager(FINAL.search(text).group(1))

    return chat_llm([(r"^", reply)], window=window)


def test_registered_and_options_checked():
    assert "chain_of_agents" in STRATEGIES
    with pytest.raises(BadInput, match="ordering"):
        get_strategy("chain_of_agents", ordering="random")
    with pytest.raises(BadInput, match="similarity"):
        get_strategy("chain_of_agents", similarity="tfidf")
    s = get_strategy("chain_of_agents", memory_tokens="32", keep_on_empty="false")
    assert s.memory_tokens == 32 and s.keep_on_empty is False


def test_workers_in_document_order_then_one_manager_with_the_final_memory():
    llm = scripted_chain()
    ans = get_strategy("chain_of_agents", memory_tokens=64).answer(
        doc(5), Query("Which parts?"), llm
    )
    stages = [
        "worker" if "This part of the document" in text_of(r) else "manager" for r in llm.calls
    ]
    n = ans.stats.extra["chunks"]
    assert n >= 3
    assert stages == ["worker"] * n + ["manager"]
    # each worker saw the memory the one before wrote
    memories = [e.output["memory"] for e in ans.trace if e.stage == "worker"]
    for k, req in enumerate(llm.calls[1:n]):
        assert NOTES.search(text_of(req)).group(1) == memories[k]
    assert NOTES.search(text_of(llm.calls[0])).group(1).startswith("(no notes yet")
    # the manager saw only the last memory, and its answer is parsed out of "Answer: ..."
    assert FINAL.search(text_of(llm.calls[-1])).group(1) == memories[-1]
    tags = [c.text.split()[0] for c in chunk_document(doc(5), llm, ans.stats.extra["chunk_budget"])]
    assert ans.text == " ".join(tags)
    assert ans.stats.llm_calls == n + 1
    assert [e.round for e in ans.trace] == [*range(1, n + 1), n]
    assert ans.trace[-1].stage == "manager" and ans.trace[-1].inputs == list(range(n))


def test_chunk_budget_is_window_minus_memory_question_and_instruction():
    llm = scripted_chain(window=400)
    s = get_strategy("chain_of_agents", memory_tokens=50)
    q = Query("Which parts of the text are there?")
    ans = s.answer(doc(8), q, llm)
    x = ans.stats.extra
    assert x["memory_tokens"] == 50
    template = llm.prompt_tokens(
        [{"role": "user", "content": s.worker_prompt(s.templates("chat", "qa"), "", "", q)}]
    )
    assert x["question_tokens"] == llm.count_tokens(q.render())
    assert x["instruction_tokens"] + x["question_tokens"] == template
    # window - (instruction + question) - memory read - memory written - safety margin
    assert x["chunk_budget"] == 400 - template - 50 - 50 - 16
    for req in llm.calls[:-1]:
        assert llm.prompt_tokens(req.prompt) + req.params.max_new_tokens <= 400
        assert req.params.max_new_tokens == 50


def test_window_too_small_is_a_clear_error():
    with pytest.raises(BadInput, match="no room for a chunk"):
        get_strategy("chain_of_agents", memory_tokens=200).answer(
            doc(3), Query("q?"), scripted_chain(window=400)
        )


@settings(max_examples=40, deadline=None)
@given(
    cap=st.integers(1, 40),
    reply_words=st.integers(0, 120),
    paras=st.integers(1, 6),
    base=st.booleans(),
)
def test_memory_cap_is_never_exceeded(cap, reply_words, paras, base):
    """Whatever the workers write, no memory passed on is over the cap, and every cut is
    counted."""
    reply = " ".join(f"fact{k}," for k in range(reply_words))
    llm = ScriptedLLM(default=reply, window=600)
    llm.chat = not base
    ans = get_strategy("chain_of_agents", memory_tokens=cap).answer(
        doc(paras, words=30), Query("What facts?"), llm
    )
    workers = [e for e in ans.trace if e.stage == "worker"]
    assert workers
    for e in workers:
        assert e.output["memory_tokens"] <= cap
        assert llm.count_tokens(e.output["memory"]) <= cap
    final = ans.trace[-1].output["memory"]
    assert llm.count_tokens(final) <= cap
    assert ans.stats.extra["memory_truncations"] == sum(e.output["truncated"] for e in workers)


def test_overlong_worker_output_is_cut_and_counted():
    """A backend that ignores max_new_tokens (as remote APIs may) is cut by the strategy."""

    class Overlong(ScriptedLLM):
        def _generate(self, requests):
            outs = super()._generate(requests)
            for o in outs:
                o.text = "word " * 100
            return outs

    llm = Overlong(window=600)
    ans = get_strategy("chain_of_agents", memory_tokens=10).answer(doc(3), Query("q?"), llm)
    workers = [e for e in ans.trace if e.stage == "worker"]
    assert all(e.output["truncated"] and e.output["memory_tokens"] <= 10 for e in workers)
    assert ans.stats.extra["memory_truncations"] == len(workers)


def test_truncate_tokens_keeps_the_head_at_a_token_boundary():
    llm = ScriptedLLM()
    text = "alpha beta, gamma delta epsilon"
    cut, n = truncate_tokens(text, llm, 3)
    assert cut == "alpha beta," and n == 3
    assert truncate_tokens(text, llm, 100) == (text, llm.count_tokens(text))
    assert truncate_tokens(text, llm, 0) == ("", 0)


def test_empty_worker_output_keeps_the_previous_memory_by_default():
    def reply(m):
        text = m.string
        if "This part of the document" not in text:
            return "Answer: " + FINAL.search(text).group(1)
        part = PART.search(text).group(1)
        return "" if part.startswith("P1.") else part.split()[0]

    for keep, expected in ((True, "P0."), (False, "(no notes yet")):
        llm = chat_llm([(r"^", reply)], window=400)
        s = get_strategy("chain_of_agents", memory_tokens=20, chunk_tokens=70, keep_on_empty=keep)
        ans = s.answer(doc(2, words=60), Query("q?"), llm)
        assert ans.stats.extra["chunks"] == 2
        assert ans.text.startswith(expected)
        assert ans.stats.extra["empty_updates"] == (1 if keep else 0)


def test_ordering_option_sets_the_reading_order():
    paras = [
        "Bakers bake bread in ovens every morning before dawn.",
        "The lighthouse code is written in the note about Odile.",
        "Rain fell on the fields and the river rose.",
        "Note about Odile: the lighthouse code is 4817.",
    ]
    document = "\n\n".join(p + " " + " ".join(["filler"] * 30) for p in paras)
    q = Query("What is the lighthouse code?")
    for method in ("default", "dense", "chowliu", "dfs"):
        llm = scripted_chain(window=400)
        s = get_strategy(
            "chain_of_agents",
            memory_tokens=30,
            chunk_tokens=48,
            ordering=method,
            embedder="hashing",
        )
        ans = s.answer(document, q, llm)
        chunks = chunk_document(document, llm, ans.stats.extra["chunk_budget"])
        assert len(chunks) == 4
        expected = order_chunks(method, [c.text for c in chunks], q.render(), embedder="hashing")
        assert ans.stats.extra["order"] == expected.order
        read = [PART.search(text_of(r)).group(1) for r in llm.calls[:-1]]
        assert read == [chunks[i].text for i in expected.order]
        if method != "default":
            assert ans.stats.extra["root"] == 1


def test_answer_many_matches_one_by_one_and_batches_each_step():
    docs = [doc(3), doc(5), doc(1)]
    qs = [Query(f"Question {i}?") for i in range(3)]
    s = get_strategy("chain_of_agents", memory_tokens=40)
    single = [s.answer(d, q, scripted_chain()) for d, q in zip(docs, qs, strict=True)]

    class Counting(ScriptedLLM):
        waves: list[int]

        def _generate(self, requests):
            self.waves.append(len(requests))
            return super()._generate(requests)

    llm = Counting(rules=scripted_chain().rules, window=400)
    llm.__post_init__()
    llm.chat = True
    llm.waves = []
    many = s.answer_many(list(zip(docs, qs, strict=True)), llm)
    assert [a.text for a in many] == [a.text for a in single]
    steps = [a.stats.extra["chunks"] for a in many]
    # one wave per step while any chain has chunks left, then one wave of managers
    assert llm.waves == [sum(n > k for n in steps) for k in range(max(steps))] + [3]
    assert all(a.stats.extra["batched_with"] == 3 for a in many)


def test_base_prompts_append_to_the_notes_and_end_where_the_continuation_begins():
    seen = []

    def reply(m):
        seen.append(m.string)
        if "\n\nP" not in m.string:  # the manager: no chunk in its prompt
            return " 4711"
        return f" fact{len(seen)} and more words"

    llm = ScriptedLLM(rules=[(r"^", reply)], window=500)
    cap = 7
    ans = get_strategy("chain_of_agents", memory_tokens=cap, chunk_tokens=45).answer(
        doc(4), Query("What is it?", answer_prefix="The answer is"), llm
    )
    x = ans.stats.extra
    assert x["prompt_kind"] == "base" and x["worker_mode"] == "append"
    assert all(p.rstrip() == p for p in seen)
    assert seen[0].startswith("Notes:\n\nP0.")
    assert seen[0].endswith("\n\nQuestion: What is it?\nThe answer is")
    workers = [e.output for e in ans.trace if e.stage == "worker"]
    # each worker's answer extends the notes; the cap keeps the head
    assert workers[0]["memory"] == "fact1 and more words"
    assert seen[1].startswith("Notes: fact1 and more words\n\nP1.")
    assert workers[1]["memory"] == "fact1 and more words fact2 and more"
    assert workers[1]["truncated"] and workers[1]["memory_tokens"] <= cap
    assert all(w["memory"] == workers[1]["memory"] for w in workers[2:])
    assert x["memory_truncations"] == len(workers) - 1
    assert (
        seen[-1] == "Notes: " + workers[-1]["memory"] + "\n\nQuestion: What is it?\nThe answer is"
    )
    assert ans.text == "4711"


def test_multiple_choice_and_summary_families_have_prompts():
    for family in ("multiple_choice", "summary", "retrieval", "code", "math", "dialogue"):
        llm = chat_llm([], default="Answer: B")
        ans = get_strategy("chain_of_agents", memory_tokens=40).answer(
            doc(2), Query("Pick one", task=family, options=("x", "y")), llm
        )
        assert ans.stats.llm_calls == ans.stats.extra["chunks"] + 1
        assert ans.text == "B"
