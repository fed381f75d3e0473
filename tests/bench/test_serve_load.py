"""bench/serve_load.py: a short run on the scripted backend keeps its invariants, and its
checkers flag each kind of broken answer (so a harness that always said "ok" fails here)."""

from __future__ import annotations

import json

import pytest

from bench_loader import load_bench

sl = load_bench("serve_load")

pytestmark = pytest.mark.timeout(180)


def test_a_short_scripted_run_keeps_every_invariant(tmp_path, capsys):
    out = tmp_path / "load.json"
    argv = ["--model", "scripted:echo", "--clients", "6", "--seconds", "2", "--json", str(out)]
    rc = sl.main([*argv, "--hangup-share", "0.2", "--max-requests", "2000"])
    printed = capsys.readouterr().out.strip().splitlines()
    result = json.loads(out.read_text())
    assert json.loads(printed[-1]) == result  # the JSON is the last line
    assert printed[0].split("|")[1:4] == [" model ", " mode ", " sent "]
    assert rc == 0 and result["ok"], result
    (run,) = result["runs"]
    assert run["invariants"] == {
        "no_stuck_clients": True,
        "one_complete_answer_each": True,
        "unique_response_ids": True,
        "answers_match_requests": True,
        "server_alive_after": True,
        "server_stopped_cleanly": True,
    }
    assert run["errors"] == {} and run["broken"] == {}
    assert run["sent"] == run["answered"] + run["hung_up"] <= 2000
    for mode in ("plain", "stream"):
        s = run["by_mode"][mode]
        assert s["answered"] > 0 and s["hung_up"] > 0, (mode, s)
    lat = run["latency_ms"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["max"]
    assert run["requests_per_s"] > 0
    rss = run["server_rss_mib"]
    assert 0 < rss["start"] <= rss["peak"] and rss["end"] <= rss["peak"]


def _chunk(rid: str, i: int, text: str, finish: str | None) -> str:
    choice = {"index": i, "text": text, "finish_reason": finish}
    return json.dumps({"id": rid, "choices": [choice]})


def test_the_stream_checker_flags_each_kind_of_broken_stream():
    good = [_chunk("a", 0, "hi ", None), _chunk("a", 0, "there", "stop"), "[DONE]"]
    assert sl.check_stream(good, 1) == (None, "a", {0: "hi there"})
    broken = [
        ("done_count", good[:-1]),  # no [DONE]
        ("done_count", [*good, "[DONE]"]),  # two
        ("data_after_done", [*good[:-1], "[DONE]", _chunk("a", 0, "!", None)]),
        ("mixed_ids", [_chunk("a", 0, "x", "stop"), _chunk("b", 1, "y", "stop"), "[DONE]"]),
        ("unfinished_choice", [_chunk("a", 0, "x", None), "[DONE]"]),
        ("error_in_stream", [json.dumps({"error": {"message": "boom"}}), "[DONE]"]),
    ]
    for why, events in broken:
        assert sl.check_stream(events, 2 if why == "mixed_ids" else 1)[0] == why, why
    assert sl.check_stream(good, 2)[0] == "unfinished_choice"  # choice 1 never came


def test_the_plain_checker_flags_missing_and_unfinished_choices():
    done = {"index": 0, "text": "x", "finish_reason": "stop"}
    assert sl.check_plain({"choices": [done]}, 1) is None
    assert sl.check_plain({"choices": [done]}, 2) == "wrong_choices"
    assert sl.check_plain({"choices": [done, done]}, 2) == "wrong_choices"  # index 0 twice
    assert sl.check_plain({"choices": [{**done, "finish_reason": None}]}, 1) == "unfinished_choice"
    assert sl.check_plain({"error": {}}, 1) == "wrong_choices"
