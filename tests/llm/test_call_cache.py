"""The call cache (chunkwise.llm.call_cache): finished calls kept on disk and replayed.

The backend here is the scripted double (it counts the calls that reach it); the cache's work
on a real model inside a killed and resumed evaluation is in
tests/eval/test_eval_call_cache.py.
"""

from __future__ import annotations

import json
import math

import pytest

from chunkwise.errors import LLMRequestError
from chunkwise.llm import call_cache
from chunkwise.llm.base import Completion, GenerationParams, Request
from chunkwise.llm.call_cache import CachedLLM, CallCache, call_key, kept_pace
from chunkwise.llm.scripted import ScriptedLLM

GREEDY = GenerationParams(max_new_tokens=8)


def _model() -> ScriptedLLM:
    return ScriptedLLM(rules=[(r"question (\d+)", r"answer \1")], default="none")


def _asks(n: int, params: GenerationParams = GREEDY) -> list[Request]:
    return [Request(f"question {i}", params) for i in range(n)]


class _DiesAfter:
    """Forwards to ``inner`` for ``calls`` generate calls, then raises as a lost backend does."""

    def __init__(self, inner, calls: int):
        self.inner, self.left = inner, calls
        self.sizes: list[int] = []  # requests per generate call, the failed one included

    def generate(self, requests):
        self.sizes.append(len(requests))
        if self.left == 0:
            raise LLMRequestError("the backend went away")
        self.left -= 1
        return self.inner.generate(requests)

    def close(self) -> None:
        pass


def test_a_second_run_replays_every_finished_call_without_asking_the_model(tmp_path):
    first = CachedLLM(_model(), CallCache(tmp_path, "m"))
    want = first.generate(_asks(5))
    first.close()

    model = _model()
    again = CachedLLM(model, CallCache(tmp_path, "m"))
    got = again.generate(_asks(5))
    assert model.calls == []  # nothing reached the model
    assert [c.text for c in got] == [f"answer {i}" for i in range(5)]
    assert got == want  # every field: token counts, finish and stop reasons, latency
    assert (again.replayed, again.computed) == (5, 0)


def test_misses_go_in_pieces_and_a_piece_is_kept_as_soon_as_it_returns(tmp_path):
    """A batch of 10 in pieces of 4: the backend dies on the third piece; the first two
    pieces' eight calls are on disk, and the rerun sends only the last two."""
    cache = CallCache(tmp_path, "m")
    model = _model()
    backend = _DiesAfter(model, 2)
    dying = CachedLLM(backend, cache, piece=4)
    with pytest.raises(LLMRequestError):
        dying.generate(_asks(10))
    assert backend.sizes == [4, 4, 2]
    cache.close()

    model = _model()
    resumed = CachedLLM(model, CallCache(tmp_path, "m"), piece=4)
    got = resumed.generate(_asks(10))
    assert [r.prompt for r in model.calls] == ["question 8", "question 9"]
    assert [c.text for c in got] == [f"answer {i}" for i in range(10)]  # in request order
    assert (resumed.replayed, resumed.computed) == (8, 2)


def test_an_unseeded_sampled_call_is_never_replayed_and_a_seeded_one_is(tmp_path):
    sampled = GenerationParams(max_new_tokens=8, temperature=0.7)
    seeded = GenerationParams(max_new_tokens=8, temperature=0.7, seed=3)
    CachedLLM(_model(), CallCache(tmp_path, "m")).generate(_asks(2, sampled) + _asks(2, seeded))

    model = _model()
    CachedLLM(model, CallCache(tmp_path, "m")).generate(_asks(2, sampled) + _asks(2, seeded))
    assert [r.params for r in model.calls] == [sampled, sampled]


def test_another_model_or_other_decoding_parameters_are_other_calls(tmp_path):
    CachedLLM(_model(), CallCache(tmp_path, "hf:default-mr = default-mr-aaaa")).generate(_asks(1))

    retrained = _model()
    CachedLLM(retrained, CallCache(tmp_path, "hf:default-mr = default-mr-bbbb")).generate(_asks(1))
    assert len(retrained.calls) == 1
    longer = _model()
    params = GREEDY.with_(max_new_tokens=9)
    CachedLLM(longer, CallCache(tmp_path, "hf:default-mr = default-mr-aaaa")).generate(
        _asks(1, params)
    )
    assert len(longer.calls) == 1
    keys = {call_key("a", Request("q", GREEDY)), call_key("b", Request("q", GREEDY))}
    keys |= {call_key("a", Request([{"role": "user", "content": "q"}], GREEDY))}
    assert len(keys) == 3  # a chat prompt is not the same call as the plain text


