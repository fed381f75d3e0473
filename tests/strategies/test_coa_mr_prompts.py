"""Chain-of-Agents' ``mr`` prompt set: rewrite workers phrased as the MapReduce map call that
hf:default-mr was trained on (scripted doubles only)."""

from __future__ import annotations

import re

import pytest

from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query, get_strategy

PART = re.compile(r"===== Part of the document =====\n(.*?)\n===== End of part =====", re.S)
Q = Query("What is the vault code?")


def mr_llm(worker, manager=lambda text: "Rationale: r\nAnswer: none", spec="hf:default-mr"):
    """A chat double that says it is hf:default-mr: ``worker(part)`` answers map-style calls,
    ``manager(prompt)`` the reduce-style one."""

    def reply(m: re.Match) -> str:
        part = PART.search(m.string)
        return worker(part.group(1)) if part else manager(m.string)

    llm = ScriptedLLM(rules=[(r"^", reply)], window=4096)
    llm.chat = True
    llm.spec = spec
    return llm


def text_of(req) -> str:
    return req.prompt[0]["content"] if isinstance(req.prompt, list) else req.prompt


def test_auto_picks_the_mr_set_for_default_mr_only():
    s = get_strategy("chain_of_agents")
    assert s.kind(mr_llm(str)) == "mr"
    assert s.kind(mr_llm(str, spec="vllm:default-mr?max_model_len=4096")) == "mr"
    assert s.kind(mr_llm(str, spec="hf:default-coa")) == "mr"  # the head trained on this set
    assert s.kind(mr_llm(str, spec="hf:default?chat=on")) == "chat"
    assert s.kind(mr_llm(str, spec="")) == "chat"
    base = ScriptedLLM()
    assert s.kind(base) == "base"
    assert get_strategy("chain_of_agents", prompts="chat").kind(mr_llm(str)) == "chat"


def test_worker_with_no_memory_is_the_mapreduce_map_prompt_and_manager_its_reduce():
    """The adapter never saw a Chain-of-Agents prompt: its worker must be the map call it was
    trained on, byte for byte, and the manager with nothing found the reduce call."""
    llm = mr_llm(str)
    mr = get_strategy("mapreduce", prompts="chat")
    p = mr.prompt_set("chat", "qa")
    s = get_strategy("chain_of_agents", prompts="mr")
    t = s.templates("mr", "qa")
    assert s.worker_prompt(t, "", "Some chunk text.", Q) == mr.map_prompt(p, "Some chunk text.", Q)
    assert s.manager_prompt(t, "", Q) == mr.reduce_prompt(p, [], Q)
    # with a memory, the part is the memory, a blank line, then the chunk
    with_memory = s.worker_prompt(t, "Fact one.", "Some chunk text.", Q)
    assert PART.search(with_memory).group(1) == "Fact one.\n\nSome chunk text."
    assert "Extracted Information: Fact one." in s.manager_prompt(t, "Fact one.", Q)
    assert s.kind(llm) == "mr"


def test_memory_is_the_extracted_information_and_carries_forward():
    """Each worker restates its part (memory + chunk); generation stops at the rationale, the
    label is removed, and the manager reads the last memory as one finding."""
    seen_parts: list[str] = []

    def worker(part: str) -> str:
        seen_parts.append(part)
        facts = " ".join(re.findall(r"F\d+\.", part))
        return f"Extracted Information: {facts}\nRationale: made up\nAnswer: 1\nConfidence Score: 5"

    finals: list[str] = []

    def manager(text: str) -> str:
        finals.append(re.search(r"Extracted Information: (.*)", text).group(1))
        return "Rationale: joined\nAnswer: 4817\nConfidence Score: 5"

    llm = mr_llm(worker, manager)
    doc = "\n\n".join(f"F{i}. " + " ".join(f"w{i}x{j}" for j in range(30)) for i in range(4))
    s = get_strategy("chain_of_agents", memory_tokens=64, chunk_tokens=40)
    ans = s.answer(doc, Q, llm)
    workers = [e for e in ans.trace if e.stage == "worker"]
    assert len(workers) == 4
    assert [e.output["memory"] for e in workers] == [
        "F0.",
        "F0. F1.",
        "F0. F1. F2.",
        "F0. F1. F2. F3.",
    ]
    assert seen_parts[1].startswith("F0.\n\nF1.")  # the memory is read before the chunk
    assert finals == ["F0. F1. F2. F3."]
    assert ans.text == "4817"  # the answer field, without the confidence line
    assert ans.stats.extra["prompt_kind"] == "mr"
    assert ans.stats.extra["worker_mode"] == "rewrite"
    # workers stop where the rationale begins and may write the cap plus the label
    worker_calls = [r for r in llm.calls if PART.search(text_of(r))]
    assert all("\nRationale:" in r.params.stop for r in worker_calls)
    assert {r.params.max_new_tokens for r in worker_calls} == {64 + 8}


@pytest.mark.parametrize(
    "empty",
    [
        "Nothing in this part bears on the question.",
        # the adapter's kv_retrieval form: the key restated, then "not in this part"
        '"80cdf3f1-18ef-4602": not in this part.',
    ],
)
def test_nothing_found_keeps_the_previous_memory(empty):
    def worker(part: str) -> str:
        if part.startswith("F0. w0x0"):  # the first chunk, read with no memory
            return "Extracted Information: F0.\nRationale: r\nAnswer: 1"
        return f"Extracted Information: {empty}\nRationale: r"

    llm = mr_llm(worker)
    doc = "\n\n".join(f"F{i}. " + " ".join(f"w{i}x{j}" for j in range(30)) for i in range(3))
    s = get_strategy("chain_of_agents", memory_tokens=32, chunk_tokens=40)
    ans = s.answer(doc, Q, llm)
    workers = [e for e in ans.trace if e.stage == "worker"]
    assert [e.output["memory"] for e in workers] == ["F0.", "F0.", "F0."]
    assert [e.output["kept_previous"] for e in workers] == [False, True, True]
    assert ans.stats.extra["empty_updates"] == 2


def test_memory_over_the_cap_is_cut_and_the_budget_reserves_the_label():
    def worker(part: str) -> str:
        return "Extracted Information: " + " ".join(f"m{j}" for j in range(200))

    llm = mr_llm(worker)
    s = get_strategy("chain_of_agents", memory_tokens=20)
    t = s.templates("mr", "qa")
    parts = s.chunk_budget(llm, t, Q)
    with_q = llm.prompt_tokens(llm.as_prompt(s.worker_prompt(t, "", "", Q)))
    # window - instruction/question - memory read - (memory written + label) - 16 margin
    assert parts["chunk_budget"] == 4096 - with_q - 20 - (20 + 8) - 16
    ans = s.answer("one short chunk of text.", Q, llm)
    w = next(e for e in ans.trace if e.stage == "worker")
    assert w.output["memory_tokens"] <= 20 and w.output["truncated"]
    assert ans.stats.extra["memory_truncations"] == 1


@pytest.mark.parametrize("family", ["qa", "retrieval", "math", "multiple_choice", "summary"])
def test_every_family_renders(family):
    s = get_strategy("chain_of_agents", prompts="mr")
    t = s.templates("mr", family)
    q = Query("Q?", task=family, options=("a", "b") if family == "multiple_choice" else ())
    assert "{" not in s.worker_prompt(t, "m", "c", q)
    assert "{" not in s.manager_prompt(t, "m", q)
