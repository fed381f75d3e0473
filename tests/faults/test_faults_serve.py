"""Attacks on ``chunkwise serve`` (issue 15, item 8): each is refused with an OpenAI-shaped
error and the right status, before any generation, and the server keeps serving."""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Sequence

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkwise.llm import Completion, Request
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.serve import ApiError, Limits, OpenAIServer
from chunkwise.serve.app import decode_body
from chunkwise.serve.schemas import check_window, parse_chat, parse_completions

pytestmark = pytest.mark.timeout(120)

MODEL = "chunkwise"
KEY = "k-attack-test"
AUTH = {"Authorization": f"Bearer {KEY}"}
MiB = 1024 * 1024


#: one client for the whole module: each new httpx client builds an SSL context (~0.1 s)
HTTP = httpx.Client(timeout=60)


@pytest.fixture(scope="module")
def server():
    llm = ScriptedLLM(rules=[(r"say (.*)$", r"\1")], default="ok", window=8192)
    with OpenAIServer(llm, api_key=KEY, batch_window_s=0) as s:
        yield s


@pytest.fixture(autouse=True)
def _nothing_generated(server):
    before = len(server.llm.calls)
    yield
    assert len(server.llm.calls) == before, "an attack reached the model"
    # and the server still answers
    r = HTTP.post(f"{server.base_url}/completions", json={"prompt": "say alive"}, headers=AUTH)
    assert r.json()["choices"][0]["text"] == "alive"
    server.llm.calls.pop()


def post(server, body: object = None, *, raw: bytes | None = None, **headers: str):
    content = raw if raw is not None else json.dumps(body).encode()
    h = {"Content-Type": "application/json", **AUTH, **headers}
    return HTTP.post(f"{server.base_url}/completions", content=content, headers=h)


def error_of(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text[:300]
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


def test_cross_site_text_plain_post_is_refused(server):
    # what a web page can send anywhere without a CORS preflight
    r = post(
        server,
        {"model": MODEL, "prompt": "say pwned"},
        **{"Content-Type": "text/plain", "Origin": "https://evil.example"},
    )
    assert "application/json" in error_of(r, 415)["message"]
    assert "access-control-allow-origin" not in r.headers
    pre = HTTP.options(
        f"{server.base_url}/completions",
        headers={
            "Origin": "https://evil.example",
            "Access-Control-Request-Method": "POST",
            **AUTH,
        },
    )
    assert pre.status_code >= 400 and "access-control-allow-origin" not in pre.headers


def test_a_json_post_from_a_foreign_page_is_refused(server):
    # a page on another host (or one that rebinds its name to 127.0.0.1) sends JSON
    for origin in ("https://evil.example", f"http://rebound.example:{server.port}", "null"):
        r = post(server, {"prompt": "say pwned"}, Origin=origin)
        assert error_of(r, 403)["code"] == "forbidden"
        assert "access-control-allow-origin" not in r.headers
    local = post(server, {"prompt": "say local page"}, Origin=f"http://127.0.0.1:{server.port}")
    assert local.json()["choices"][0]["text"] == "local page"
    server.llm.calls.pop()  # a local page may use it


def test_no_key_or_a_wrong_key_is_refused(server):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": KEY}):
        r = HTTP.post(f"{server.base_url}/completions", json={"prompt": "say x"}, headers=headers)
        assert error_of(r, 401)["code"] == "invalid_api_key"
    assert HTTP.get(f"{server.base_url}/models").status_code == 401


def test_a_60_mb_prompt_is_refused_without_counting_or_generating(server):
    err = error_of(post(server, {"model": MODEL, "prompt": "a " * 30_000_000}), 413)
    assert "16,777,216" in err["message"]


def test_prompts_beyond_the_context_window_are_refused_before_generating(server):
    # over 64 characters per token of context: refused without tokenizing
    err = error_of(post(server, {"prompt": "x" * (8192 * 64 + 1)}), 400)
    assert err["code"] == "context_length_exceeded" and err["param"] == "prompt"
    # counted: 8,000 tokens of prompt + 500 of max_tokens > 8,192
    err = error_of(post(server, {"prompt": "w " * 8000, "max_tokens": 500}), 400)
    assert err["code"] == "context_length_exceeded" and "asks for 500 more" in err["message"]


@pytest.mark.parametrize("max_tokens", [1e12, 10**12, 8193, 0, -1, "16", True])
def test_absurd_max_tokens_is_refused(server, max_tokens):
    err = error_of(post(server, {"prompt": "say x", "max_tokens": max_tokens}), 400)
    assert err["param"] == "max_tokens"


@pytest.mark.parametrize(
    ("n", "prompts", "param"),
    [(64, 1000, "prompt"), (64, 1, "n"), (1, 1000, "prompt"), (8, 200, "n")],
)
def test_n_and_prompt_count_are_capped(server, n, prompts, param):
    body = {"prompt": [f"say p{i}" for i in range(prompts)], "n": n}
    assert error_of(post(server, body), 400)["param"] == param


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b'{"prompt": "x", "temperature": NaN}', None),
        (b'{"prompt": "x", "temperature": Infinity}', None),
        (b'{"prompt": "x", "temperature": 1e999}', "temperature"),
        (b'{"prompt": "x", "temperature": -0.5}', "temperature"),
        (b'{"prompt": "x", "temperature": "hot"}', "temperature"),
        (b'{"prompt": "x", "top_p": 0}', "top_p"),
        (b'{"prompt": "x", "top_p": 1.5}', "top_p"),
        (b'{"prompt": "x", "top_p": -Infinity}', None),
    ],
)
def test_bad_sampling_numbers_are_refused(server, raw, param):
    assert error_of(post(server, raw=raw), 400)["param"] == param


