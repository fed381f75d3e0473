"""Several threads sharing one model: their calls run as one backend batch, deterministically,
and one bad request fails only its own caller."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from chunkwise.llm import Completion, GenerationParams, Request
from chunkwise.llm.coalescing import CoalescingLLM, run_each
from chunkwise.llm.scripted import ScriptedLLM

pytestmark = pytest.mark.timeout(60)


class CountingLLM(ScriptedLLM):
    """Echoes ``say X`` as ``X``; remembers the prompts of every backend call; refuses ``bad``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.batches: list[list[str]] = []

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        prompts = [str(r.prompt) for r in requests]
        self.batches.append(prompts)
        if any("bad" in p for p in prompts):
            raise ValueError("the backend refuses 'bad'")
        return super()._generate(requests)


def echo() -> CountingLLM:
    return CountingLLM(rules=[(r"say (.*)$", r"\1")], default="?")


def reqs(*prompts: str) -> list[Request]:
    return [Request(p, GenerationParams(max_new_tokens=32)) for p in prompts]


def test_a_batch_runs_when_every_working_thread_waits_and_each_gets_its_own_results():
    inner = echo()
    shared = CoalescingLLM(inner)

    # thread t makes t+1 calls of two requests: 4 working, then 3, 2, 1
    def work(t: int) -> list[list[str]]:
        return [
            [c.text for c in shared.generate(reqs(f"say {t}.{k}.a", f"say {t}.{k}.b"))]
            for k in range(t + 1)
        ]

    got = dict(run_each(range(4), work, shared, threads=4))
    for t in range(4):
        assert got[t] == [[f"{t}.{k}.a", f"{t}.{k}.b"] for k in range(t + 1)]
    assert shared.batch_sizes == [4, 3, 2, 1]
    assert [len(c) for c in inner.batches] == [8, 6, 4, 2]


def test_more_items_than_threads_keep_every_thread_busy():
    inner = echo()
    shared = CoalescingLLM(inner)
    out = dict(run_each(range(10), lambda i: shared.complete(f"say {i}").text, shared, threads=3))
    assert out == {i: str(i) for i in range(10)}
    assert max(shared.batch_sizes) == 3 and sum(shared.batch_sizes) == 10


def test_one_bad_request_fails_only_its_own_caller():
    inner = echo()
    shared = CoalescingLLM(inner)
    barrier = threading.Barrier(3)

    def work(i: int) -> str:
        barrier.wait()  # all three are working before anyone asks
        return shared.complete("bad" if i == 1 else f"say {i}").text

    got = dict(run_each(range(3), work, shared, threads=3))
    assert got[0] == "0" and got[2] == "2"
    assert isinstance(got[1], ValueError)
    assert len(inner.batches[0]) == 3  # merged, refused, then each call on its own
    assert sorted(map(tuple, inner.batches[1:])) == [("bad",), ("say 0",), ("say 2",)]


def test_other_methods_are_forwarded_and_generate_needs_a_registered_thread():
    shared = CoalescingLLM(echo())
    assert shared.count_tokens("one two three") == echo().count_tokens("one two three")
    assert shared.context_window == echo().context_window
    with pytest.raises(RuntimeError, match="enter"):
        shared.complete("say hi")
    shared.enter()
    assert shared.complete("say hi").text == "hi"
    shared.leave()


def test_a_consumer_that_stops_early_starts_no_more_items():
    shared = CoalescingLLM(echo())
    started: list[int] = []
    gate = threading.Event()

    def work(i: int) -> int:
        started.append(i)
        if i > 0:  # held until the consumer has gone: no timing in this test
            assert gate.wait(30)
        return i

    results = run_each(range(50), work, shared, threads=2)
    assert next(results) == (0, 0)
    results.close()  # what a `break` or an exception in the runner's loop does
    gate.set()
    for t in threading.enumerate():
        if t.name.startswith("chunkwise-example-"):
            t.join(10)
    assert len(started) <= 3  # item 0, and the one each worker held when the consumer left
