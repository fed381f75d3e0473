"""Issue 47, defect 10: request framing, the ``Host`` header and web origins, over raw sockets
(a client library would normalize the very headers under test)."""

from __future__ import annotations

import json

import pytest

from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.serve import OpenAIServer
from chunkwise.serve.app import Access, host_name, origin_key
from http_raw import exchange, request

pytestmark = pytest.mark.timeout(60)

BODY = json.dumps({"prompt": "say hello"}).encode()
JSON = {"Content-Type": "application/json"}


def double() -> ScriptedLLM:
    return ScriptedLLM(rules=[(r"say (.*)$", r"\1")], default="ok")


@pytest.fixture(scope="module")
def server():
    with OpenAIServer(double(), batch_window_s=0, allowed_hosts=["api.example"]) as s:
        yield s


@pytest.fixture(autouse=True)
def _forget_calls(server):
    server.llm.calls.clear()


def completion(server, **headers: str) -> tuple[int, dict]:
    r = exchange(
        server.port, request("POST", "/v1/completions", headers={**JSON, **headers}, body=BODY)
    )
    return r.status, r.json()


# -- framing --------------------------------------------------------------------------------
def test_content_length_with_transfer_encoding_is_refused_and_nothing_smuggled(server):
    smuggled = request("POST", "/v1/completions", headers=JSON, body=b'{"prompt": "say smuggled"}')
    chunked = b"0\r\n\r\n" + smuggled  # a front end reading Content-Length sends it all as one
    data = request(
        "POST",
        "/v1/completions",
        headers={**JSON, "Content-Length": str(len(chunked)), "Transfer-Encoding": "chunked"},
        body=chunked,
        length=False,
    )
    r = exchange(server.port, data)
    assert r.status == 400 and r.json()["error"]["code"] == "ambiguous_framing"
    assert r.closed  # nothing after it on this connection is read as a request
    assert server.llm.calls == []


def test_either_framing_alone_is_served(server):
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
    te = request(
        "POST",
        "/v1/completions",
        headers={**JSON, "Transfer-Encoding": "chunked"},
        body=chunked,
        length=False,
    )
    for data in (te, request("POST", "/v1/completions", headers=JSON, body=BODY)):
        r = exchange(server.port, data)
        assert r.status == 200 and r.json()["choices"][0]["text"] == "hello"


# -- Host -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.1.evil.example",
        "127.0.0.1@evil.example",
        "evil.example#@127.0.0.1",
        "localhost.",
        "[::1",
        "",
    ],
)
def test_a_foreign_host_is_refused_on_every_route(server, host):
    host = host.format(port=server.port)
    for method, path, body in [
        ("GET", "/v1/models", None),
        ("GET", "/health", None),
        ("POST", "/v1/completions", BODY),
        ("POST", "/v1/chat/completions", b'{"messages": [{"role": "user", "content": "say x"}]}'),
    ]:
        r = exchange(server.port, request(method, path, host=host, headers=JSON, body=body))
        assert r.status == 403, (host, path, r.body)
        assert r.json()["error"]["code"] == "host_not_allowed"
    assert server.llm.calls == []


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "LocalHost", "[::1]:{port}", "api.example"]
)
def test_the_loopback_names_and_allowed_hosts_are_served(server, host):
    host = host.format(port=server.port)
    r = exchange(server.port, request("GET", "/v1/models", host=host))
    assert r.status == 200 and r.json()["data"][0]["id"] == "chunkwise"


def test_a_request_without_host_is_refused(server):
    r = exchange(server.port, b"GET /v1/models HTTP/1.0\r\n\r\n")
    assert r.status == 400 and r.json()["error"]["code"] == "invalid_host"


def test_host_policy_by_bind_address():
    loop = Access.for_bind("127.0.0.1", 8000)
    assert loop.hosts == {"127.0.0.1", "localhost", "::1"}
    assert Access.for_bind("::1", 8000, ["Box.LAN"]).hosts == loop.hosts | {"box.lan"}
    # beyond loopback an API key is required; any Host is answered unless some are named
    assert Access.for_bind("0.0.0.0", 8000).hosts is None
    assert Access.for_bind("0.0.0.0", 8000, ["api.example"]).hosts == loop.hosts | {"api.example"}
    assert Access.for_bind("10.1.2.3", 8000).hosts is None
    assert Access.for_bind("127.0.0.1", 8000, ["*"]).hosts is None
    assert host_name("[::1]:80") == "::1" and host_name("A.example:1") == "a.example"
    assert host_name("a@b") is None and host_name("a/b") is None and host_name("a b") is None


# -- Origin ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:3000",
        "http://127.0.0.1:{other}",
        "https://localhost:{port}",
        "http://evil.example:{port}",
        "null",
        "http://localhost:{port}/x",
        "file://",
    ],
)
def test_pages_of_other_origins_are_refused(server, origin):
    origin = origin.format(port=server.port, other=server.port + 1)
    status, body = completion(server, Origin=origin)
    assert status == 403 and body["error"]["code"] == "forbidden", origin
    assert server.llm.calls == []


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost:{port}",
        "http://127.0.0.1:{port}",
        "http://[::1]:{port}",
        "https://api.example",
        "http://api.example:8080",
    ],
)
def test_the_servers_own_pages_and_allowed_hosts_are_trusted(server, origin):
    status, body = completion(server, Origin=origin.format(port=server.port))
    assert status == 200 and body["choices"][0]["text"] == "hello"


def test_origin_parsing():
    assert origin_key("http://LocalHost:8000") == ("http", "localhost", 8000)
    assert origin_key("https://a.example") == ("https", "a.example", 443)
    assert origin_key("http://a.example") == ("http", "a.example", 80)
    for bad in ("null", "", "ftp://a", "http://a:99999", "http://u@a", "http://a/p", "a.example"):
        assert origin_key(bad) is None, bad
