"""Fair batching and cancellation in ``chunkwise serve``, asserted on event order and counters
(never on timing): a scripted double whose first batch waits for the test to open a gate."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from chunkwise.llm import Completion, Request
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.serve import OpenAIServer

pytestmark = pytest.mark.timeout(60)

MODEL = "chunkwise"


class GatedLLM(ScriptedLLM):
    """Records every batch; the first ``generate`` call blocks until the test opens the gate."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.batches: list[list[str]] = []

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        self.batches.append([str(r.prompt) for r in requests])
        if not self.entered.is_set():
            self.entered.set()
            assert self.gate.wait(30), "test never opened the gate"
        return super()._generate(requests)


def gated() -> GatedLLM:
    return GatedLLM(rules=[(r"(\w+ \d+)$", r"done \1")], default="done")


def wait_until(cond, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def complete(server: OpenAIServer, prompt: str | list[str]) -> list[str]:
    with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) as c:
        r = c.completions.create(model=MODEL, prompt=prompt, max_tokens=4)
    return [ch.text for ch in sorted(r.choices, key=lambda ch: ch.index)]


def send_and_hang_up(server: OpenAIServer, body: dict) -> socket.socket:
    """A real client that sends its request and will go away (closing the returned socket)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(
        b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)
    )
    return s


def test_a_small_request_is_not_stuck_behind_a_big_one():
    llm = gated()
    with OpenAIServer(llm, max_batch=4, batch_window_s=0) as server:
        pool = ThreadPoolExecutor(2)
        big = pool.submit(complete, server, [f"big {i}" for i in range(40)])
        assert llm.entered.wait(20)  # the worker runs big's first batch ...
        small = pool.submit(complete, server, "small 0")
        wait_until(lambda: server.stats.queued == 2)  # ... while small waits behind it
        llm.gate.set()
        assert small.result(20) == ["done small 0"]
        assert big.result(20) == [f"done big {i}" for i in range(40)]
        pool.shutdown()
    # small rode in the very next batch, not after the other nine batches of big
    assert llm.batches[0] == [f"big {i}" for i in range(4)]
    assert "small 0" in llm.batches[1]
    assert len(llm.batches) == 11 and all(len(b) <= 4 for b in llm.batches)


def test_requests_that_arrive_together_share_a_batch():
    llm = gated()
    with OpenAIServer(llm, max_batch=8, batch_window_s=0) as server:
        pool = ThreadPoolExecutor(4)
        first = pool.submit(complete, server, "first 0")
        assert llm.entered.wait(20)
        rest = [pool.submit(complete, server, f"next {i}") for i in range(3)]
        wait_until(lambda: server.stats.queued == 4)
        llm.gate.set()
        assert first.result(20) == ["done first 0"]
        assert [f.result(20) for f in rest] == [[f"done next {i}"] for i in range(3)]
        pool.shutdown()
    assert list(server.stats.batch_sizes) == [1, 3]


@pytest.mark.parametrize("stream", [False, True])
def test_an_abandoned_queued_request_never_runs(stream):
    llm = gated()
    with OpenAIServer(llm, batch_window_s=0) as server:
        pool = ThreadPoolExecutor(1)
        first = pool.submit(complete, server, "first 0")
        assert llm.entered.wait(20)
        body = {"model": MODEL, "prompt": "abandoned 1", "stream": stream}
        with send_and_hang_up(server, body):
            wait_until(lambda: server.stats.queued == 2)
        wait_until(lambda: server.stats.cancelled == 1)  # the server saw the hang-up
        llm.gate.set()
        assert first.result(20) == ["done first 0"]
        assert complete(server, "after 2") == ["done after 2"]  # the worker moved on past it
        pool.shutdown()
        wait_until(lambda: server.stats.in_flight == 0)  # nothing left hanging
    assert not any("abandoned" in p for b in llm.batches for p in b)
    assert server.stats.skipped == 1


@pytest.mark.parametrize("stream", [False, True])
def test_an_abandoned_running_request_stops_between_batches(stream):
    llm = gated()
    with OpenAIServer(llm, max_batch=2, batch_window_s=0) as server:
        body = {"model": MODEL, "prompt": [f"gone {i}" for i in range(10)], "stream": stream}
        with send_and_hang_up(server, body):
            assert llm.entered.wait(20)  # its first batch is running
        wait_until(lambda: server.stats.cancelled == 1)
        llm.gate.set()
        assert complete(server, "after 1") == ["done after 1"]
        wait_until(lambda: server.stats.in_flight == 0)
    assert llm.batches == [["gone 0", "gone 1"], ["after 1"]]
    assert server.stats.skipped == 8
