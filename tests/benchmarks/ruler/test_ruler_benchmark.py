"""The ``ruler`` benchmark: RULER's scoring rule, data specs, questions, whole runs (a scripted
reader at 4K and 128K through standard and mapreduce decoding, generate-data folders through
the CLI) and one short real-model run."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from chunkwise.benchmarks import get_benchmark
from chunkwise.benchmarks.ruler import loader, metrics, questions
from chunkwise.errors import BadInput
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm.scripted import ScriptedLLM

# --------------------------------------------------------------------------------------------
# scoring: RULER's string_match_all / string_match_part, checked by hand


def test_string_match_all_is_the_fraction_present():
    refs = ["1234567", "7654321", "1111111"]
    assert metrics.string_match_all("The numbers are 1234567 and 7654321.", refs) == pytest.approx(
        2 / 3
    )
    assert metrics.string_match_all("1111111, 7654321, 1234567", refs) == 1.0
    assert metrics.string_match_all("none of them", refs) == 0.0
    assert metrics.string_match_all("", refs) == 0.0
    assert metrics.string_match_all(None, refs) == 0.0
    # case-insensitive, substring, control characters made newlines as RULER does
    assert metrics.string_match_all("  VAR ABCDE and\x00xyzqw ", ["abcde", "XYZQW"]) == 1.0
    assert metrics.string_match_all("tender-phrase", ["Tender-Phrase"]) == 1.0


def test_string_match_part_is_any_present():
    assert metrics.string_match_part("only 7654321", ["1234567", "7654321"]) == 1.0
    assert metrics.string_match_part("neither", ["1234567", "7654321"]) == 0.0
    assert metrics.postprocess("  a\tb\n ") == "a\nb"


def test_scorers_and_official():
    assert metrics.score("cwe", "alpha beta", ["alpha", "gamma"], "official") == 0.5
    assert metrics.score("cwe", "alpha beta", ["alpha", "gamma"], "all") == 0.5
    assert metrics.score("cwe", "alpha beta", ["alpha", "gamma"], "part") == 1.0
    with pytest.raises(BadInput, match="unknown scorer"):
        metrics.score("cwe", "x", ["x"], "lenient")
    with pytest.raises(BadInput, match="no expected answers"):
        metrics.score("cwe", "x", [], "all")


# --------------------------------------------------------------------------------------------
# registry, data specs, questions


def test_registered_with_every_task():
    bench = get_benchmark("ruler")
    assert set(bench.tasks) == {
        *(f"niah_single_{i}" for i in (1, 2, 3)),
        *(f"niah_multikey_{i}" for i in (1, 2, 3)),
        "niah_multivalue",
        "niah_multiquery",
        "vt",
        "cwe",
        "fwe",
    }
    assert bench.scorers == ("official", "all", "part")
    assert bench.prompt_version().startswith("ruler-")


def test_task_config_names_what_defines_a_task():
    cfg = questions.task_config("niah_multikey_2", "base")
    assert cfg["definition"]["haystack"] == "needle" and cfg["question"]["one"]
    assert cfg["answer_prefix"]["one"].startswith("The special magic")
    assert json.loads(json.dumps(cfg)) == cfg
    assert questions.task_config("niah_multikey_2", "chat")["answer_prefix"] == {}


def test_data_specs(tmp_path):
    assert loader.parse_data_spec("synthetic:4096").length == 4096
    assert loader.parse_data_spec("synthetic:128k").length == 131072
    assert loader.parse_data_spec("synthetic:1M").length == 1024 * 1024
    assert loader.parse_data_spec(str(tmp_path)).kind == "local"
    for bad in ("hub", "synthetic:", "synthetic:abc", "synthetic:0", str(tmp_path / "nope")):
        with pytest.raises(BadInput):
            loader.parse_data_spec(bad)
    with pytest.raises(BadInput, match="no niah_single_1.jsonl"):
        loader.load_task("niah_single_1", str(tmp_path))


def test_questions_for_chat_and_base():
    from chunkwise.data import ruler

    def one(task):
        return ruler.generate(task, length_tokens=600, n=1, seed=0, count_tokens=len_words)[0]

    single, multi, vt, cwe = (one(t) for t in ("niah_single_3", "niah_multiquery", "vt", "cwe"))
    q = questions.build_query("niah_single_3", single, "chat")
    key = single["meta"]["query"]
    assert q.task == "retrieval" and key in q.question and "UUID for" in q.question
    assert q.answer_prefix == "" and q.max_answer_tokens == 128
    b = questions.build_query("niah_single_3", single, "base")
    assert b.answer_prefix == f"The special magic UUID for {key} given in the text is"
    m = questions.build_query("niah_multiquery", multi, "base")
    assert m.answer_prefix.endswith(" are") and multi["meta"]["query"].count(", ") == 3
    v = questions.build_query("vt", vt, "base", window=80)
    assert vt["meta"]["query"] in v.question and "5 variables" in v.answer_prefix
    assert v.max_answer_tokens == 20  # capped at a quarter of the window
    c = questions.build_query("cwe", cwe, "chat")
    assert c.task == "qa" and "10 words" in c.question and c.max_answer_tokens == 120
    # records from other writers (no meta) are asked their input as it stands
    plain = {"id": 0, "context": "x", "input": "What is it?", "answer": ["x"], "options": []}
    assert questions.build_query("cwe", plain, "base").question == "What is it?"
    with pytest.raises(BadInput):
        questions.build_query("cwe", {**plain, "input": ""}, "chat")


def len_words(text: str) -> int:
    return len(text.split())


# --------------------------------------------------------------------------------------------
# whole runs with a scripted reader (control flow; the real model runs below)

NEEDLE = re.compile(r"special magic \w+ for (\S+) is: (\S+?)\.(?:\s|$)")
ASK = re.compile(r"special magic \w+ for (.+?)(?:\?| given in the text| that the text gives)")


def read_needles(m: re.Match[str]) -> str:
    """Answer like a perfect needle reader: the values of the asked keys, or (collapse and
    reduce prompts) what the findings say."""
    text = m.group(0)
    asks = ASK.findall(text)
    keys = re.split(r",\s*(?:and\s+)?|\s+and\s+", asks[-1]) if asks else []
    values = [v for k in keys for kk, v in NEEDLE.findall(text) if kk == k]
    if not values:
        values = [
            v
            for v in re.findall(r"of the text says: (.+?)(?: \(confidence|\n|$)", text)
            if "NO INFORMATION" not in v
        ]
    return " ".join(values) if values else "[NO INFORMATION]"


def reader() -> ScriptedLLM:
    return ScriptedLLM(rules=[(r"(?s)^.*$", read_needles)], window=8192)


NIAH_TASKS = ["niah_single_1", "niah_multikey_2", "niah_multivalue", "niah_multiquery"]


def test_run_at_4k_standard_scores_a_perfect_reader_100(tmp_path):
    cfg = EvalConfig(
        model="scripted:reader",
        benchmark="ruler",
        tasks=NIAH_TASKS,
        data="synthetic:4096",
        limit=2,
        output=str(tmp_path / "run"),
    )
    res = run_eval(cfg, llm=reader(), progress=False)
    for task in NIAH_TASKS:
        assert res["results"][task]["score"] == 100.0 and res["results"][task]["n"] == 2
    line = json.loads(
        (tmp_path / "run/predictions/niah_multivalue.jsonl").read_text().split("\n")[0]
    )
    assert len(line["ground_truth"]) == 4 and all(
        v in line["prediction"] for v in line["ground_truth"]
    )
    # and a reader that finds nothing scores 0 (the scorer can fail)
    silent = run_eval(
        dataclasses.replace(cfg, output=str(tmp_path / "silent")),
        llm=ScriptedLLM(default="I do not know."),
        progress=False,
    )
    assert all(silent["results"][t]["score"] == 0.0 for t in NIAH_TASKS)


def test_run_at_128k_mapreduce(tmp_path):
    """128K-token contexts read in ~1000-token chunks by mapreduce: every chunk is mapped and
    the needle survives to the reduced answer."""
    cfg = EvalConfig(
        model="scripted:reader",
        strategy="mapreduce",
        benchmark="ruler",
        tasks=["niah_single_2"],
        data="synthetic:128k",
        limit=1,
        output=str(tmp_path / "run"),
    )
    res = run_eval(cfg, llm=reader(), progress=False)
    assert res["results"]["niah_single_2"]["score"] == 100.0
    assert res["config"]["data"] == "synthetic:128k"
    rec = json.loads((tmp_path / "run/predictions/niah_single_2.jsonl").read_text())
    assert rec["stats"]["chunks"] > 100 and rec["stats"]["prompt_tokens"] > 131072


def test_generate_data_folder_then_eval_through_the_cli(tmp_path, monkeypatch, capsys):
    from chunkwise import cli

    folder = tmp_path / "ruler"
    out = folder / "ruler_vt.jsonl"
    argv = ["generate-data", "--task", "ruler_vt", "--length", "1500", "--n", "3"]
    assert cli.main([*argv, "--out", str(out), "--model", "scripted:echo"]) == 0
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == 3 and all(len(r["answer"]) == 5 for r in recs)
    capsys.readouterr()
    td = loader.load_task("vt", str(folder))
    assert [ex["id"] for ex in td.examples] == [0, 1, 2]
    assert td.source["source"] == "local" and td.examples[0]["meta"]["query"]
    run = tmp_path / "run"
    base = ["eval", "--model", "scripted:silent", "--benchmark", "ruler", "--data", str(folder)]
    code = cli.main([*base, "--tasks", "all", "--output", str(run), "--scorer", "part"])
    assert code == 0
    res = json.loads((run / "results.json").read_text())
    assert list(res["results"]) == ["vt"]  # all = every task the folder has a file for
    assert res["results"]["vt"]["n"] == 3 and res["results"]["vt"]["score"] == 0.0
    # a folder without the task's file is one line naming the folder, exit 2
    capsys.readouterr()
    code = cli.main([*base, "--tasks", "cwe", "--output", str(tmp_path / "run2")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and str(folder) in err and "cwe.jsonl" in err and "Traceback" not in err


@pytest.mark.slow
def test_real_model_ruler_run(tmp_path, embedded_llm):
    """`chunkwise eval --benchmark ruler --tasks niah_single_1 --data synthetic:4096 --limit 1
    --model hf:default`, with the session's loaded model."""
    cfg = EvalConfig(
        model="hf:default",
        benchmark="ruler",
        tasks=["niah_single_1"],
        data="synthetic:4096",
        limit=1,
        output=str(tmp_path / "run"),
    )
    res = run_eval(cfg, llm=embedded_llm, progress=False)
    r = res["results"]["niah_single_1"]
    assert r["n"] == 1 and 0.0 <= r["score"] <= 100.0
    rec = json.loads((tmp_path / "run/predictions/niah_single_1.jsonl").read_text())
    assert rec["prediction"].strip()  # the base model continued the answer prefix
    assert "special magic number for" in rec["question"]
