"""The ``openai`` backend against (a) chunkwise's own server over test doubles, (b) a
fault-injecting server, (c) the real embedded model served over HTTP (slow)."""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from chunkwise.errors import BadInput, LLMRequestError
from chunkwise.llm import Completion, GenerationParams, Request, load_llm
from chunkwise.llm.openai_compat import OpenAICompatLLM
from chunkwise.llm.openai_wire import DEFAULT_URL, split_target
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.serve import OpenAIServer, serve_in_thread

try:  # imported as part of a package when tests/llm has an __init__.py
    from .fault_server import FaultServer
except ImportError:
    from fault_server import FaultServer

pytestmark = pytest.mark.timeout(60)

FAST = "backoff=0.01&backoff_max=0.05"


def client(url: str, model: str = "chunkwise", **opts: object) -> OpenAICompatLLM:
    query = "&".join([FAST, *(f"{k}={v}" for k, v in opts.items())])
    llm = load_llm(f"openai:{model}@{url}?{query}")
    assert isinstance(llm, OpenAICompatLLM)
    return llm


def reqs(prompts: Sequence[str | list], **params: object) -> list[Request]:
    return [Request(p, GenerationParams(**params)) for p in prompts]  # type: ignore[arg-type]


# -- doubles served by chunkwise.serve (as "chunkwise": they have no spec) -----------------
def numbered() -> ScriptedLLM:
    return ScriptedLLM(
        rules=[(r"n(\d+)$", r"reply \1"), (r"say (.*)$", r"\1")],
        default="nothing to say",
    )


class LogprobLLM(ScriptedLLM):
    """Scripted replies with made-up per-token log-probabilities."""

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = super()._generate(requests)
        for r, c in zip(requests, out, strict=True):
            if r.params.logprobs:
                c.tokens = self._pieces(c.text)
                c.token_logprobs = [-0.1 * (i + 1) for i in range(len(c.tokens))]
        return out


class SlowLLM(ScriptedLLM):
    """Takes a little while per batch, so concurrent HTTP requests overlap on the server."""

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        time.sleep(0.05)
        return super()._generate(requests)


