"""InfiniteBench data: answer types restored from the Hub cast, the three sources, questions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from chunkwise.benchmarks.infinitebench import loader as ib
from chunkwise.benchmarks.infinitebench import questions
from chunkwise.benchmarks.infinitebench.metrics import TASKS, score_one
from chunkwise.errors import BadInput
from chunkwise.llm.scripted import ScriptedLLM

MC_OPTIONS = ["the miller", "the baker", "the smith", "the tailor"]
DEBUG_OPTIONS = ["parse_args", "load_table", "merge_rows", "write_out"]

# what the Hub's `features=` cast makes of each task's answer -> the native answer
HUB_CAST = [
    ("passkey", ["12345"], [], "12345"),
    ("number_string", ["0012345678"], [], "0012345678"),
    ("kv_retrieval", ["a1b2-c3"], [], "a1b2-c3"),
    ("code_run", ["-7"], [], -7),
    ("math_find", ["12"], [], 12),
    ("math_find", ["12.5"], [], 12.5),
    ("math_find", ["40.0"], [], 40.0),
    ("math_calc", ["1", "4", "8", "3"], [], [1, 4, 8, 3]),
    ("longbook_qa_eng", ["a red boat", "boat"], [], ["a red boat", "boat"]),
    ("longbook_qa_chn", ["红船"], [], ["红船"]),
    ("longbook_sum_eng", ["A summary."], [], ["A summary."]),
    ("longdialogue_qa_eng", ["ACE", "ACE ROTHSTEIN"], [], ["ACE", "ACE ROTHSTEIN"]),
    ("longbook_choice_eng", ["the smith"], MC_OPTIONS, ["the smith", "C"]),
    ("code_debug", ["load_table"], DEBUG_OPTIONS, ["load_table", "B"]),
]


@pytest.mark.parametrize(("task", "cast", "options", "native"), HUB_CAST)
def test_restore_answer_brings_back_native_types(task, cast, options, native):
    got = ib.restore_answer(task, cast, options)
    assert got == native
    assert type(got) is type(native)
    if isinstance(native, list):
        assert [type(v) for v in got] == [type(v) for v in native]


def test_native_answers_pass_through_unchanged():
    assert ib.restore_answer("code_run", 5) == 5
    assert ib.restore_answer("math_find", 2.5) == 2.5
    assert ib.restore_answer("math_calc", [1, 2]) == [1, 2]
    assert ib.restore_answer("longbook_choice_eng", ["the smith", "C"], MC_OPTIONS) == [
        "the smith",
        "C",
    ]


def test_restoring_is_what_makes_the_official_scorers_work():
    # the official rules compare against native values: the cast forms score 0 or crash
    kv = ib.restore_record(
        "kv_retrieval", {"id": 3, "context": "{}", "input": "", "answer": ["a1b2-c3"]}
    )
    assert score_one("kv_retrieval", 'The value is "a1b2-c3".', kv["answer"]) == 1.0
    run = ib.restore_record("code_run", {"id": 4, "context": "", "answer": ["-7"], "options": None})
    assert score_one("code_run", "The return value is: -7", run["answer"]) == 1.0
    find = ib.restore_record("math_find", {"id": 5, "context": "", "answer": ["12.5"]})
    assert score_one("math_find", "12.5", find["answer"]) == 1.0 and find["options"] == []


def test_restore_record_names_the_bad_record():
    with pytest.raises(BadInput, match=r"f\.jsonl:3: id 9: .*not an integer"):
        ib.restore_record("code_run", {"id": 9, "context": "", "answer": ["seven"]}, "f.jsonl:3")
    with pytest.raises(BadInput, match="no 'context'"):
        ib.restore_record("passkey", {"id": 1, "answer": ["1"]})
    with pytest.raises(BadInput, match="valid tasks: passkey, number_string"):
        ib.restore_answer("passkey_v2", ["1"])


def test_features_are_explicit():
    feats = ib.features()
    assert feats["id"].dtype == "int64"
    assert feats["context"].dtype == "string"
    for name in ("answer", "options"):  # lists of strings, so kv_retrieval's missing options load
        assert feats[name].feature.dtype == "string"


def test_hub_source_fails_clearly_offline(tmp_path):
    """The real Hub path (datasets.load_dataset at the pinned revision), with the Hub off."""
    code = "from chunkwise.benchmarks.infinitebench.loader import load_task\nload_task('passkey', 'hub', limit=1)\n"
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(tmp_path),
    }
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode != 0
    last = res.stderr.strip().splitlines()[-1]
    assert "BadInput" in last
    assert f"{ib.HUB_REPO} at revision {ib.HUB_REVISION}" in last
    assert "--data FOLDER" in last and "synthetic:LENGTH" in last


def _write(path, records):
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )


def test_local_folder_of_official_files(tmp_path):
    _write(
        tmp_path / "kv_retrieval.jsonl",
        [  # the official kv file has no options field
            {
                "id": i,
                "context": "JSON data",
                "input": f'\nKey: "k{i}"\nThe value associated with the specified key is: ',
                "answer": f"v{i}",
            }
            for i in range(4)
        ],
    )
    _write(
        tmp_path / "longbook_choice_eng.jsonl",
        [
            {
                "id": 7,
                "context": "book",
                "input": "Who forged the sword?",
                "answer": ["the smith"],
                "options": MC_OPTIONS,
            },
        ],
    )
    td = ib.load_task("kv_retrieval", str(tmp_path), limit=3)
    assert [e["id"] for e in td.examples] == [0, 1, 2] and td.total == 4
    assert td.examples[1]["answer"] == "v1" and td.examples[1]["options"] == []
    assert td.source == {
        "source": "local",
        "path": str((tmp_path / "kv_retrieval.jsonl").resolve()),
    }
    mc = ib.load_task("longbook_choice_eng", str(tmp_path)).examples[0]
    assert mc["answer"] == ["the smith", "C"]

    with pytest.raises(
        BadInput, match=r"passkey\.jsonl not found.*has: kv_retrieval, longbook_choice_eng"
    ):
        ib.load_task("passkey", str(tmp_path))
    (tmp_path / "code_run.jsonl").write_text('{"id": 0, "context": "", "answer": [1]}\n{oops\n')
    with pytest.raises(BadInput, match=r"code_run\.jsonl:2"):
        ib.load_task("code_run", str(tmp_path))
    _write(tmp_path / "passkey.jsonl", [{"id": 1, "context": "", "answer": "1"}] * 2)
    with pytest.raises(
        BadInput, match=r"passkey\.jsonl:2: duplicate id 1 \(first at .*passkey\.jsonl:1\)"
    ):
        ib.load_task("passkey", str(tmp_path))


def test_synthetic_source_uses_the_model_tokenizer():
    counter = ScriptedLLM()
    td = ib.load_task(
        "passkey", "synthetic:600", limit=3, seed=1, count_tokens=counter.count_tokens
    )
    assert len(td.examples) == 3
    assert td.source == {"source": "synthetic", "length": 600, "seed": 1, "n": 3}
    for ex in td.examples:
        assert isinstance(ex["answer"], str) and ex["answer"] in ex["context"]
        assert abs(counter.count_tokens(ex["context"]) - 600) <= 0.02 * 600
    again = ib.load_task(
        "passkey", "synthetic:600", limit=3, seed=1, count_tokens=counter.count_tokens
    )
    assert again.examples == td.examples
    run = ib.load_task("code_run", "synthetic:800", limit=2, count_tokens=counter.count_tokens)
    assert all(isinstance(ex["answer"], int) for ex in run.examples)
    with pytest.raises(BadInput, match="synthetic data exists for passkey, number_string"):
        ib.load_task("longbook_qa_eng", "synthetic:600", count_tokens=counter.count_tokens)


def test_parse_data_spec():
    assert ib.parse_data_spec("synthetic:4k").length == 4096
    assert ib.parse_data_spec("synthetic:128K").length == 128 * 1024
    assert ib.parse_data_spec("synthetic:1500").length == 1500
    assert ib.parse_data_spec("hub").kind == "hub"
    for bad in ("synthetic:", "synthetic:4 tokens", "/no/such/folder", ""):
        with pytest.raises(BadInput):
            ib.parse_data_spec(bad)


# --------------------------------------------------------------------------------------------
# questions

EXAMPLES = {
    "passkey": {"input": "What is the pass key?"},
    "number_string": {"input": "What is the sequence of digits?"},
    "kv_retrieval": {"input": '\nKey: "9f1c-77"\nThe value associated with the specified key is: '},
    "longbook_sum_eng": {"input": ""},
    "longbook_qa_eng": {"input": "Where does the story end?"},
    "longbook_qa_chn": {"input": "故事在哪里结束？"},
    "longbook_choice_eng": {"input": "Who forged the sword?", "options": MC_OPTIONS},
    "longdialogue_qa_eng": {"input": ""},
    "code_debug": {"input": "", "options": DEBUG_OPTIONS},
    "code_run": {
        "input": "Please give me the exact number of the return value of func_12(-3). "
        "Your response should end with the sentence 'The return value is:'."
    },
    "math_calc": {"input": ""},
    "math_find": {
        "input": "You should answer with only one number, no other words. The second "
        "largest number of the list is: "
    },
}
OFFICIAL_BUDGETS = {
    "passkey": 6,
    "number_string": 12,
    "kv_retrieval": 50,
    "longbook_sum_eng": 1200,
    "longbook_qa_eng": 40,
    "longbook_qa_chn": 40,
    "longbook_choice_eng": 40,
    "longdialogue_qa_eng": 40,
    "code_debug": 5,
    "code_run": 5,
    "math_calc": 30000,
    "math_find": 3,
}


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("kind", ["chat", "base"])
def test_every_task_builds_a_query(task, kind):
    ex = {"id": 0, "context": "...", "options": [], **EXAMPLES[task]}
    q = questions.build_query(task, ex, kind)
    assert q.question.strip()
    # our chat wording asks code_run for a short working-out before the number
    chat_own = {("code_run", "chat"): 128}
    assert q.max_answer_tokens == chat_own.get((task, kind), OFFICIAL_BUDGETS[task])
    # the whole single-call prompt: every placeholder filled, the document slot between
    before, after = q.frame
    assert "{" not in before + after and (before + after).strip()
    if kind == "base":
        assert after.rstrip().endswith(q.answer_prefix)
    assert q.options == tuple(ex["options"])
    assert (q.answer_prefix != "") == (kind == "base")
    assert "{" not in q.question and "{" not in q.answer_prefix  # every placeholder filled


def test_base_queries_end_like_the_official_open_model_templates():
    def base(task):
        return questions.build_query(
            task, {"id": 0, "context": "", "options": [], **EXAMPLES[task]}, "base"
        )

    assert base("passkey").answer_prefix == "The pass key is"
    assert base("passkey").question == "What is the pass key?"
    assert base("passkey").task == "retrieval"
    kv = base("kv_retrieval")
    assert kv.answer_prefix == "The value associated with the specified key is"
    assert '"9f1c-77"' in kv.question
    mc = base("longbook_choice_eng")
    assert mc.answer_prefix == "The letter of the correct answer is"
    assert mc.task == "multiple_choice"
    assert "C. the smith" in mc.render()
    run = base("code_run")
    assert run.answer_prefix == "The return value of func_12(-3) is"
    assert "func_12(-3)" in run.question
    find = base("math_find")
    assert find.answer_prefix == "The second largest number of the list is"
    assert find.task == "math"
    chat_kv = questions.build_query(
        "kv_retrieval", {"id": 0, "context": "", **EXAMPLES["kv_retrieval"]}, "chat"
    )
    assert '"9f1c-77"' in chat_kv.question and chat_kv.answer_prefix == ""


def test_answer_budget_is_capped_by_the_window():
    assert questions.answer_budget("math_calc") == 30000
    assert questions.answer_budget("math_calc", 32768) == 8192
    assert questions.answer_budget("longbook_sum_eng", 4096) == 1024
    assert questions.answer_budget("passkey", 4096) == 6
    q = questions.build_query("math_calc", {"id": 0, "context": "1 + 2"}, "chat", window=8192)
    assert q.max_answer_tokens == 2048


def test_code_run_without_a_call_is_an_error_naming_the_id():
    with pytest.raises(BadInput, match="code_run id 5"):
        questions.build_query("code_run", {"id": 5, "context": "", "input": "What now?"}, "chat")


def _prompt(task, kind):
    ex = {"id": 0, "context": "DOC", "options": [], **EXAMPLES[task]}
    q = questions.build_query(task, ex, kind)
    return q.frame[0] + "DOC" + q.frame[1]


def test_our_prompts_say_each_instruction_once_in_the_tasks_language():
    """The review of ib-2: the faults the first wording had stay fixed."""
    for task in TASKS:
        for kind in ("chat", "base"):
            text = _prompt(task, kind)
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            assert len(lines) == len(set(lines)), (task, kind, text)  # nothing said twice
    calc = _prompt("math_calc", "chat")
    assert "every operation" in calc and "number only" not in calc
    zh = _prompt("longbook_qa_chn", "chat")
    assert not re.search(r"[A-Za-z]{3,}", zh.replace("DOC", ""))  # no English in the Chinese
    kv = _prompt("kv_retrieval", "chat")
    assert 'Key: "9f1c-77"' in kv and "hidden" not in kv and "JSON" in kv
    for task in ("longbook_choice_eng", "code_debug"):
        assert "A. " in _prompt(task, "chat") and "D. " in _prompt(task, "chat")
    assert questions.answer_budget("code_run", kind="chat") > 5  # room for the working-out it asks


def test_mapreduce_hints_follow_the_task_not_the_family():
    ex = {"id": 0, "context": "", "options": [], **EXAMPLES["code_run"]}
    assert "integer" in questions.build_query("code_run", ex, "chat").hint
    ex = {"id": 0, "context": "", "options": [], **EXAMPLES["math_calc"]}
    assert "every operation" in questions.build_query("math_calc", ex, "chat").hint


def test_mapreduce_prompts_carry_the_task_hint():
    from chunkwise.strategies.mapreduce import MapReduce

    mr = MapReduce()
    ex = {"id": 0, "context": "", "options": [], **EXAMPLES["code_run"]}
    q = questions.build_query("code_run", ex, "chat")
    text = mr.map_prompt(mr.prompt_set("chat", "code"), "def func_12(x): return x", q)
    assert q.hint in text and "option letter" not in text
