"""Attacks on ``chunkwise serve`` (issue 15, item 8): each is refused with an OpenAI-shaped
error and the right status, before any generation, and the server keeps serving."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import threading
from collections.abc import Sequence

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from chunkwise.llm import Completion, Request
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.serve import ApiError, Limits, OpenAIServer
from chunkwise.serve.app import decode_body
from chunkwise.serve.schemas import check_window, parse_chat, parse_completions
from http_raw import Reply, read_reply

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
        # issue 47, defect 9: an integer too large for a float was a 500 (OverflowError)
        (b'{"prompt": "x", "temperature": 1' + b"0" * 400 + b"}", "temperature"),
        (b'{"prompt": "x", "top_p": 1' + b"0" * 400 + b"}", "top_p"),
        (b'{"prompt": "x", "temperature": -1' + b"0" * 400 + b"}", "temperature"),
        (b'{"prompt": "x", "max_tokens": 1' + b"0" * 400 + b"}", "max_tokens"),
        (b'{"prompt": "x", "seed": 1' + b"0" * 400 + b"}", "seed"),
        (b'{"prompt": "x", "temperature": 1' + b"0" * 5000 + b"}", None),  # over int's digits
    ],
)
def test_bad_sampling_numbers_are_refused(server, raw, param):
    assert error_of(post(server, raw=raw), 400)["param"] == param


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        (b'{"prompt": "say \\ud800"}', "prompt"),
        (b'{"prompt": ["ok", "\\udfff tail"]}', "prompt"),
        (b'{"prompt": "x", "stop": ["\\udc00"]}', "stop"),
        (b'{"prompt": "x", "model": "\\ud83d"}', "model"),  # the first half of a pair only
        (b'{"prompt": "x", "\\ud800": 1}', None),  # in a key
        (b'{"prompt": "say \xed\xa0\x80"}', "prompt"),  # a surrogate encoded as UTF-8 bytes
        ('{"prompt": "say \ud800"}'.encode("utf-16", "surrogatepass"), "prompt"),
    ],
    ids=["prompt", "prompt-list", "stop", "model", "key", "utf8-bytes", "utf16-body"],
)
def test_a_lone_surrogate_anywhere_is_a_400_not_a_500(server, raw, param):
    # issue 47, defect 9: it reached the model and its echo failed to encode (500)
    err = error_of(post(server, raw=raw), 400)
    assert err["code"] == "invalid_unicode" and err["param"] == param
    assert "surrogate" in err["message"]


def test_a_lone_surrogate_in_chat_is_a_400_and_a_valid_pair_is_text(server):
    body = b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "\\udead"}]}]}'
    r = HTTP.post(
        f"{server.base_url}/chat/completions",
        content=body,
        headers={"Content-Type": "application/json", **AUTH},
    )
    err = error_of(r, 400)
    assert "messages[0].content[0].text" in err["message"] and err["param"] == "messages"
    pair = post(server, raw=b'{"prompt": "say \\ud83d\\ude00"}')  # one emoji, as a pair
    assert pair.json()["choices"][0]["text"] == "\U0001f600"
    server.llm.calls.pop()


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
            b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
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
#: text that may hold lone surrogates (JSON escapes them; the server must refuse them)
TEXT = st.text(st.characters(max_codepoint=0x3000) | st.characters(categories=["Cs"]), max_size=20)
#: integers too large for a float, which json happily parses
HUGE = st.sampled_from([10**400, -(10**400), 2**1024, 10**4000])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | HUGE | st.floats() | TEXT,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)
FIELDS = ["model", "prompt", "messages", "n", "max_tokens", "temperature", "top_p", "stop", "seed"]
FIELDS += ["stream", "stream_options", "logprobs", "echo", "max_completion_tokens"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.binary(max_size=200)
    | st.text(max_size=200).map(str.encode)
    | st.dictionaries(TEXT, JSON_VALUES, max_size=4).map(lambda d: json.dumps(d).encode())
    | TEXT.map(lambda t: b'{"prompt": "' + t.encode("utf-8", "surrogatepass") + b'"}')
)
def test_any_body_decodes_or_is_a_400(raw):
    try:
        body = decode_body(raw)
    except ApiError as e:
        assert e.status == 400 and str(e)
        return
    assert isinstance(body, dict)
    json.dumps(body, ensure_ascii=False).encode("utf-8")  # any answer can carry its text


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


# -- fuzzing the whole server over raw HTTP: every route, method and header combination -----
ROUTES = [
    "/v1/completions",
    "/completions",
    "/v1/chat/completions",
    "/chat/completions",
    "/v1/models",
    "/models",
    "/v1/health",
    "/health",
    "/nowhere",
    "/v1/completions?stream=true",
    "/v1/%63ompletions",
    "//v1/models",
    "/v1/models/",
    "/v1/chat/completions/../../models",
    "*",
]
METHODS = ["GET", "GET"] + ["POST"] * 8 + ["PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE"]
#: each header's variants, the usual one repeated so that most requests get past the guard
#: and reach the parsers; None leaves the header out ({port} is the server's)
HEADER_VARIANTS: dict[str, list[str | None]] = {
    "Host": ["127.0.0.1:{port}"] * 6 + ["localhost", "[::1]:{port}", "evil.example", "a@b", ""],
    "Authorization": [f"Bearer {KEY}"] * 8 + [f"bearer  {KEY}", "Bearer no", "Basic eDp5", ""],
    "Content-Type": ["application/json"] * 8
    + ["application/json; charset=utf-8", "Application/JSON", "text/plain", "multipart/x", ""],
    "Origin": [None] * 8 + ["null", "http://127.0.0.1:{port}", "http://localhost:3000", "x"],
    "Transfer-Encoding": [None] * 8 + ["chunked", "chunked", "gzip", "chunked, gzip", "identity"],
    "Connection": [None] * 4 + ["close", "keep-alive", "upgrade", "Upgrade, close"],
    "Upgrade": [None] * 6 + ["websocket", "h2c"],
    "Expect": [None] * 6 + ["100-continue", "bogus"],
    "Accept-Encoding": [None, "gzip", "br, zstd"],
    "X-Forwarded-For": [None, "1.2.3.4", "::1, bogus"],
}
#: well-formed optional fields, so that generation and streaming are fuzzed too
VALID_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "max_tokens": st.integers(1, 8),
        "n": st.integers(1, 3),
        "stream": st.booleans(),
        "temperature": st.floats(0, 2) | HUGE,
        "top_p": st.floats(0.01, 1) | HUGE,
        "stop": TEXT | st.lists(TEXT, max_size=3),
        "seed": st.integers(0, 2**63 - 1),
        "model": st.sampled_from(["chunkwise", "other"]),
        "logprobs": st.booleans() | st.integers(0, 5),
    },
).map(lambda d: {**d, "stream_options": {"include_usage": True}} if d.get("stream") else d)
#: how the body's length is declared: right, too short, missing, doubled, not a number
LENGTHS = ["right"] * 8 + ["short", "none", "double", "minus", "plus", "junk"]


@st.composite
def raw_requests(draw: st.DrawFn, port: int) -> bytes:
    """Half the time a well-formed generation request with at most one odd header (so the
    parsers, generation and streaming are reached); else any method, route and header mix."""
    clean = draw(st.booleans())
    if clean:
        method, path = "POST", draw(st.sampled_from(ROUTES[:4]))
        odd = draw(st.sampled_from([None, "Content-Length", *HEADER_VARIANTS]))
    else:
        method, path = draw(st.sampled_from(METHODS)), draw(st.sampled_from(ROUTES))
        odd = "all"
    headers = []
    for name, variants in HEADER_VARIANTS.items():  # the first variant is the usual one
        value = draw(st.sampled_from(variants)) if odd in ("all", name) else variants[0]
        if value is not None:
            headers.append((name, value.format(port=port)))
    fields = st.dictionaries(st.sampled_from([*FIELDS, "user"]), JSON_VALUES, max_size=5)
    fields = fields | VALID_FIELDS | VALID_FIELDS
    said = "say " + draw(TEXT)  # the scripted model echoes it back
    if "chat" in path:
        fields = fields.map(lambda d: {"messages": [{"role": "user", "content": said}], **d})
    else:
        fields = fields.map(lambda d: {"prompt": said, **d})
    encoded = fields.map(lambda d: json.dumps(d).encode())
    body = draw(encoded if clean else st.none() | encoded | st.binary(max_size=64))
    if body is not None and any(k == "Transfer-Encoding" for k, _ in headers):
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
    head = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    n = len(body or b"")
    how = draw(st.sampled_from(LENGTHS)) if odd in ("all", "Content-Length") else "right"
    declared = {"right": [n], "short": [max(n - 3, 0)], "none": [], "double": [n, n + 1]}.get(
        how, {"minus": ["-1"], "plus": [f"+{n}"], "junk": ["12abc"]}.get(how, [])
    )
    if body is not None or how != "right":
        head += [f"Content-Length: {v}" for v in declared]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (body or b"")


class _Errors(logging.Handler):
    """Collects every ERROR record (a traceback logged by the app or by uvicorn)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def fuzz_server():
    llm = ScriptedLLM(rules=[(r"say (.*)$", r"\1")], default="ok", window=64)
    limits = Limits(head_timeout_s=0.3, body_timeout_s=0.3, max_body_bytes=4096)
    with OpenAIServer(llm, api_key=KEY, limits=limits, batch_window_s=0) as s:
        yield s


