"""``--prompt-source`` with InfiniteBench's own prompt.py (the shared copy; skipped without it):
every task's stored prompt equals the official template filled as the official scripts fill it.

The expected prompts are built here on their own, following ``eval_utils.create_prompt`` with
plain ``str.format`` on the templates (the test executes the shared file to get them; the
project only ever parses it), so the test does not share code with what it checks.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import SHARED

from chunkwise.benchmarks.infinitebench import templates as ib_templates
from chunkwise.benchmarks.infinitebench.metrics import TASKS
from chunkwise.errors import BadInput
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm import scripted

PROMPT_PY = SHARED / "data" / "infinitebench_src" / "prompt.py"
OPTIONS = ["func_a", "func_b", "func_c", "func_d"]
MC = ["the miller", "the baker", "the smith", "the weaver"]

#: one made-up example per task (inputs shaped like the official files')
EXAMPLES = {
    "passkey": {"input": "What is the pass key?", "answer": "71432"},
    "number_string": {"input": "What is the sequence of digits?", "answer": "3000077442"},
    "kv_retrieval": {
        "input": '\nKey: "9f1c-77"\nThe value associated with the specified key is: ',
        "answer": "ab-12",
    },
    "longbook_sum_eng": {"input": "", "answer": ["A short tale of a mill."]},
    "longbook_qa_eng": {"input": "Where does the story end?", "answer": ["at the mill"]},
    "longbook_qa_chn": {"input": "故事在哪里结束？", "answer": ["磨坊"]},
    "longbook_choice_eng": {
        "input": "Who forged the sword?",
        "options": MC,
        "answer": ["the smith", "C"],
    },
    "longdialogue_qa_eng": {"input": "", "answer": ["ACE"]},
    "code_debug": {"input": "", "options": OPTIONS, "answer": ["func_b", "B"]},
    "code_run": {
        "input": "Please give me the exact number of the return value of func_12(-3). "
        "Your response should end with the sentence 'The return value is:'.",
        "answer": 7,
    },
    "math_calc": {"input": "", "answer": [3, 1]},
    "math_find": {
        "input": "You should answer with only one number, no other words. The second "
        "largest number of the list is: ",
        "answer": 8,
    },
}


def _context(task: str) -> str:
    return f"Document for {task}: the grass is green {{not a field}}. " * 3


@pytest.fixture(scope="module")
def official():
    """The shared prompt.py's dicts (executed here, by the test only)."""
    if not PROMPT_PY.is_file():
        pytest.skip(f"InfiniteBench's prompt.py not present: {PROMPT_PY}")
    namespace: dict = {}
    exec(compile(PROMPT_PY.read_text(encoding="utf-8"), str(PROMPT_PY), "exec"), namespace)
    return namespace


def expected_prompt(templates: dict, family: str, task: str, eg: dict) -> str:
    """eval_utils.create_prompt, written out again."""
    if family == "gpt4" and task == "math_calc":
        return eg["context"]
    template = templates[task]
    if task == "code_run":
        call = re.findall(r"func_[0-9]+\(\-?[0-9]+\)", eg["input"])[0]
        return template.format(func=call.split("(")[0], func_call=call, context=eg["context"])
    if task == "code_debug":
        o = eg["options"]
        return template.format(
            context=eg["context"], OPTION_A=o[0], OPTION_B=o[1], OPTION_C=o[2], OPTION_D=o[3]
        )
    if task == "longdialogue_qa_eng":
        return template.format(context=eg["context"])
    if task == "longbook_choice_eng":
        o = eg["options"]
        return template.format(
            question=eg["input"],
            context=eg["context"],
            OPTION_A=o[0],
            OPTION_B=o[1],
            OPTION_C=o[2],
            OPTION_D=o[3],
        )
    if task in ("longbook_qa_eng", "longbook_qa_chn"):
        return template.format(question=eg["input"], context=eg["context"])
    if task in ("longbook_sum_eng", "math_calc"):
        return template.format(context=eg["context"])
    if task == "math_find":
        target = re.findall(r"The .+ of", eg["input"])[0].lower()[:-3]
        prefix = f"What is {target} in the following list?"
        return template.format(prefix=prefix, context=eg["context"], input=eg["input"])
    return template.format(context=eg["context"], input=eg["input"])