class GatedLLM(ScriptedLLM):
    """The first ``generate`` call blocks until the test opens the gate."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.batches: list[list[str]] = []

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        self.batches.append([r.prompt for r in requests])  # type: ignore[misc]
        if not self.entered.is_set():
            self.entered.set()
            assert self.gate.wait(30), "test never opened the gate"
        return super()._generate(requests)


def wait_until(cond, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_order_preserved_across_concurrent_requests():
    prompts = [f"item n{i}" for i in range(24)]
    with serve_in_thread(numbered()) as url, client(url, concurrency=6) as llm:
        out = llm.generate(reqs(prompts, max_new_tokens=8, temperature=0))
    assert [c.text for c in out] == [f"reply {i}" for i in range(24)]
    assert all(c.finish_reason == "stop" and c.latency_s >= 0 for c in out)


def test_concurrency_bound_respected_at_the_server():
    with (
        OpenAIServer(SlowLLM(default="ok")) as server,
        client(server.base_url, concurrency=3) as llm,
    ):
        out = llm.generate(reqs([f"p{i}" for i in range(12)], max_new_tokens=4))
    assert [c.text for c in out] == ["ok"] * 12
    assert server.stats.requests == 12
    assert 1 <= server.stats.max_in_flight <= 3
    assert sum(server.stats.batch_sizes) == 12


def test_concurrent_requests_are_micro_batched():
    llm = GatedLLM(rules=[(r"n(\d+)$", r"reply \1")])
    with OpenAIServer(llm) as server, client(server.base_url, concurrency=8) as remote:
        pool = ThreadPoolExecutor(2)
        first = pool.submit(remote.generate, reqs(["n0"]))
        assert llm.entered.wait(20)  # the worker is busy with n0 ...
        rest = pool.submit(remote.generate, reqs(["n1", "n2", "n3"]))
        # ... while three more reach the scheduler's queue (in_flight counts HTTP arrivals, which
        # run ahead of the queue: waiting on it let the worker start with two of the three)
        wait_until(lambda: server.stats.queued == 4)
        llm.gate.set()
        assert [c.text for c in first.result(20)] == ["reply 0"]
        assert [c.text for c in rest.result(20)] == ["reply 1", "reply 2", "reply 3"]
        pool.shutdown()
    assert list(server.stats.batch_sizes) == [1, 3]
    assert [sorted(b) for b in llm.batches] == [["n0"], ["n1", "n2", "n3"]]  # any arrival order


def test_stop_strings_and_length():
    double = ScriptedLLM(rules=[(r"story", "once upon a time STOP the end")])
    with serve_in_thread(double) as url, client(url) as llm:
        stopped, long, cut = llm.generate(
            [
                Request("a story", GenerationParams(max_new_tokens=50, stop=("STOP",))),
                Request("a story", GenerationParams(max_new_tokens=50)),
                Request("a story", GenerationParams(max_new_tokens=2)),
            ]
        )
    assert (stopped.text, stopped.finish_reason) == ("once upon a time ", "stop")
    assert getattr(stopped, "stop_reason", "STOP") == "STOP"
    assert long.text == "once upon a time STOP the end"
    assert cut.finish_reason == "length" and cut.completion_tokens == 2
    # the server forwarded stop strings and limits (requests arrive in any order); the double
    # applied them
    seen = sorted((c.params.max_new_tokens, c.params.stop) for c in double.calls)
    assert seen == [(2, ()), (50, ()), (50, ("STOP",))]


def test_params_and_usage_reach_the_backend():
    double = numbered()
    with serve_in_thread(double) as url, client(url) as llm:
        (c,) = llm.generate(
            reqs(["say hello there"], max_new_tokens=7, temperature=0.5, top_p=0.9, seed=3)
        )
    p = double.calls[0].params
    assert (p.max_new_tokens, p.temperature, p.top_p, p.seed) == (7, 0.5, 0.9, 3)
    assert c.text == "hello there"
    assert c.prompt_tokens == double.count_tokens("say hello there")
    assert c.completion_tokens == double.count_tokens("hello there")


def test_chat_and_completions_routing():
    double = numbered()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "n7"}]
    with OpenAIServer(double) as server:
        with client(server.base_url) as llm:
            plain, chat = llm.generate([Request("n1"), Request(messages)])
        with client(server.base_url, api="chat") as llm:
            (wrapped,) = llm.generate([Request("n2")])
            assert llm.chat is True
    # the first two were sent together, so they may arrive in either order
    paths = list(server.stats.paths)
    assert sorted(paths[:2]) == ["/v1/chat/completions", "/v1/completions"]
    assert paths[2] == "/v1/chat/completions"
    assert (plain.text, chat.text, wrapped.text) == ("reply 1", "reply 7", "reply 2")
    # plain prompts stay plain; chat messages and api=chat arrive as messages
    prompts = [c.prompt for c in double.calls]
    assert "n1" in prompts[:2] and messages in prompts[:2]
    assert prompts[2] == [{"role": "user", "content": "n2"}]


def test_logprobs_shape_completions_and_chat():
    double = LogprobLLM(rules=[(r"say (.*)$", r"\1")])
    with serve_in_thread(double) as url, client(url) as llm:
        plain, chat, none = llm.generate(
            [
                Request("say one two three", GenerationParams(logprobs=True)),
                Request(
                    [{"role": "user", "content": "say four, five"}], GenerationParams(logprobs=True)
                ),
                Request("say six"),
            ]
        )
    for c, text in ((plain, "one two three"), (chat, "four, five")):
        assert c.text == text
        assert c.tokens is not None and c.token_logprobs is not None
        assert "".join(c.tokens) == text
        assert len(c.tokens) == len(c.token_logprobs) == double.count_tokens(text)
        assert c.token_logprobs == pytest.approx([-0.1 * (i + 1) for i in range(len(c.tokens))])
        assert c.mean_token_prob() == pytest.approx(
            sum(math.exp(v) for v in c.token_logprobs) / len(c.token_logprobs)
        )
    assert none.tokens is None and none.token_logprobs is None


def test_raw_openai_shapes():
    with serve_in_thread(LogprobLLM(rules=[(r"say (.*)$", r"\1")])) as url:
        models = httpx.get(f"{url}/models").json()
        comp = httpx.post(
            f"{url}/completions",
            json={
                "model": "chunkwise",
                "prompt": ["say a b", "say c"],
                "max_tokens": 5,
                "logprobs": 1,
            },
        ).json()
        chat = httpx.post(
            f"{url}/chat/completions",
            json={
                "model": "chunkwise",
                "messages": [{"role": "user", "content": "say d e"}],
                "logprobs": True,
                "n": 2,
            },
        ).json()
        bad = httpx.post(f"{url}/completions", json={"model": "chunkwise"})
        stream = httpx.post(f"{url}/completions", json={"prompt": "say f", "stream": True})
        missing = httpx.post(f"{url}/nowhere", json={"prompt": "x"})
    assert models["object"] == "list" and models["data"][0]["object"] == "model"
    assert comp["object"] == "text_completion"
    assert [ch["text"] for ch in comp["choices"]] == ["a b", "c"]
    lp = comp["choices"][0]["logprobs"]
    assert lp["tokens"] == ["a", " b"] and len(lp["token_logprobs"]) == 2
    assert lp["text_offset"] == [0, 1] and len(lp["top_logprobs"]) == 2
    assert set(comp["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert comp["usage"]["completion_tokens"] == 3
    assert chat["object"] == "chat.completion" and len(chat["choices"]) == 2
    content = chat["choices"][1]["logprobs"]["content"]
    assert [t["token"] for t in content] == ["d", " e"]
    assert {"token", "logprob", "bytes", "top_logprobs"} <= set(content[0])
    assert chat["choices"][0]["message"] == {"role": "assistant", "content": "d e"}
    assert bad.status_code == 400 and "prompt" in bad.json()["error"]["message"]
    assert bad.json()["error"]["param"] == "prompt"
    assert stream.status_code == 200 and stream.headers["content-type"].startswith(
        "text/event-stream"
    )
    assert stream.text.endswith("data: [DONE]\n\n") and '"text": "f"' in stream.text
    assert missing.status_code == 404


def test_server_400_fails_the_client_at_once():
    bad_messages = [{"role": "user", "content": 5}]  # the server refuses non-text content
    with (
        OpenAIServer(numbered()) as server,
        client(server.base_url, retries=3) as llm,
        pytest.raises(LLMRequestError, match=r"request 0 .* failed after 1 attempt: HTTP 400"),
    ):
        llm.generate([Request(bad_messages)])  # type: ignore[list-item]
    assert server.stats.requests == 1


def test_server_backend_error_is_a_500():
    class Broken(ScriptedLLM):
        def _generate(self, requests):
            if any(r.prompt == "boom" for r in requests):
                raise RuntimeError("backend exploded")
            return super()._generate(requests)

    with OpenAIServer(Broken(default="fine")) as server, client(server.base_url, retries=1) as llm:
        with pytest.raises(LLMRequestError) as err:
            llm.generate(reqs(["boom"]))
        assert "HTTP 500" in str(err.value) and "backend exploded" in str(err.value)
        assert server.stats.requests == 2  # 500 is retried once, then given up
        assert llm.generate(reqs(["ok"]))[0].text == "fine"


# -- the fault server -----------------------------------------------------------------------
def test_500s_then_success():
    with FaultServer(["500", "503", "500"]) as fs, client(fs.base_url, retries=4) as llm:
        (c,) = llm.generate(reqs(["hello"]))
    assert c.text == "echo: hello"
    assert fs.attempts("hello") == 4
    assert (c.prompt_tokens, c.completion_tokens) == (3, 2)  # from usage


def test_always_500_gives_up_after_max_attempts_naming_the_request():
    per = {"p2 the bad one": ["500"] * 20}
    prompts = ["p0", "p1", "p2 the bad one", "p3"]
    with (
        FaultServer(per_prompt=per) as fs,
        client(fs.base_url, retries=2) as llm,
        pytest.raises(LLMRequestError) as err,
    ):
        llm.generate(reqs(prompts))
    msg = str(err.value)
    assert fs.attempts("p2 the bad one") == 3
    assert "request 2" in msg and "'p2 the bad one'" in msg
    assert fs.base_url + "/completions" in msg
    assert "after 3 attempts" in msg and "HTTP 500" in msg and "injected 500" in msg


@pytest.mark.parametrize("fault", ["429", "malformed", "no-choices", "truncated", "drop", "502"])
def test_transient_faults_are_retried(fault):
    with FaultServer([fault, fault]) as fs, client(fs.base_url, retries=3) as llm:
        (c,) = llm.generate(reqs(["x"]))
    assert c.text == "echo: x"
    assert fs.attempts() == 3
    assert [h.action for h in fs.log] == [fault, fault, "ok"]


@pytest.mark.parametrize("fault", ["malformed", "truncated", "429"])
def test_persistent_transient_fault_ends_in_a_clear_error(fault):
    with (
        FaultServer(default=fault) as fs,
        client(fs.base_url, retries=2) as llm,
        pytest.raises(LLMRequestError, match="after 3 attempts") as err,
    ):
        llm.generate(reqs(["some prompt"]))
    assert fs.attempts() == 3
    expected = {
        "malformed": "malformed response body",
        "truncated": "RemoteProtocolError",
        "429": "HTTP 429",
    }
    assert expected[fault] in str(err.value)


def test_timeout_then_success():
    with (
        FaultServer(["delay"], delay_s=30) as fs,
        client(fs.base_url, timeout=0.5, retries=2) as llm,
    ):
        (c,) = llm.generate(reqs(["slow"]))
    assert c.text == "echo: slow"
    assert [h.action for h in fs.log] == ["delay", "ok"]


def test_timeout_always_gives_up():
    with (
        FaultServer(default="delay", delay_s=30) as fs,
        client(fs.base_url, timeout=0.3, retries=1) as llm,
        pytest.raises(
            LLMRequestError, match=r"after 2 attempts: no answer within the 0.3 s timeout"
        ),
    ):
        llm.generate(reqs(["slow"]))
    assert fs.attempts() == 2


@pytest.mark.parametrize("status", ["400", "404"])
def test_client_errors_fail_immediately(status):
    with (
        FaultServer(default=status) as fs,
        client(fs.base_url, retries=4) as llm,
        pytest.raises(LLMRequestError, match=rf"after 1 attempt: HTTP {status}") as err,
    ):
        llm.generate(reqs(["bad request"]))
    assert fs.attempts() == 1
    assert "'bad request'" in str(err.value) and f"injected {status}" in str(err.value)


def test_connection_refused_is_retried_then_fails():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (
        client(f"http://127.0.0.1:{port}/v1", retries=2) as llm,
        pytest.raises(LLMRequestError, match=r"after 3 attempts: ConnectError"),
    ):
        llm.generate(reqs(["anyone there?"]))


def test_concurrency_bound_is_exact_with_a_gate():
    prompts = [f"g{i}" for i in range(9)]
    with FaultServer(gate=3, gate_timeout_s=10) as fs, client(fs.base_url, concurrency=3) as llm:
        out = llm.generate(reqs(prompts))
    assert [c.text for c in out] == [f"echo: {p}" for p in prompts]
    assert fs.max_in_flight == 3


def test_failure_cancels_the_rest_without_hanging():
    per = {"bad": ["400"]}
    prompts = ["bad", *(f"slow{i}" for i in range(4))]
    with (
        FaultServer(per_prompt=per, default="delay", delay_s=30) as fs,
        client(fs.base_url, concurrency=5) as llm,
    ):
        with pytest.raises(LLMRequestError, match="request 0"):
            llm.generate(reqs(prompts))
        assert fs.attempts("bad") == 1


SECRET = "sk-test-7f3a9c1e5b2d4680-do-not-leak"


def test_api_key_is_sent_but_never_logged_or_shown(monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)  # everything, httpx and httpcore included
    with (
        FaultServer(per_prompt={"p": ["500", "401-echo"]}) as fs,
        client(fs.base_url, retries=3) as llm,
    ):
        with pytest.raises(LLMRequestError) as err:
            llm.generate(reqs(["p"]))
        text = f"{err.value} {err.value!r} {llm!r}"
    assert fs.auth == [f"Bearer {SECRET}"] * 2  # the key was sent ...
    assert fs.attempts() == 2
    assert "HTTP 401" in text and "[redacted]" in text  # ... the server echoed it back ...
    assert SECRET not in text  # ... and it appears nowhere
    assert "retrying" in caplog.text  # the retry was logged
    assert SECRET not in caplog.text
    assert all(SECRET not in str(r.args) for r in caplog.records)


def test_key_env_names_another_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MY_SERVER_KEY", "other-secret")
    with FaultServer() as fs, client(fs.base_url, key_env="MY_SERVER_KEY") as llm:
        llm.generate(reqs(["x"]))
    assert fs.auth == ["Bearer other-secret"]
    with FaultServer() as fs, client(fs.base_url) as llm:
        llm.generate(reqs(["x"]))
    assert fs.auth == [None]  # no key, no header
    monkeypatch.delenv("MY_SERVER_KEY")
    with pytest.raises(BadInput, match="MY_SERVER_KEY is not set"):
        client("http://127.0.0.1:1/v1", key_env="MY_SERVER_KEY")


def test_stop_strings_are_cut_when_a_server_ignores_them():
    with (
        FaultServer(reply=lambda p: "keep this END not this") as fs,
        client(fs.base_url) as llm,
    ):
        (c,) = llm.generate([Request("x", GenerationParams(stop=("not", "END")))])
    assert fs.log[0].body["stop"] == ["not", "END"]
    assert (c.text, c.finish_reason) == ("keep this ", "stop")
    assert getattr(c, "stop_reason", "END") == "END"
    assert c.completion_tokens == math.ceil(2 * 1.3)  # recounted: usage covered the whole text


def test_counts_fall_back_when_usage_is_missing():
    with FaultServer(usage=False) as fs:
        with client(fs.base_url) as llm:  # no tokenizer: conservative word pieces x1.3
            (c,) = llm.generate(reqs(["two words"]))
            assert c.text == "echo: two words"
            assert c.prompt_tokens == math.ceil(2 * 1.3)
            assert c.completion_tokens == math.ceil(4 * 1.3)  # "echo", ":", "two", "words"
        with client(fs.base_url, tokenizer="scripted:echo") as llm:
            (c,) = llm.generate(reqs(["two words"]))
            ref = ScriptedLLM()
            assert c.prompt_tokens == ref.count_tokens("two words")
            assert c.completion_tokens == ref.count_tokens("echo: two words")


def test_tokenizer_delegation_and_fallback():
    with client("http://127.0.0.1:9/v1", tokenizer="scripted:echo") as llm:
        assert llm.count_tokens("Hello, world") == 3
        assert llm.decode(llm.encode("Hello, world")) == "Hello, world"
        assert llm.count_tokens_batch(["a b", "c"]) == [2, 1]
    with client("http://127.0.0.1:9/v1", ctx=4096) as llm:
        assert llm.context_window == 4096
        assert llm.count_tokens("one two three") == math.ceil(3 * 1.3)
        assert len(llm.token_offsets("one two three")) == 3
        with pytest.raises(NotImplementedError):
            llm.encode("x")


def test_spec_parsing():
    assert split_target("default@http://127.0.0.1:8000/v1/") == (
        "default",
        "http://127.0.0.1:8000/v1",
    )
    assert split_target("org/model@rev@https://host/v1") == ("org/model@rev", "https://host/v1")
    assert split_target("gpt-4o-mini") == ("gpt-4o-mini", DEFAULT_URL)
    for bad in ("m@ftp://x", "@http://127.0.0.1/v1", "m@http://"):
        with pytest.raises(BadInput):
            split_target(bad)
    with pytest.raises(BadInput, match="unknown option"):
        load_llm("openai:m@http://127.0.0.1:1/v1?concurrncy=3")
    with pytest.raises(BadInput, match="api='responses' is not valid; expected one of compl"):
        load_llm("openai:m@http://127.0.0.1:1/v1?api=responses")
    with pytest.raises(BadInput, match="retries='many' is not valid; expected a whole number"):
        load_llm("openai:m@http://127.0.0.1:1/v1?retries=many")
    with pytest.raises(BadInput, match="timeout='-1' is not valid; expected a finite number > 0"):
        load_llm("openai:m@http://127.0.0.1:1/v1?timeout=-1")
    llm = load_llm("openai:m@http://127.0.0.1:1/v1?retries=0&concurrency=2&timeout=1.5")
    assert (llm.max_attempts, llm.concurrency, llm.timeout, llm.chat) == (1, 2, 1.5, False)


def test_openai_default_url_needs_a_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(BadInput, match="OPENAI_API_KEY"):
        load_llm("openai:gpt-4o-mini")


def test_generate_from_inside_a_running_event_loop_and_reuse_after_close():
    with FaultServer() as fs:
        llm = client(fs.base_url)

        async def inside() -> str:
            return llm.generate(reqs(["from async"]))[0].text

        assert asyncio.run(inside()) == "echo: from async"
        llm.close()
        llm.close()  # twice is fine
        assert llm.generate(reqs(["again"]))[0].text == "echo: again"  # a fresh loop and client
        llm.close()


def test_serve_cli_module_parses():
    import argparse

    from chunkwise.commands import serve as cmd

    p = argparse.ArgumentParser()
    cmd.add_arguments(p)
    args = p.parse_args(["--model", "scripted:echo", "--port", "0"])
    assert (args.model, args.host, args.port) == ("scripted:echo", "127.0.0.1", 0)
    assert cmd.HELP


# -- the real embedded model over HTTP ------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_served_hf_default_matches_direct_greedy(embedded_llm):
    hf_default = embedded_llm  # hf:default, loaded once per session (tests/conftest.py)
    prompts = ["The capital of France is", "Monday, Tuesday, Wednesday,"]
    params = GenerationParams(max_new_tokens=8, temperature=0.0)
    # one request per forward pass on both sides, so batching cannot change the numerics
    direct = [hf_default.generate([Request(p, params)])[0] for p in prompts]
    with OpenAIServer(hf_default, max_batch=1) as server:
        spec = f"openai:default@{server.base_url}?tokenizer=hf:default"
        with load_llm(spec) as remote:
            served = remote.generate([Request(p, params) for p in prompts])
            (lp,) = remote.generate([Request(prompts[0], params.with_(logprobs=True))])
            assert remote.count_tokens(prompts[1]) == hf_default.count_tokens(prompts[1])
    assert [c.text for c in served] == [c.text for c in direct]
    assert all(c.text.strip() for c in served)
    for s, d in zip(served, direct, strict=True):
        assert (s.prompt_tokens, s.completion_tokens, s.finish_reason) == (
            d.prompt_tokens,
            d.completion_tokens,
            d.finish_reason,
        )
    assert lp.text == direct[0].text
    assert lp.tokens is not None and "".join(lp.tokens) == lp.text
    assert lp.token_logprobs is not None and all(v <= 0 for v in lp.token_logprobs)
    assert list(server.stats.paths) == ["/v1/completions"] * 3
