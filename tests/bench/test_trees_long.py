"""bench/trees.py at length: the ``pydoc`` subset (Python's language reference cut to
``--doc-tokens``, extractive span questions), its ``--out`` folder, the comparison with RAPTOR and the ledger. Scripted
LLM and the hashing embedder (no model); one umap warm-up for the module."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

pytest.importorskip("umap")
pytest.importorskip("sklearn")

from bench_loader import load_bench
from chunkwise.data.families import span_questions
from chunkwise.strategies import clustering
from strategies.trees_helpers import EMB, kinds_seen, scripted

STRATEGIES = ("retrieval", "raptor", "dtcrs")


@pytest.fixture(scope="module", autouse=True)
def warm_umap():
    return clustering.warm_up()


@pytest.fixture(scope="module")
def bench():
    return load_bench("trees")


def flat(text: str) -> str:
    return " ".join(text.split())


def read_on(m: re.Match[str]) -> str:
    """A reader that finds the quoted phrase in what it was shown and says the next four
    words (line wraps and squashed whitespace alike)."""
    phrase = r"\s+".join(map(re.escape, m.group(1).split()))
    hit = re.search(phrase + r"\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", m.string)
    return " " + " ".join(hit.groups()) if hit else " unknown"


def reader():
    llm = scripted()
    llm.rules.append((r'right after "([^"]+)" in the document\?', read_on))
    llm.__post_init__()
    return llm


def argv(out: Path, tokens: int = 3000, questions: int = 2) -> list[str]:
    return [
        "--model",
        "scripted:test",
        "--subsets",
        "pydoc",
        "--doc-tokens",
        str(tokens),
        "--docs",
        "1",
        "--questions",
        str(questions),
        "--strategies",
        ",".join(STRATEGIES),
        "--embedder",
        EMB,
        "--out",
        str(out),
    ]


def ledger_lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "rows.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("tokens", [3000, 60000])
def test_long_documents_hold_the_asked_tokens_and_unique_span_questions(bench, tokens):
    count = scripted().count_tokens
    exs = bench.long_examples(2, 4, tokens, count, seed=0)
    assert len(exs) == 8
    docs = {e["doc_id"]: e["context"] for e in exs}
    assert len(docs) == 2 and len(set(docs.values())) == 2  # two seeds, two documents
    for ctx in docs.values():
        assert count(ctx) >= tokens
        assert count(ctx[: ctx.rfind("\n\n")]) < tokens  # cut at the first break that suffices
        assert ctx.startswith("## ")
    for e in exs:
        ctx, (ev,) = e["context"], e["doc"].evidence
        assert e["doc_tokens"] == count(ctx) >= tokens
        phrase = re.fullmatch(r'Which four words come right after "(.+)" in the document\?',
                              e["input"]).group(1)  # fmt: skip
        assert flat(ctx).count(phrase) == 1 and flat(ctx).count(e["answer"]) == 1
        assert len(e["answer"].split()) == 4
        assert flat(ctx[ev.start : ev.end]) == f"{phrase} {e['answer']}"
        assert e["doc"].query().max_answer_tokens == 16
    assert len({e["input"] for e in exs}) == len(exs)
    again = bench.long_examples(2, 4, tokens, count, seed=0)
    assert [(e["context"], e["input"]) for e in again] == [(e["context"], e["input"]) for e in exs]


def test_span_questions_unique_answers_and_line_wraps():
    sentence = "Every name here is bound to one object in the current block, as always."
    repeat = "See one object in the text."
    ctx = f"{sentence}\n\n{repeat}"
    ((q, ev),) = span_questions(ctx, random.Random(0), 3)
    assert ev.answer == "one object in the" and q.endswith(
        'after "Every name here is bound to" in the document?'
    )
    assert span_questions(ctx, random.Random(0), 3, unique_answer=True) == []
    wrapped = sentence.replace("bound to", "bound\nto")
    assert span_questions(wrapped, random.Random(0), 3) == []
    ((_, ev),) = span_questions(wrapped, random.Random(0), 3, wrapped=True)
    assert wrapped[ev.start : ev.end] == "Every name here is bound\nto one object in the"


def test_span_metric_scores_the_four_words(bench):
    (ex,) = bench.long_examples(1, 1, 3000, scripted().count_tokens)
    _, score = bench.ask("pydoc", ex, None)
    assert score(f"The words are {ex['answer'].upper()}.") == 1.0
    assert score(" ".join(ex["answer"].split()[:3])) == 0.0


def test_bench_main_on_pydoc_writes_results_and_table(bench, tmp_path, capsys):
    out = tmp_path / "run"
    res = bench.main(argv(out), llm=reader())
    err = capsys.readouterr().err
    saved = json.loads((out / "results.json").read_text())
    assert saved["subsets"] == res["subsets"]
    per = res["subsets"]["pydoc"]
    assert set(per) == {*STRATEGIES, "vs_raptor"}
    (tokens,) = res["sizes"]["subsets"]["pydoc"]["document_tokens"]
    assert tokens >= 3000
    for name in STRATEGIES:
        rows = per[name]["rows"]
        assert len(rows) == 2 and per[name]["doc_tokens"] == tokens
        assert all(r["doc_tokens"] == tokens and r["score"] in (0.0, 1.0) for r in rows)
    assert max(r["score"] for name in STRATEGIES for r in per[name]["rows"]) == 1.0
    raptor = per["raptor"]["rows"]
    assert raptor[0]["tree_summary_nodes"] >= 1 and raptor[0]["tree_layers"] >= 1
    assert raptor[0]["summary_nodes"] == raptor[0]["tree_summary_nodes"]
    assert raptor[1]["summary_nodes"] == 0  # the second question reuses the tree
    assert per["raptor"]["tree"]["summary_nodes"] == raptor[0]["tree_summary_nodes"]
    assert all(len(r["subquestions"]) == 3 for r in per["dtcrs"]["rows"])
    assert per["dtcrs"]["subquestions"] == 3 and "tree" in per["dtcrs"]
    g = per["vs_raptor"]["dtcrs"]["per_question"]
    assert set(g) == {"summary_call_reduction", "build_speedup"}  # measured, not judged
    lo, hi = per["raptor"]["score_ci95"]
    assert lo <= per["raptor"]["score"] <= hi
    table = (out / "table.md").read_text()
    assert "### pydoc" in table and "| raptor |" in table and "DTCRS against RAPTOR" in table
    assert "| pydoc | dtcrs | per_question |" in table and "goal" not in table
    assert "[pydoc raptor 1/2]" in err and "running" in err
    assert len(ledger_lines(out)) == 6


def test_ledger_skips_finished_rows_and_reruns_a_cut_line(bench, tmp_path, capsys):
    out = tmp_path / "run"
    first = bench.main(argv(out), llm=reader())
    lines = (out / "rows.jsonl").read_text().splitlines(keepends=True)
    assert len(lines) == 6

    llm = reader()  # a rerun: every row is finished
    again = bench.main(argv(out), llm=llm)
    assert llm.calls == []
    assert again["subsets"] == first["subsets"]

    # a crash while writing the last row (DTCRS, second question) cut its line
    (out / "rows.jsonl").write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    llm = reader()
    bench.main(argv(out), llm=llm)
    seen = kinds_seen(llm)
    assert seen["answer"] == 1 and seen["summarize"] == 0  # that one row only
    assert seen["toc"] == 1  # DTCRS wrote the table of contents again ...
    rows = ledger_lines(out)
    assert len(rows) == 6 and rows[-1]["key"] == json.loads(lines[-1])["key"]
    assert rows[-1]["cold_after_resume"] is True  # ... and its row says so
    assert "done in an earlier run" in capsys.readouterr().err


def test_a_lost_raptor_row_reuses_the_tree_kept_in_out(bench, tmp_path):
    out = tmp_path / "run"
    bench.main(argv(out), llm=reader())
    lines = (out / "rows.jsonl").read_text().splitlines(keepends=True)
    built = json.loads(lines[2])
    assert built["strategy"] == "raptor" and built["summary_nodes"] >= 1
    (out / "rows.jsonl").write_text("".join(lines[:2] + lines[3:]))
    llm = reader()
    res = bench.main(argv(out), llm=llm)
    assert kinds_seen(llm)["summarize"] == 0  # the tree came from out/trees
    row = res["subsets"]["pydoc"]["raptor"]["rows"][0]
    assert row["tree_from_earlier_run"] is True and row["summary_nodes"] == 0
    assert (
        res["subsets"]["pydoc"]["raptor"]["per_question"]["summary_calls"]
        == (built["tree_summary_nodes"])
    )


def test_out_must_be_a_folder(bench, tmp_path):
    f = tmp_path / "results.json"
    f.write_text("{}")
    with pytest.raises(SystemExit, match="is a file"):
        bench.main(argv(f), llm=reader())
