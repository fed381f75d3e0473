"""Issue 47, defect 11: what all clients together may hold of the server is bounded, each bound
an option of :class:`Limits`: open connections, the time to send a request head and a body,
idle keep-alive time, and request-body bytes held. Waits are bounded waits on sockets and
events (a socket timeout is a failure, never a measurement)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from chunkwise.llm import Completion, Request
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.serve import Limits, OpenAIServer
from http_raw import read_reply, request

pytestmark = pytest.mark.timeout(60)

WAIT = 20  # seconds any socket read may block before the test fails
KiB = 1024


def connect(server: OpenAIServer) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)
    return s


def health(s: socket.socket) -> int:
    s.sendall(request("GET", "/v1/health"))
    return read_reply(s).status


def connections(server: OpenAIServer) -> int:
    return len(server._server.server_state.connections)


def wait_until(cond, what: str) -> None:
    """A bounded wait on ``cond`` (the server notices a close on its own loop)."""
    done = threading.Event()
    for _ in range(WAIT * 200):
        if cond():
            return
        done.wait(0.005)
    raise AssertionError(f"never: {what}")


def test_a_connection_past_the_limit_is_answered_503_as_it_is_accepted():
    with OpenAIServer(ScriptedLLM(), limits=Limits(max_connections=4)) as server:
        held = [connect(server) for _ in range(4)]
        assert all(health(s) == 200 for s in held)  # all four are in: idle keep-alives
        extra = connect(server)
        reply = read_reply(extra)  # sent unasked, before any request
        assert reply.status == 503 and reply.json()["error"]["code"] == "too_many_connections"
        assert extra.recv(10) == b""  # and closed
        extra.close()
        for s in held:
            s.close()
        wait_until(lambda: connections(server) == 0, "the server saw the closes")
        with connect(server) as again:
            assert health(again) == 200


def test_fifty_half_sent_request_heads_are_cut_off():
    limits = Limits(head_timeout_s=0.5)
    with OpenAIServer(ScriptedLLM(), limits=limits) as server:
        socks = [connect(server) for _ in range(50)]
        for s in socks:
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        for s in socks:
            reply = read_reply(s)
            assert reply.status == 408 and reply.json()["error"]["code"] == "request_timeout"
            assert s.recv(10) == b""
            s.close()
        wait_until(lambda: connections(server) == 0, "all 50 closed")


def test_a_silent_connection_and_a_half_sent_second_request_are_cut_off():
    with OpenAIServer(ScriptedLLM(), limits=Limits(head_timeout_s=0.5)) as server:
        with connect(server) as silent:
            assert silent.recv(10) == b""  # closed without a word
        with connect(server) as s:
            assert health(s) == 200
            s.sendall(b"GET /v1/health HTTP/1.1\r\n")  # the next head, half sent
            assert read_reply(s).status == 408


def test_a_slow_generation_is_not_cut_off_by_the_head_deadline():
    """The deadline covers the head only: a request that runs longer than it is answered."""
    gate, entered = threading.Event(), threading.Event()

    class Gated(ScriptedLLM):
        def _generate(self, requests: Sequence[Request]) -> list[Completion]:
            entered.set()
            assert gate.wait(WAIT)
            return super()._generate(requests)

    limits = Limits(head_timeout_s=0.3)
    with OpenAIServer(Gated(default="late"), limits=limits) as server:
        s, witness = connect(server), connect(server)
        with s, witness:
            s.sendall(
                request(
                    "POST",
                    "/v1/completions",
                    headers={"Content-Type": "application/json"},
                    body=b'{"prompt": "x"}',
                )
            )
            assert entered.wait(WAIT)
            assert witness.recv(10) == b""  # the head deadline has passed for both ...
            gate.set()
            reply = read_reply(s)  # ... and the running request is answered all the same
            assert reply.status == 200 and reply.json()["choices"][0]["text"] == "late"


def test_an_idle_keep_alive_connection_is_closed():
    with OpenAIServer(ScriptedLLM(), limits=Limits(keep_alive_s=0.3)) as server:
        s = connect(server)
        with s:
            assert health(s) == 200
            assert s.recv(10) == b""


def test_a_body_that_does_not_arrive_in_time_is_408():
    with OpenAIServer(ScriptedLLM(), limits=Limits(body_timeout_s=0.5)) as server:
        s = connect(server)
        with s:
            s.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n" + b'{"prompt": '
            )
            reply = read_reply(s)
            assert reply.status == 408 and reply.json()["error"]["code"] == "request_timeout"
            assert "11 bytes came" in reply.json()["error"]["message"]


def test_request_bytes_held_past_the_budget_are_429_and_given_back():
    gate, entered = threading.Event(), threading.Event()

    class Gated(ScriptedLLM):
        def _generate(self, requests: Sequence[Request]) -> list[Completion]:
            entered.set()
            assert gate.wait(WAIT)
            return super()._generate(requests)

    limits = Limits(max_body_bytes=700 * KiB, max_queued_bytes=1000 * KiB)
    body = {"prompt": "say it", "max_tokens": 2, "user": "u" * (600 * KiB)}
    with (
        OpenAIServer(Gated(default="fine"), limits=limits, batch_window_s=0) as server,
        httpx.Client(base_url=server.base_url, timeout=WAIT) as client,
        ThreadPoolExecutor(1) as pool,
    ):
        first = pool.submit(client.post, "/completions", json=body)
        assert entered.wait(WAIT)  # the first request's 600 KiB are held while it runs
        assert server.stats.held_bytes > 600 * KiB
        busy = client.post("/completions", json=body)
        assert busy.status_code == 429, busy.text
        assert busy.json()["error"]["code"] == "server_busy"
        assert busy.headers["retry-after"] == "1"
        gate.set()
        assert first.result(WAIT).status_code == 200
        wait_until(lambda: server.stats.held_bytes == 0, "the bytes were given back")
        assert client.post("/completions", json=body).status_code == 200
    assert server.stats.over_budget == 1
    assert server.stats.max_held_bytes <= limits.max_queued_bytes


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"max_connections": 0}, "max_connections"),
        ({"head_timeout_s": 0.0}, "head_timeout_s"),
        ({"keep_alive_s": float("inf")}, "keep_alive_s"),
        ({"body_timeout_s": True}, "body_timeout_s"),
        ({"max_queued_bytes": 1024}, "max_queued_bytes"),
    ],
)
def test_bad_limits_are_refused(kwargs, needle):
    with pytest.raises(ValueError, match=needle):
        Limits(**kwargs)