def exchange_raw(port: int, data: bytes) -> Reply | None:
    """One raw request and its answer; None if the server closed the connection without one
    (a request it could not frame, or a connection it cut off)."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            s.sendall(data)
        try:
            return read_reply(s, head_only=data.startswith(b"HEAD "))
        except (ConnectionError, ValueError):  # ValueError: a half-written chunk size
            return None


@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_no_raw_request_gets_a_500_or_a_traceback(fuzz_server, data):
    """Any method, route, header set and body over a socket: an answer below 500 (OpenAI-shaped
    when it is JSON), or a close; never a 5xx, a traceback, or an error logged."""
    errors = _Errors()
    logging.getLogger().addHandler(errors)
    try:
        raw = data.draw(raw_requests(fuzz_server.port))
        reply = exchange_raw(fuzz_server.port, raw)
    finally:
        logging.getLogger().removeHandler(errors)
    assert not errors.records, [r.getMessage() for r in errors.records]
    event("closed without an answer" if reply is None else f"status {reply.status}")
    if reply is None:
        return
    assert reply.status < 500, (raw[:300], reply.status, reply.body[:300])
    assert b"Traceback" not in reply.body
    json_error = reply.headers.get("content-type", "").startswith("application/json")
    if reply.status >= 400 and json_error and reply.body:
        err = reply.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["message"]
