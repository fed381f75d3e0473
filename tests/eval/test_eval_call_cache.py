"""A killed `chunkwise eval` resumes inside an example: the calls it finished are replayed
(chunkwise.llm.call_cache), the rerun's predictions are the uninterrupted run's, and the calls
folder is gone once the run is complete. Once with the scripted double (control flow, every
count exact), once on the embedded model (hf:default, loaded once per session)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkwise.errors import LLMRequestError
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm import call_cache, scripted


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


class Counting:
    """Forwards to ``llm``; keeps the call key of every request that reaches it, and after
    ``alive`` generate calls raises as a backend that went away does (None: never). ``close``
    leaves a shared model open."""

    def __init__(self, llm, alive: int | None = None, identity: str = "scripted:passkey"):
        self._llm, self.alive, self.identity, self.keys = llm, alive, identity, []

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def generate(self, requests):
        if self.alive == 0:
            raise LLMRequestError("the backend went away")
        if self.alive is not None:
            self.alive -= 1
        self.keys += [call_cache.call_key(self.identity, r) for r in requests]
        return self._llm.generate(requests)

    def close(self):
        pass


def _cfg(out: Path, **kw) -> EvalConfig:
    base = dict(
        model="scripted:passkey",
        strategy="mapreduce",
        strategy_args={"chunk_tokens": "60"},
        tasks=["passkey"],
        data="synthetic:400",
        limit=3,
        output=str(out),
    )
    return EvalConfig(**{**base, **kw})


def _answers(out: Path) -> list[tuple]:
    """Each prediction and its trace, less the calls' wall-clock latencies."""
    return [(p["id"], p["prediction"], [{**e, "latency_s": None} for e in p["trace"]])
            for p in lines(out / "predictions" / "passkey.jsonl")]  # fmt: skip


def test_a_killed_run_resumes_without_asking_the_model_again(tmp_path, monkeypatch):
    monkeypatch.setattr(call_cache, "PIECE_CALLS", 3)
    whole = Counting(scripted.SCRIPTS["passkey"]())
    whole_res = run_eval(_cfg(tmp_path / "whole"), llm=whole, progress=False)

    # the filler repeats, so many chunks are the same call: the model saw each one once
    assert len(whole.keys) == len(set(whole.keys)) < whole_res["strategy_stats"]["all"]["llm_calls"]

    out = tmp_path / "killed"
    dying = Counting(scripted.SCRIPTS["passkey"](), alive=4)
    with pytest.raises(LLMRequestError):
        run_eval(_cfg(out), llm=dying, progress=False)
    kept = [r["key"] for r in lines(out / "calls" / "rank0.jsonl")]
    assert kept == dying.keys[: len(kept)] and len(kept) >= 4  # the four pieces that returned
    answered = {p["id"] for p in lines(out / "predictions" / "passkey.jsonl")}

    again = Counting(scripted.SCRIPTS["passkey"]())
    res = run_eval(_cfg(out), llm=again, progress=False)
    assert again.keys == [k for k in whole.keys if k not in kept]  # only the calls not kept
    calls = res["timing"]["calls"]
    assert calls["computed"] == len(again.keys)
    this_session = [p["stats"]["llm_calls"] for p in lines(out / "predictions" / "passkey.jsonl")
                    if p["id"] not in answered]  # fmt: skip
    assert calls["computed"] + calls["replayed"] == sum(this_session)
    assert _answers(out) == _answers(tmp_path / "whole")
    assert not (out / "calls").exists()  # complete: nothing left to resume
    assert not (tmp_path / "whole" / "calls").exists()


def test_a_run_that_fails_before_any_call_leaves_no_calls_folder(tmp_path):
    out = tmp_path / "r"
    with pytest.raises(LLMRequestError):
        run_eval(_cfg(out), llm=Counting(scripted.SCRIPTS["passkey"](), alive=0), progress=False)
    assert not (out / "calls").exists()


def test_the_progress_bar_counts_the_calls_as_they_return(tmp_path, monkeypatch, capfd):
    """Examples at 128K finish hours apart: the bar shows the calls computed and replayed so
    far, updated after every piece."""
    import re

    monkeypatch.setattr(call_cache, "PIECE_CALLS", 3)
    dying = Counting(scripted.SCRIPTS["passkey"](), alive=4)
    with pytest.raises(LLMRequestError):
        run_eval(_cfg(tmp_path), llm=dying, progress=True)
    first = capfd.readouterr().err
    assert "calls=3" in first and f"calls={len(dying.keys)}" in first  # piece by piece

    again = Counting(scripted.SCRIPTS["passkey"]())
    res = run_eval(_cfg(tmp_path), llm=again, progress=True)
    calls = res["timing"]["calls"]
    shown = re.findall(r"calls=([\d,]+)(?: \+ ([\d,]+) replayed)?", capfd.readouterr().err)
    last = tuple(int(x.replace(",", "") or 0) for x in shown[-1])
    assert last == (calls["computed"], calls["replayed"]) and calls["replayed"] > 0


@pytest.mark.slow
def test_the_embedded_model_resumes_a_mapreduce_answer_mid_document(
    embedded_llm, tmp_path, monkeypatch
):
    """hf:default answers one 1,500-token passkey document in map calls of 300 tokens; the
    backend dies after the first piece of two distinct map calls. The rerun sends the model
    only the calls not kept, and its prediction and trace are the uninterrupted run's."""
    monkeypatch.setattr(call_cache, "PIECE_CALLS", 2)
    cfg = dict(model="hf:default", strategy_args={"chunk_tokens": "300"}, limit=1,
               data="synthetic:1500")  # fmt: skip
    whole = Counting(embedded_llm, identity="hf:default")
    run_eval(_cfg(tmp_path / "whole", **cfg), llm=whole, progress=False)

    out = tmp_path / "killed"
    dying = Counting(embedded_llm, alive=1, identity="hf:default")
    with pytest.raises(LLMRequestError):
        run_eval(_cfg(out, **cfg), llm=dying, progress=False)
    kept = [r["key"] for r in lines(out / "calls" / "rank0.jsonl")]
    assert kept == dying.keys[:2]

    again = Counting(embedded_llm, identity="hf:default")
    run_eval(_cfg(out, **cfg), llm=again, progress=False)
    assert again.keys == [k for k in whole.keys if k not in kept] and again.keys
    assert _answers(out) == _answers(tmp_path / "whole")
    assert not (out / "calls").exists()
