"""The mapreduce scoring path through the runner reproduces LLM×MapReduce's published numbers.

Every released MiniCPM3-4B example becomes a benchmark example (its gold answer, a one-chunk
document); a scripted chat model answers the map call with a finding and the reduce call with
that example's released raw reduce text. ``chunkwise eval --strategy mapreduce --extract
mapreduce`` then scores as the reference pipeline does (its ``process_answer``, then
InfiniteBench's official scorer), to 0.01 of the table in ../shared/data/README.md (the summary task, whose ROUGE takes ~20 s, is
covered by tests/eval/test_metrics.py). Skipped without the shared data.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence

import pytest
from tests.conftest import SHARED

from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm import Completion, Request
from chunkwise.llm.scripted import ScriptedLLM

RELEASED = SHARED / "data" / "mapreduce_preds" / "MiniCPM3-4B"

#: InfiniteBench's official scorer on the reference's processed outputs (README table)
OFFICIAL = {
    "passkey": 98.81,
    "number_string": 99.32,
    "kv_retrieval": 93.80,
    "longbook_qa_eng": 28.39,
    "longbook_choice_eng": 66.38,
    "longbook_qa_chn": 23.66,
    "longdialogue_qa_eng": 12.50,
    "code_debug": 25.13,
    "math_find": 83.43,
}
INPUTS = {
    "passkey": "What is the pass key?",
    "number_string": "What is the sequence of digits?",
    "kv_retrieval": '\nKey: "k-1"\nThe value associated with the specified key is: ',
    "longbook_qa_eng": "Where does the story end?",
    "longbook_qa_chn": "故事在哪里结束？",
    "longbook_choice_eng": "Which is right?",
    "longdialogue_qa_eng": "",
    "code_debug": "",
    "math_find": "The largest number of the list is: ",
}
_DOC = re.compile(r"DOC-(\d+)-END")


def _options(gold) -> list[str]:
    if isinstance(gold, list) and len(gold) == 2 and gold[1] in "ABCD":
        opts = ["option one", "option two", "option three", "option four"]
        opts["ABCD".index(gold[1])] = gold[0]
        return opts
    return []


def _replaying_model(raw: dict[int, str]) -> ScriptedLLM:
    """Map calls (their prompt holds the chunk and its DOC tag) get a finding that names the
    document; the reduce call (which only sees findings) gets that document's released reduce
    text. Every reply is a function of its prompt, as a greedy model's is (the eval keeps and
    replays calls by prompt)."""
    found_in = re.compile(r"Answer: fact (\d+)\.")

    def reply(m: re.Match[str]) -> str:
        found = _DOC.search(m.string)
        if found:
            doc = found.group(1)
            return (f"Extracted Information: fact {doc}.\nRationale: it is there.\n"
                    f"Answer: fact {doc}.\nConfidence Score: 5")  # fmt: skip
        return raw[int(found_in.search(m.string).group(1))]

    llm = _Replay(rules=[(r".", reply)], window=32768)
    llm.chat = True
    return llm


class _Replay(ScriptedLLM):
    """Replays whole texts: no output budget, no stop strings (the released reduce outputs
    were made under the reference's own settings)."""

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        free = [
            Request(r.prompt, r.params.with_(max_new_tokens=1 << 30, stop=())) for r in requests
        ]
        return super()._generate(free)


def _run(tmp_path, task: str, extract: str = "mapreduce"):
    if not (RELEASED / f"preds_{task}.jsonl").is_file():
        pytest.skip(f"released outputs not present: {RELEASED}")
    lines = [json.loads(x) for x in (RELEASED / f"preds_{task}.jsonl").open(encoding="utf-8")]
    data = tmp_path / "data"
    data.mkdir()
    with (data / f"{task}.jsonl").open("w", encoding="utf-8") as f:
        for r in lines:
            rec = {
                "id": r["id"],
                "context": f"DOC-{r['id']}-END The grass is green.",
                "input": INPUTS[task],
                "answer": r["ground_truth"],
                "options": _options(r["ground_truth"]),
            }
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    cfg = EvalConfig(
        model="scripted:replay",
        strategy="mapreduce",
        tasks=[task],
        data=str(data),
        save_trace=False,
        # the replies are the reference's, not what our prompts produce: its own processing
        extract=extract,
        output=str(tmp_path / "run"),
    )
    llm = _replaying_model({r["id"]: r["prediction"] for r in lines})
    return run_eval(cfg, llm=llm, progress=False), lines


@pytest.mark.parametrize("task", list(OFFICIAL))
def test_runner_scores_mapreduce_as_the_reference(tmp_path, task):
    res, lines = _run(tmp_path, task)
    block = res["results"][task]
    assert block["extract"] == "mapreduce"  # asked for by name: these are reference outputs
    assert block["n"] == len(lines) and block["errors"] == 0
    assert block["score"] == pytest.approx(OFFICIAL[task], abs=0.01)
    lo, hi = block["score_ci95"]
    assert lo <= block["score"] <= hi and block["score_stderr"] >= 0
    # the raw reduce text is what the prediction line keeps for scoring
    first = json.loads((tmp_path / "run" / "predictions" / f"{task}.jsonl").open().readline())
    assert first["raw_output"] == lines[0]["prediction"]


# --------------------------------------------------------------------------------------------
# our own prompts: the default scores what they produce (issue #47, defect 0)

_PART = re.compile(r"===== Part of the document =====\n(.*?)\n===== End of part", re.S)
_KEY = re.compile(r"pass key is (\d+)")


def _our_chat_model() -> ScriptedLLM:
    """Follows our chat prompts: a map call finds the key in its part (else NO INFORMATION);
    the reduce call answers as the issue's model did, with a rationale naming the part."""

    def reply(m: re.Match[str]) -> str:
        part = _PART.search(m.string)
        if part is None:  # the reduce call: the findings carry the key
            return f"Rationale: Part 3 states it directly.\nAnswer: {_KEY.search(m.string)[1]}"
        found = _KEY.search(part.group(1))
        if found is None:
            return "Extracted Information: none.\nRationale: not here.\nAnswer: [NO INFORMATION]"
        return (
            f"Extracted Information: The pass key is {found[1]}.\nRationale: stated.\n"
            f"Answer: {found[1]}\nConfidence Score: 5"
        )

    llm = ScriptedLLM(rules=[(r".", reply)], window=32768)
    llm.chat = True
    return llm


def _passkey_folder(tmp_path, keys: list[str]):
    data = tmp_path / "data"
    data.mkdir()
    filler = "The grass is green. The sky is blue. The sun is yellow. " * 30
    with (data / "passkey.jsonl").open("w", encoding="utf-8") as f:
        for i, key in enumerate(keys):
            context = f"{filler}The pass key is {key}. Remember it. {key} is the pass key. {filler}"
            rec = {"id": i, "context": context, "input": "What is the pass key?", "answer": key}
            rec["options"] = []
            f.write(json.dumps(rec) + "\n")
    return data


def test_auto_scores_our_mapreduce_prompts_on_the_parsed_answer(tmp_path):
    from chunkwise.benchmarks.infinitebench.metrics import score_one

    keys = ["62070", "31415", "27182"]
    args = {"prompts": "chat", "grounding": True, "snap_quotes": True, "anchor_quotes": True}
    cfg = EvalConfig(
        model="scripted:ours",
        strategy="mapreduce",
        strategy_args={**args, "chunk_tokens": 120},
        tasks=["passkey"],
        data=str(_passkey_folder(tmp_path, keys)),
        context_window=4096,
        output=str(tmp_path / "run"),
    )
    res = run_eval(cfg, llm=_our_chat_model(), progress=False)
    block = res["results"]["passkey"]
    preds = [json.loads(x) for x in (tmp_path / "run" / "predictions" / "passkey.jsonl").open()]
    assert [p["prediction"] for p in preds] == keys
    assert all(p["raw_output"].startswith("Rationale: Part 3") for p in preds)
    assert preds[0]["stats"]["chunks"] > 3 and preds[0]["stats"]["prompt_version"] == "mr-chat-3"
    # the score is the predictions' own score: extract auto under mapreduce is `parsed`
    assert block["extract"] == "parsed"
    want = 100 * sum(score_one("passkey", p["prediction"], p["ground_truth"]) for p in preds) / 3
    assert block["score"] == want == 100.0
    # the reference's processing keeps our raw reduce text, whose first integer is the part
    # (a rerun of the finished run with another --extract: it rescores, no model call)
    ref = run_eval(dataclasses.replace(cfg, extract="mapreduce"), llm=ScriptedLLM(), progress=False)
    assert ref["results"]["passkey"]["score"] == 0.0
