"""The foundation and MapReduce CLI verbs, end to end through `chunkwise.cli.main`."""

from __future__ import annotations

import json

import pytest

from chunkwise.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_chunk_prints_spans_that_round_trip(tmp_path, capsys):
    doc = "First paragraph here. It has two sentences.\n\nSecond one! Short.\n" * 20
    f = tmp_path / "d.txt"
    f.write_text(doc, encoding="utf-8")
    code, out, _ = run(capsys, "chunk", str(f), "--model", "scripted:echo", "--max-tokens", "25")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) > 3
    for r in rows:
        assert set(r) == {"index", "start_char", "end_char", "tokens", "text"}
        assert doc[r["start_char"] : r["end_char"]] == r["text"]
        assert r["tokens"] <= 25


@pytest.mark.parametrize(
    "setup,args,needle",
    [
        (None, ["/no/such/file"], "no such file"),
        ("dir", [], "is a directory"),
        ("empty", [], "empty"),
        ("binary", [], "not UTF-8"),
    ],
)
def test_chunk_bad_input_one_line_exit_2(tmp_path, capsys, setup, args, needle):
    target = tmp_path / "x.txt"
    if setup == "dir":
        target = tmp_path
    elif setup == "empty":
        target.write_text("")
    elif setup == "binary":
        target.write_bytes(b"\xff\xfe\x00abc")
    path = args[0] if args else str(target)
    code, out, err = run(capsys, "chunk", path, "--model", "scripted:echo", "--max-tokens", "5")
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


def test_chunk_zero_budget_and_megabyte_line(tmp_path, capsys):
    f = tmp_path / "big.txt"
    f.write_text("x" * 1_000_000)
    code, _, err = run(capsys, "chunk", str(f), "--model", "scripted:echo", "--max-tokens", "0")
    assert code == 2 and "--max-tokens" in err
    code, out, _ = run(capsys, "chunk", str(f), "--model", "scripted:echo", "--max-tokens", "100")
    assert code == 0
    assert sum(len(json.loads(x)["text"]) for x in out.splitlines()) == 1_000_000


def test_generate_and_unknown_spec(capsys):
    code, out, _ = run(
        capsys, "generate", "--model", "scripted:passkey", "--prompt", "the pass key is 31415"
    )
    assert code == 0 and out.strip() == "31415"
    code, _, err = run(capsys, "generate", "--model", "gpt:4", "--prompt", "hi")
    assert code == 2 and "Valid forms" in err


def test_answer_prefix_reaches_the_base_prompts(tmp_path, capsys, monkeypatch):
    from chunkwise.llm.scripted import ScriptedLLM

    seen: list[ScriptedLLM] = []

    def load(spec: str) -> ScriptedLLM:
        seen.append(ScriptedLLM(default="27182"))
        return seen[-1]

    monkeypatch.setattr("chunkwise.llm.load_llm", load)
    doc = tmp_path / "doc.txt"
    doc.write_text("Filler sentence. " * 40 + "The pass key is 27182.\n")
    args = ["answer", "--strategy", "standard", "--doc", str(doc), "--question",
            "What is the pass key?"]  # fmt: skip
    assert run(capsys, *args, "--answer-prefix", "The pass key is")[0] == 0
    assert run(capsys, *args)[0] == 0
    with_prefix, without = (llm.calls[0].prompt for llm in seen)
    assert with_prefix.endswith("What is the pass key?\nThe pass key is")
    assert without.endswith("What is the pass key?\nAnswer:")


def test_answer_json_and_trace(tmp_path, capsys):
    doc = tmp_path / "doc.txt"
    doc.write_text(
        ("Filler sentence number one. " * 30 + "\n\n") * 10
        + "The pass key is 27182. Remember it.\n\n"
        + ("More filler here. " * 30 + "\n\n") * 10
    )
    trace = tmp_path / "trace.json"
    code, out, _ = run(
        capsys,
        "answer",
        "--model",
        "scripted:passkey",
        "--strategy",
        "mapreduce",
        "--doc",
        str(doc),
        "--question",
        "What is the pass key?",
        "--task",
        "retrieval",
        "--context-window",
        "600",
        "--json",
        "--trace",
        str(trace),
    )
    assert code == 0
    res = json.loads(out)
    assert set(res) == {"answer", "stats", "options", "option_sources"}
    assert res["options"] == {"window": 600} and res["option_sources"] == {"window": "user"}
    assert {"llm_calls", "prompt_tokens", "completion_tokens", "seconds"} <= set(res["stats"])
    assert "chunks" in res["stats"] and "collapse_rounds" in res["stats"]  # the whole stats
    assert res["stats"]["llm_calls"] > 2
    t = json.loads(trace.read_text())
    assert [e["stage"] for e in t["trace"]][-1] == "reduce"
    code, _, err = run(
        capsys,
        "answer",
        "--model",
        "scripted:passkey",
        "--doc",
        str(doc),
        "--question",
        "q?",
        "--task",
        "poetry",
    )
    assert code == 2 and "unknown task family" in err
    code, _, err = run(
        capsys,
        "answer",
        "--model",
        "scripted:passkey",
        "--doc",
        str(doc),
        "--question",
        "q?",
        "--strategy",
        "magic",
    )
    assert code == 2 and "unknown strategy" in err