def write_data(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for task, ex in EXAMPLES.items():
        rec = {"id": 0, "context": _context(task), "options": [], **ex}
        (folder / f"{task}.jsonl").write_text(json.dumps(rec, ensure_ascii=False) + "\n")
    return folder


@pytest.mark.parametrize("family", ["gpt4", "yarn_mistral"])
def test_every_task_stores_the_official_prompt(tmp_path, official, family):
    data = write_data(tmp_path / "data")
    out = tmp_path / "run"
    cfg = EvalConfig(
        model="scripted:echo",
        tasks=["all"],
        data=str(data),
        prompt_source=str(PROMPT_PY),
        prompt_family=family,
        truncation="official",
        log_samples=True,
        output=str(out),
    )
    res = run_eval(cfg, progress=False)
    assert set(res["results"]) == set(TASKS)
    templates = official[f"{family}_templates"]
    for task in TASKS:
        rec = json.loads((out / "predictions" / f"{task}.jsonl").read_text())
        eg = {"id": 0, "context": _context(task), "options": [], **EXAMPLES[task]}
        assert rec["prompt"] == expected_prompt(templates, family, task, eg), task
        sample = json.loads((out / "samples" / f"{task}.jsonl").read_text())
        assert sample["prompt"] == rec["prompt"] and "score" in sample and "extracted" in sample
    t = res["templates"]
    assert t["kind"] == "official" and t["family"] == family
    assert (
        t["source"] == str(PROMPT_PY.resolve())
        and len(t["templates_sha256"]) == 64
        and len(t["file_sha256"]) == 64
    )
    assert res["configs"]["passkey"]["prompt"]["official_template"] == templates["passkey"]
    assert res["configs"]["passkey"]["truncation"] == "official"
    assert len(set(res["task_hashes"].values())) == len(TASKS)


def test_official_truncation_cuts_the_whole_prompt_in_the_middle(tmp_path, official):
    data = write_data(tmp_path / "data")
    out = tmp_path / "run"
    limit = 41
    cfg = EvalConfig(
        model=f"scripted:echo?ctx={limit}",
        tasks=["passkey"],
        data=str(data),
        prompt_source=str(PROMPT_PY),
        prompt_family="gpt4",
        truncation="official",
        log_samples=True,
        output=str(out),
    )
    run_eval(cfg, progress=False)
    rec = json.loads((out / "predictions" / "passkey.jsonl").read_text())
    eg = {"id": 0, "context": _context("passkey"), "options": [], **EXAMPLES["passkey"]}
    full = expected_prompt(official["gpt4_templates"], "gpt4", "passkey", eg)
    tok = scripted.SCRIPTS["echo"]()
    ids = tok.encode(full)
    assert len(ids) > limit
    assert rec["prompt"] == tok.decode(ids[: limit // 2] + ids[-limit // 2 :])
    assert rec["prompt"].startswith("There is an important info")  # the instruction survives
    assert rec["prompt"].endswith(eg["input"])  # and the question


def test_the_prompt_file_is_read_as_data_never_run(tmp_path):
    marker = tmp_path / "ran"
    src = tmp_path / "prompt.py"
    src.write_text(
        f"open({str(marker)!r}, 'w').write('x')\n"
        "raise SystemExit('executed')\n"
        "mine_templates = {'passkey': 'Find it.\\n\\n{context}\\n\\n{input}'}\n"
        "evil_templates = {'passkey': __import__('os').getcwd()}\n"
        "attr_templates = {'passkey': '{context.__class__}'}\n",
        encoding="utf-8",
    )
    families = ib_templates.read_families(src)
    assert set(families) == {"mine", "attr"}  # the non-literal dict is ignored, not evaluated
    assert not marker.exists()
    ts = ib_templates.load_templates(src, "mine")
    ex = {"id": 0, "context": "C", "input": "Q?"}
    assert ib_templates.fill(ts, "passkey", ex, "C") == "Find it.\n\nC\n\nQ?"
    with pytest.raises(BadInput, match="not a plain name"):
        ib_templates.fill(ib_templates.load_templates(src, "attr"), "passkey", ex, "C")
    with pytest.raises(BadInput, match="valid: attr, mine"):
        ib_templates.load_templates(src, "gpt5")


def test_cli_names_a_missing_prompt_file(tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "chunkwise.cli",
            "eval",
            "--model=scripted:echo",
            "--data=synthetic:400",
            f"--output={tmp_path / 'r'}",
            f"--prompt-source={tmp_path / 'nope.py'}",
            "--prompt-family=gpt4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert "nope.py: no such file" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()
