"""Issue 47, defect 2: a spec's secrets never reach a client of ``chunkwise serve``.

``--model "openai:m@http://user:pw@host/v1"`` used to serve the password to anyone who read
``/v1/models``. Here every byte every endpoint answers (the models list, completions, chat,
their streamed chunks, errors of each kind, and the server's log) is searched for the secrets,
over a real chain: a server over the ``openai`` backend whose URL carries user info, in front
of a scripted upstream; and over a backend whose errors name a secret URL.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import httpx
import pytest

from chunkwise.llm import Completion, Request, load_llm
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.redact import MASK
from chunkwise.serve import OpenAIServer
from chunkwise.serve.server import default_name

pytestmark = pytest.mark.timeout(120)

PASSWORD = "pw7Qx2LmZ"
TOKEN = "tok9Hd3Rv"
SECRETS = (PASSWORD, TOKEN)
KEY = "the-b-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def assert_clean(what: str, data: bytes | str) -> None:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    for secret in SECRETS:
        assert secret not in text, f"{what} leaks {secret!r}: {text[:400]}"


def assert_logs_clean(records: list[logging.LogRecord]) -> None:
    """The server's own log (chunkwise, uvicorn), as a library user sees it (no handler
    filter). httpx's INFO line names each URL it calls, user info included: the CLI shows it
    only under -v, masked by logs.RedactFilter."""
    for record in records:
        if record.name.startswith(("chunkwise", "uvicorn")):
            assert_clean(f"log record {record.getMessage()[:80]!r}", record.getMessage())


def raw(r: httpx.Response) -> bytes:
    head = "".join(f"{k}: {v}\n" for k, v in r.headers.multi_items())
    return f"{r.status_code}\n{head}\n".encode() + r.content


@pytest.fixture(scope="module")
def upstream() -> Iterator[OpenAIServer]:
    llm = ScriptedLLM(rules=[(r"say (.*)$", r"\1")], default="ok", window=64)
    with OpenAIServer(llm, batch_window_s=0) as a:
        yield a


@pytest.fixture(scope="module")
def chained(upstream) -> Iterator[OpenAIServer]:
    """A server over the openai backend, whose URL carries a password, in front of upstream."""
    url = f"http://user:{PASSWORD}@127.0.0.1:{upstream.port}/v1"
    llm = load_llm(f"openai:chunkwise@{url}?retries=0")
    with OpenAIServer(llm, api_key=KEY, batch_window_s=0) as b:
        yield b
    llm.close()


def every_answer(server: OpenAIServer) -> list[tuple[str, bytes]]:
    """(what, raw bytes) of every kind of answer the server gives: each route, streamed and
    not, and each kind of error."""
    base = server.base_url
    root = base.removesuffix("/v1")
    prompt = {"prompt": "say hello", "max_tokens": 4}
    chat = {"messages": [{"role": "user", "content": "say hi"}], "max_tokens": 4}
    too_long = {"prompt": "say " + "w " * 100, "max_tokens": 4}  # fits here, not upstream
    posts = {
        "completions": ("/completions", prompt),
        "completions n=2": ("/completions", {**prompt, "n": 2}),
        "completions stream": (
            "/completions",
            {**prompt, "stream": True, "stream_options": {"include_usage": True}},
        ),
        "chat": ("/chat/completions", chat),
        "chat stream": ("/chat/completions", {**chat, "stream": True}),
        "wrong model (404)": ("/completions", {**prompt, "model": "gpt-4o"}),
        "bad parameter (400)": ("/completions", {**prompt, "top_p": 0}),
        "upstream refuses": ("/completions", too_long),
        "upstream refuses, streamed": ("/completions", {**too_long, "stream": True}),
    }
    out = []
    with httpx.Client(timeout=60, headers=AUTH) as c:
        for path in ("/models", "/health"):
            out += [(f"GET /v1{path}", raw(c.get(base + path)))]
            out += [(f"GET {path}", raw(c.get(root + path)))]
        for what, (path, body) in posts.items():
            out.append((what, raw(c.post(base + path, json=body))))
        out.append(("no route (404)", raw(c.get(base + "/nowhere"))))
        out.append(("wrong method (405)", raw(c.get(base + "/completions"))))
        out.append(("not JSON (415)", raw(c.post(base + "/completions", content=b"x"))))
        out.append(("no key (401)", raw(httpx.get(base + "/models"))))
        out.append(
            ("foreign host (403)", raw(c.get(base + "/models", headers={"Host": "evil.example"})))
        )
    return out


def test_every_answer_of_a_server_over_a_url_with_a_password_is_clean(chained, caplog):
    caplog.set_level(logging.DEBUG)
    answers = every_answer(chained)
    for what, data in answers:
        assert_clean(what, data)
    by_what = dict(answers)
    # the answers are real ones, not empty errors that would pass any check
    assert b'"data":[{"id":"chunkwise@http://' + MASK.encode() + b"@127.0.0.1" in by_what[
        "GET /v1/models"
    ].replace(b" ", b"")
    assert b'"text":"hello"' in by_what["completions"]
    assert b"data: [DONE]" in by_what["completions stream"]
    assert by_what["upstream refuses"].startswith((b"400", b"500"))
    assert b'"error"' in by_what["upstream refuses, streamed"]
    assert by_what["wrong model (404)"].startswith(b"404")
    assert_logs_clean(caplog.records)


def test_the_served_name_is_redacted_for_every_kind_of_secret():
    llm = ScriptedLLM()
    for spec, want in [
        (f"openai:m@http://user:{PASSWORD}@host/v1", "m@http://***@host/v1"),
        (f"openai:m@http://host/v1?token={TOKEN}", "m@http://host/v1"),  # options leave
        ("hf:default", "default"),
    ]:
        llm.spec = spec
        assert default_name(llm) == want
    # a spec that does not parse is served redacted too, and so is an explicit name
    llm.spec = f"openai:@http://host/v1?x=1&api_key={TOKEN}"
    assert_clean("default_name", default_name(llm))
    with OpenAIServer(llm, model_name=f"m@http://u:{PASSWORD}@h/v1") as s:
        assert_clean("model_name", s.model_name)
        assert_clean("models", raw(httpx.get(s.base_url + "/models")))


class LeakyBackend(ScriptedLLM):
    """A backend whose errors name the secret URL it reached (as a careless one would)."""

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        raise RuntimeError(f"cannot reach http://user:{PASSWORD}@10.0.0.1/v1?api_key={TOKEN}")


@pytest.mark.parametrize("stream", [False, True])
def test_a_backend_error_naming_a_secret_url_is_answered_redacted(stream, caplog):
    llm = LeakyBackend()
    llm.spec = f"openai:m@http://user:{PASSWORD}@10.0.0.1/v1"
    with OpenAIServer(llm, batch_window_s=0) as s:
        r = httpx.post(s.base_url + "/completions", json={"prompt": "x", "stream": stream})
    assert_clean("the error", raw(r))
    assert b"cannot reach http://***@10.0.0.1/v1?api_key=***" in r.content
    assert_logs_clean(caplog.records)
