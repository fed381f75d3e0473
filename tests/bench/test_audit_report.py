"""bench/audit_report.py over a real `--audit --lengths` sweep (scripted passkey reader, a
window shorter than the longer documents): funnels per length that add up to n, the truncation
the audit names growing with length, the effective lengths, the chart, and a refused funnel."""

from __future__ import annotations

import json

import pytest

from chunkwise.eval.config import EvalConfig
from chunkwise.eval.lengths import run_lengths


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("audit-sweep") / "std"
    cfg = EvalConfig(
        model="scripted:passkey",
        benchmark="infinitebench",
        tasks=["passkey"],
        data="synthetic:600",
        lengths=["512,2K"],
        limit=8,
        context_window=700,  # 2K documents are cut: the needle is often outside the prompt
        audit=True,
        effective_threshold=50,
        output=str(out),
    )
    run_lengths(cfg, progress=False)
    return out


def test_report_holds_each_lengths_funnel_score_and_compute(sweep, tmp_path, capsys):
    from bench_loader import load_bench

    bench = load_bench("audit_report")
    out = bench.main(["--arm", f"std={sweep}", "--json", str(tmp_path / "r.json"),
                      "--png", str(tmp_path / "r.png")])  # fmt: skip
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == out
    assert json.loads((tmp_path / "r.json").read_text()) == out
    assert (tmp_path / "r.png").stat().st_size > 1000
    (arm,) = out["arms"]
    short, long = arm["points"]["passkey"]
    assert (short["length"], long["length"]) == (512, 2048)
    for p in (short, long):
        assert sum(p["funnel"].values()) == p["n"] == 8
        run = json.loads((sweep / f"len-{p['length']}" / "results.json").read_text())
        assert p["funnel"] == run["audit"]["passkey"]["funnel"]
        assert p["score"] == run["results"]["passkey"]["score"]
        assert p["prefill_tokens_per_example"] > 0
    # the window holds every 512-token document and cuts the 2K ones
    assert short["funnel"].get("evidence_truncated", 0) == 0
    assert long["funnel"]["evidence_truncated"] > 0
    assert long["funnel"]["evidence_truncated"] + long["funnel"].get("correct", 0) <= 8
    text = bench.table(out)
    assert "| evidence_truncated |" in text and "| outcome | 512 | 2K |" in text
    assert (
        f"| std | passkey | {bench._effective(arm['effective_length']['passkey']['ruler'])}" in text
    )


def test_a_funnel_that_does_not_add_up_is_refused(sweep, tmp_path):
    from bench_loader import load_bench

    bench = load_bench("audit_report")
    broken = tmp_path / "broken"
    (broken / "len-512").mkdir(parents=True)
    lengths = json.loads((sweep / "lengths.json").read_text())
    lengths["lengths"], lengths["runs"] = [512], {"512": str(broken / "len-512")}
    (broken / "lengths.json").write_text(json.dumps(lengths))
    results = json.loads((sweep / "len-512" / "results.json").read_text())
    results["audit"]["passkey"]["funnel"]["correct"] += 1
    (broken / "len-512" / "results.json").write_text(json.dumps(results))
    with pytest.raises(SystemExit, match="does not add up"):
        bench.main(["--arm", f"x={broken}"])
    with pytest.raises(SystemExit, match="no lengths.json and no results.json"):
        bench.main(["--arm", f"y={tmp_path / 'nothing'}"])


def test_one_eval_run_is_an_arm_of_one_length_beside_a_sweep(sweep, tmp_path):
    """A plain `chunkwise eval --audit` folder (no sweep) is read at its data's length, with
    no effective length; beside a sweep, the sweep's effective-length rows are unchanged."""
    from bench_loader import load_bench

    bench = load_bench("audit_report")
    single = sweep / "len-2048"
    out = bench.main(["--arm", f"one={single}", "--arm", f"std={sweep}"])
    one, std = out["arms"]
    run = json.loads((single / "results.json").read_text())
    assert one["lengths"] == [run["configs"]["passkey"]["data"]["length"]]
    (point,) = one["points"]["passkey"]
    assert point["funnel"] == run["audit"]["passkey"]["funnel"]
    assert point["score"] == run["results"]["passkey"]["score"]
    assert one["effective_length"] == {} and one["thresholds"] == {}
    assert std["effective_length"]["passkey"] and std["thresholds"]
    text = bench.table(out)
    assert "**one** (standard, scripted:passkey), passkey:" in text
    assert "| one | passkey |" not in text and "| std | passkey |" in text
    assert "effective length (user > 50.0)" in text
    run["configs"]["passkey"]["data"].pop("length")
    broken = tmp_path / "nolength"
    broken.mkdir()
    (broken / "results.json").write_text(json.dumps(run))
    with pytest.raises(SystemExit, match="data has no length"):
        bench.main(["--arm", f"x={broken}"])


@pytest.mark.parametrize(
    "text, says",
    [("", "not a readable lengths.json"), ('{"lengths": [1', "not a readable"),
     ("[1, 2]", "expected a JSON object"), ('{"lengths": [512]}', "no runs")],
)  # fmt: skip
def test_an_empty_or_malformed_lengths_json_is_one_line_naming_it(tmp_path, text, says):
    from bench_loader import load_bench

    (tmp_path / "lengths.json").write_text(text)
    with pytest.raises(SystemExit, match=says) as e:
        load_bench("audit_report").main(["--arm", f"x={tmp_path}"])
    assert str(tmp_path / "lengths.json") in str(e.value) and "\n" not in str(e.value)


def test_one_label_over_several_runs_is_one_arm_and_the_score_grid_shows_gaps(sweep, tmp_path):
    """`--arm a=<512 run> --arm a=<2K run>` is the sweep's arm again (points in length order);
    the score grid has a column per length any arm ran, `-` where one did not; a length given
    twice, or folders of different models under one label, are refused in one line."""
    from bench_loader import load_bench

    bench = load_bench("audit_report")
    joined = bench.main(["--arm", f"a={sweep / 'len-2048'}", "--arm", f"a={sweep / 'len-512'}",
                         "--arm", f"b={sweep / 'len-2048'}"])  # fmt: skip
    whole = bench.main(["--arm", f"a={sweep}"])
    a, b = joined["arms"]
    assert [a["label"], b["label"]] == ["a", "b"] and b["lengths"] == [2048]
    assert a["points"] == whole["arms"][0]["points"] and a["lengths"] == [512, 2048]
    grid = bench.scores_table(joined).splitlines()
    assert grid[0] == "| task | arm | 512 | 2K |"
    short, long = (bench._score(p) for p in a["points"]["passkey"])
    assert grid[2] == f"| passkey | a | {short} | {long} |"
    assert grid[3] == f"| passkey | b | - | {long} |"
    with pytest.raises(SystemExit, match="passkey at 2K is given twice"):
        bench.main(["--arm", f"a={sweep / 'len-2048'}", "--arm", f"a={sweep}"])
    run = json.loads((sweep / "len-512" / "results.json").read_text())
    run["config"]["model"] = "scripted:other"
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.json").write_text(json.dumps(run))
    with pytest.raises(SystemExit, match="disagree on model"):
        bench.main(["--arm", f"a={sweep / 'len-2048'}", "--arm", f"a={other}"])
