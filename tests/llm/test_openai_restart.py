"""The ``openai`` backend when its server goes away: a server that answered once and then
refuses connections is waited for (``?retry_seconds=``), not charged to ``?retries=``; one that
never comes back ends in one error naming the server; one never reached fails fast."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from chunkwise.errors import BadInput, LLMRequestError
from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm.openai_compat import OpenAICompatLLM

try:  # imported as part of a package when tests/llm has an __init__.py
    from .fault_server import FaultServer
except ImportError:
    from fault_server import FaultServer

pytestmark = pytest.mark.timeout(60)

FAST = "backoff=0.01&backoff_max=0.05"
WAITING = "refuses connections"


def client(url: str, **opts: object) -> OpenAICompatLLM:
    query = "&".join([FAST, *(f"{k}={v}" for k, v in opts.items())])
    llm = load_llm(f"openai:m@{url}?{query}")
    assert isinstance(llm, OpenAICompatLLM)
    return llm


def ask(llm: OpenAICompatLLM, prompt: str) -> str:
    return llm.generate([Request(prompt, GenerationParams(max_new_tokens=4))])[0].text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.01)


def test_a_restarted_server_is_waited_for_beyond_the_retries(caplog):
    caplog.set_level(logging.WARNING, logger="chunkwise.llm.openai_compat")
    first = FaultServer().start()
    port = first.port
    # retries=0: without the wait for a restart, the first refusal would end the request
    with client(first.base_url, retries=0, retry_seconds=30) as llm:
        assert ask(llm, "before") == "echo: before"
        first.close()  # the server goes away
        got: dict[str, object] = {}
        worker = threading.Thread(target=lambda: got.update(text=_try(llm, "during")))
        worker.start()
        wait_for(lambda: any(WAITING in r.getMessage() for r in caplog.records), "a refusal")
        with FaultServer(port=port) as second:  # back, on the same port
            worker.join(30)
            assert not worker.is_alive()
            assert got["text"] == "echo: during", got
            assert second.attempts("during") == 1
    waits = [r.getMessage() for r in caplog.records if WAITING in r.getMessage()]
    assert len(waits) == 1 and f"127.0.0.1:{port}/v1" in waits[0]


def _try(llm: OpenAICompatLLM, prompt: str) -> object:
    try:
        return ask(llm, prompt)
    except Exception as e:  # handed to the test thread, which asserts on it
        return e


def test_a_server_that_never_returns_ends_in_one_error_naming_it():
    fs = FaultServer().start()
    url = f"http://alice:hunter2@127.0.0.1:{fs.port}/v1"
    with client(url, retries=0, retry_seconds=0.5) as llm:
        assert ask(llm, "before") == "echo: before"
        fs.close()
        with pytest.raises(LLMRequestError) as err:
            ask(llm, "after it died")
    text = str(err.value)
    assert "\n" not in text
    assert f"the server at http://***@127.0.0.1:{fs.port}/v1 went away" in text
    assert "hunter2" not in text and "alice" not in text
    assert "'after it died'" in text and "ConnectError" in text and "retry_seconds" in text
    attempts = int(text.split(" attempts of request")[0].rsplit("(", 1)[1])
    assert attempts >= 2  # it did wait: retries=0 alone allows one attempt


def test_retry_seconds_0_charges_refusals_to_the_retries():
    fs = FaultServer().start()
    with client(fs.base_url, retries=1, retry_seconds=0) as llm:
        assert ask(llm, "before") == "echo: before"
        fs.close()
        with pytest.raises(LLMRequestError, match=r"after 2 attempts: ConnectError"):
            ask(llm, "after")


def test_a_server_never_reached_fails_after_the_retries_not_the_wait():
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with (
        client(url, retries=2, retry_seconds=3600) as llm,
        pytest.raises(LLMRequestError, match=r"after 3 attempts: ConnectError") as err,
    ):
        ask(llm, "anyone?")
    assert "Check that the server is up" in str(err.value)


def test_retry_seconds_option_is_checked():
    assert load_llm("openai:m@http://127.0.0.1:1/v1").retry_seconds == 120.0
    assert load_llm("openai:m@http://127.0.0.1:1/v1?retry_seconds=7.5").retry_seconds == 7.5
    for bad in ("-1", "soon", "inf", "nan"):
        with pytest.raises(BadInput, match=rf"retry_seconds={bad!r}"):
            load_llm(f"openai:m@http://127.0.0.1:1/v1?retry_seconds={bad}")