def test_a_failed_completion_is_not_kept(tmp_path):
    class Failing(ScriptedLLM):
        def _generate(self, requests):
            return [Completion("", 3, 0, "error", 0.0) for _ in requests]

    CachedLLM(Failing(), CallCache(tmp_path, "m")).generate(_asks(2))
    assert not (tmp_path / "rank0.jsonl").exists()  # nothing written, no empty file left


def test_a_line_cut_short_by_a_kill_is_dropped_and_the_rest_replayed(tmp_path):
    first = CachedLLM(_model(), CallCache(tmp_path, "m"))
    first.generate(_asks(3))
    first.close()
    path = tmp_path / "rank0.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]) + lines[2][:20])  # the third line half written

    model = _model()
    again = CachedLLM(model, CallCache(tmp_path, "m"))
    assert [c.text for c in again.generate(_asks(3))] == ["answer 0", "answer 1", "answer 2"]
    assert [r.prompt for r in model.calls] == ["question 2"]
    again.close()
    assert len(path.read_text().splitlines()) == 3  # the torn line replaced by a whole one


def test_every_ranks_file_is_read_and_each_rank_writes_its_own(tmp_path):
    CachedLLM(_model(), CallCache(tmp_path, "m", rank=0)).generate(_asks(2))
    CachedLLM(_model(), CallCache(tmp_path, "m", rank=1)).generate(_asks(4)[2:])

    model = _model()
    one_rank = CachedLLM(model, CallCache(tmp_path, "m", rank=0))
    one_rank.generate(_asks(4))
    assert model.calls == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.jsonl", "rank1.jsonl"]


def test_a_named_file_is_written_and_read_alone(tmp_path):
    CachedLLM(_model(), CallCache(tmp_path, "m", rank=0)).generate(_asks(2))
    CachedLLM(_model(), CallCache(tmp_path, "m", name="doc-a")).generate(_asks(3)[2:])

    model = _model()
    doc_a = CachedLLM(model, CallCache(tmp_path, "m", name="doc-a"))
    doc_a.generate(_asks(3))  # the rank file's two calls are not this document's
    assert len(model.calls) == 2 and doc_a.replayed == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc-a.jsonl", "rank0.jsonl"]


def test_log_probabilities_come_back_and_a_nan_one_stays_nan(tmp_path):
    class WithLogprobs(ScriptedLLM):
        def _generate(self, requests):
            return [Completion("ab", 3, 2, "stop", 0.1, [-0.5, float("nan")], ["a", "b"])]

    CachedLLM(WithLogprobs(), CallCache(tmp_path, "m")).generate(_asks(1))
    line = json.loads((tmp_path / "rank0.jsonl").read_text())
    assert line["completion"]["token_logprobs"] == [-0.5, None]  # JSON has no NaN
    got = CachedLLM(_model(), CallCache(tmp_path, "m")).generate(_asks(1))[0]
    assert got.token_logprobs[0] == -0.5 and math.isnan(got.token_logprobs[1])
    assert got.mean_token_prob(0, 1) == pytest.approx(math.exp(-0.5))


def test_remove_deletes_the_file_and_the_folder_it_emptied(tmp_path):
    folder = tmp_path / "calls"
    cache = CallCache(folder, "m")
    CachedLLM(_model(), cache).generate(_asks(1))
    assert (folder / "rank0.jsonl").is_file()
    cache.remove()
    assert not folder.exists()


def test_identical_calls_in_one_batch_reach_the_model_once_unless_sampled(tmp_path):
    model = _model()
    cached = CachedLLM(model, CallCache(tmp_path, "m"))
    twice = [Request("question 1", GREEDY), Request("question 2", GREEDY)] * 2
    got = cached.generate(twice)
    assert [r.prompt for r in model.calls] == ["question 1", "question 2"]
    assert [c.text for c in got] == ["answer 1", "answer 2"] * 2
    assert got[0] is not got[2]  # a copy each: a caller may change one
    assert (cached.computed, cached.replayed) == (2, 2)

    sampled = GenerationParams(max_new_tokens=8, temperature=0.7)
    model.calls.clear()
    cached.generate([Request("question 3", sampled)] * 2)
    assert len(model.calls) == 2  # two draws, as asked