def test_unknown_model_is_404(server):
    err = error_of(post(server, {"model": "gpt-4o", "prompt": "say x"}), 404)
    assert (err["param"], err["code"]) == ("model", "model_not_found")


def test_body_over_the_limit_is_413_on_content_length_and_on_the_stream(server):
    big = b'{"prompt": "' + b"a" * (64 * MiB) + b'"}'
    assert error_of(post(server, raw=big), 413)["code"] == "request_too_large"

    def chunks():  # no Content-Length: counted while reading
        yield b'{"prompt": "'
        for _ in range(20):
            yield b"a" * MiB
        yield b'"}'

    r = HTTP.post(
        f"{server.base_url}/completions",
        content=chunks(),
        headers={"Content-Type": "application/json", **AUTH},
    )
    assert error_of(r, 413)["code"] == "request_too_large"


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 200_000,
        b'{"prompt": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
        b'{"prompt": ' + b"[" * 900 + b"1" + b"]" * 900 + b"}",
        b'{"messages": [{"role": "user", "content": ' + b"[" * 900 + b"]" * 900 + b"}]}",
    ],
    ids=["bare", "closed", "shallow-enough-to-parse", "in-messages"],
)
def test_deeply_nested_json_is_a_400_with_a_message(server, raw):
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        path = b"/v1/chat/completions" if b"messages" in raw else b"/v1/completions"
        s.sendall(
            b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s"
            % (path, KEY.encode(), len(raw), raw)
        )
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            part = s.recv(65536)
            assert part, f"the server dropped the connection; got {reply[:200]!r}"
            reply += part
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert json.loads(body)["error"]["message"]


def test_a_flood_beyond_the_queue_is_429():
    class Gated(ScriptedLLM):
        def __post_init__(self) -> None:
            super().__post_init__()
            self.entered, self.gate = threading.Event(), threading.Event()

        def _generate(self, requests: Sequence[Request]) -> list[Completion]:
            self.entered.set()
            assert self.gate.wait(30)
            return super()._generate(requests)

    llm = Gated(default="ok")
    with OpenAIServer(llm, limits=Limits(max_queued=1), batch_window_s=0) as s:
        result: list[httpx.Response] = []
        t = threading.Thread(
            target=lambda: result.append(
                HTTP.post(f"{s.base_url}/completions", json={"prompt": "a"})
            )
        )
        t.start()
        assert llm.entered.wait(20)
        r = HTTP.post(f"{s.base_url}/completions", json={"prompt": "b"})
        llm.gate.set()
        t.join(20)
    assert error_of(r, 429)["type"] == "rate_limit_exceeded"
    assert result[0].status_code == 200


# -- fuzzing the body reader and the request parsers (no HTTP: the same functions) ----------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)
FIELDS = ["model", "prompt", "messages", "n", "max_tokens", "temperature", "top_p", "stop", "seed"]
FIELDS += ["stream", "stream_options", "logprobs", "echo", "max_completion_tokens"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_body_decodes_or_is_a_400(raw):
    try:
        assert isinstance(decode_body(raw), dict)
    except ApiError as e:
        assert e.status == 400 and str(e)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=6), chat=st.booleans())
def test_any_fields_parse_or_are_a_4xx(body, chat):
    llm = ScriptedLLM(window=64)
    parse = parse_chat if chat else parse_completions
    try:
        call = parse(body, llm, MODEL, Limits())
    except ApiError as e:
        assert e.status in (400, 404) and str(e)
        return
    try:
        requests = check_window(call, llm)
    except ApiError as e:
        assert e.status == 400
        return
    assert len(requests) == len(call.prompts) * call.n
    assert all(r.params.max_new_tokens + llm.prompt_tokens(r.prompt) <= 64 for r in requests)
    assert math.isfinite(call.params.temperature) and 0 < call.params.top_p <= 1