def test_a_record_that_is_not_a_whole_completion_is_made_again(tmp_path):
    CachedLLM(_model(), CallCache(tmp_path, "m")).generate(_asks(2))
    path = tmp_path / "rank0.jsonl"
    first, second = (json.loads(x) for x in path.read_text().splitlines())
    del second["completion"]["finish_reason"]  # an edited line
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")

    model = _model()
    got = CachedLLM(model, CallCache(tmp_path, "m")).generate(_asks(2))
    assert [r.prompt for r in model.calls] == ["question 1"]
    assert [c.text for c in got] == ["answer 0", "answer 1"]


class _Clock:
    """A clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_each_kept_piece_carries_its_wall_time_and_the_pace_counts_it_once(tmp_path, monkeypatch):
    """Pieces of 4, 4 and 2 calls, each 5 s of the backend's time by the clock: the pace is
    10 calls in 15 s, whatever the completions' own latencies say (a server's per-call ones
    here, each 1 s); a rerun that appends another piece adds its own time."""
    monkeypatch.setattr(call_cache, "_clock", _Clock(5.0))  # read before and after: 5 s a piece
    model = _model()
    cached = CachedLLM(model, CallCache(tmp_path, "m"), piece=4)
    got = cached.generate(_asks(10))
    cached.close()
    assert {c.latency_s for c in got} != {5.0}  # the completions' latencies are not the clock's
    lines = [json.loads(x) for x in (tmp_path / "rank0.jsonl").read_text().splitlines()]
    assert [x["piece"] for x in lines] == [{"n": 1, "seconds": 5.0}] * 4 + [
        {"n": 2, "seconds": 5.0}
    ] * 4 + [{"n": 3, "seconds": 5.0}] * 2
    pace = kept_pace(tmp_path)
    assert (pace.calls, pace.seconds) == (10, 15.0)
    assert pace.prompt_tokens == sum(c.prompt_tokens for c in got) > 0
    assert pace.completion_tokens == sum(c.completion_tokens for c in got)
    assert pace.prompt_tokens_per_s == pytest.approx(pace.prompt_tokens / 15.0)

    again = CachedLLM(_model(), CallCache(tmp_path, "m"), piece=4)
    again.generate(_asks(12))  # ten replayed, two computed in one piece of 5 s
    assert (again.replayed, again.computed) == (10, 2)
    assert (kept_pace(tmp_path).calls, kept_pace(tmp_path).seconds) == (12, 20.0)


def test_lines_kept_before_pieces_were_timed_count_each_batch_latency_once(tmp_path):
    """Lines without a ``piece`` (kept by an older chunkwise): a batch's completions share its
    wall time as their latency (vLLM, hf), so a run of equal latencies is one batch; ranks
    add up; a torn last line and a line without a latency are not counted."""

    def line(i: int, latency: object, prompt: int = 100) -> str:
        c = Completion(text=f"a{i}", prompt_tokens=prompt, completion_tokens=7,
                       finish_reason="stop", latency_s=latency)  # type: ignore[arg-type]  # fmt: skip
        return json.dumps({"key": f"k{i}", "completion": c.__dict__}) + "\n"

    (tmp_path / "rank0.jsonl").write_text(
        "".join(line(i, 30.0) for i in range(3))
        + "".join(line(i, 12.5) for i in range(3, 5))
        + line(5, None)
        + line(6, 99.0)[:-9]
    )
    (tmp_path / "rank1.jsonl").write_text(
        line(7, 30.0, prompt=50)  # another rank's batch
        + line(8, 30.0, prompt="many")  # type: ignore[arg-type]  # an edited line: skipped
    )
    pace = kept_pace(tmp_path)
    assert (pace.calls, pace.prompt_tokens, pace.completion_tokens) == (6, 550, 42)
    assert pace.seconds == 72.5  # 30 + 12.5 on rank 0, 30 on rank 1
    assert kept_pace(tmp_path / "none") == call_cache.Pace(0, 0, 0, 0.0)
