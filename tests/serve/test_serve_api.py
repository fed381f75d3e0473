"""``chunkwise serve`` driven by the official ``openai`` client, sync and async, streaming and
not, over scripted doubles (fast); one slow test streams from the real hf:default."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess

import httpx
import openai
import pytest

from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.serve import OpenAIServer
from chunkwise.serve.app import key_matches

pytestmark = pytest.mark.timeout(60)

MODEL = "chunkwise"  # what a double without a spec is served as


def double() -> ScriptedLLM:
    return ScriptedLLM(
        rules=[(r"story", "once upon a time STOP the end"), (r"say (.*)$", r"\1")],
        default="nothing to say",
        window=64,
    )


@pytest.fixture
def server():
    with OpenAIServer(double(), batch_window_s=0) as s:
        yield s


def sync_client(server: OpenAIServer, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=30)


def async_client(server: OpenAIServer, key: str = "unused") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=key, max_retries=0, timeout=30)


def test_models_lists_the_served_model(server):
    with sync_client(server) as c:
        models = c.models.list().data
    assert [m.id for m in models] == [MODEL]
    assert models[0].model_extra["max_model_len"] == 64


def test_completions_sync_plain_and_stop_reason(server):
    with sync_client(server) as c:
        r = c.completions.create(
            model=MODEL, prompt=["say a b", "a story"], max_tokens=8, stop="STOP"
        )
    assert [ch.text for ch in r.choices] == ["a b", "once upon a time "]
    assert [ch.finish_reason for ch in r.choices] == ["stop", "stop"]
    # vLLM's field: which stop string ended the text (None: the model stopped on its own)
    assert [ch.model_extra["stop_reason"] for ch in r.choices] == [None, "STOP"]
    count = server.llm.count_tokens
    assert r.usage.completion_tokens == count("a b") + count("once upon a time ")
    assert r.object == "text_completion" and r.model == MODEL


def test_completions_sync_streaming_with_usage(server):
    with sync_client(server) as c:
        chunks = list(
            c.completions.create(
                model=MODEL,
                prompt=["say one two", "a story"],
                max_tokens=3,
                n=2,
                stream=True,
                stream_options={"include_usage": True},
            )
        )
    *parts, last = chunks
    assert last.choices == [] and last.usage is not None
    by_index: dict[int, str] = {}
    finish = {}
    for ch in parts:
        assert ch.usage is None
        for choice in ch.choices:
            by_index[choice.index] = by_index.get(choice.index, "") + choice.text
            if choice.finish_reason:
                finish[choice.index] = choice.finish_reason
    assert by_index == {0: "one two", 1: "one two", 2: "once upon a", 3: "once upon a"}
    assert finish == {0: "stop", 1: "stop", 2: "length", 3: "length"}
    assert last.usage.completion_tokens == 2 * 2 + 2 * 3
    assert last.usage.prompt_tokens == 3 + 2  # each prompt once, not once per choice


def test_chat_sync_and_streaming(server):
    messages = [{"role": "user", "content": "say hello there"}]
    with sync_client(server) as c:
        r = c.chat.completions.create(model=MODEL, messages=messages, n=2)
        stream = c.chat.completions.create(model=MODEL, messages=messages, stream=True)
        deltas = [ch.choices[0] for ch in stream]
    assert [ch.message.content for ch in r.choices] == ["hello there"] * 2
    assert r.choices[0].message.role == "assistant" and r.object == "chat.completion"
    assert deltas[0].delta.role == "assistant"
    assert "".join(d.delta.content or "" for d in deltas) == "hello there"
    assert deltas[-1].finish_reason == "stop"


def test_async_client_streams_and_answers_concurrently(server):
    async def main() -> tuple[list[str], str]:
        async with async_client(server) as c:
            plain = await asyncio.gather(
                *(
                    c.completions.create(model=MODEL, prompt=f"say word{i}", max_tokens=4)
                    for i in range(8)
                )
            )
            text = ""
            stream = await c.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "say streamed reply"}],
                stream=True,
            )
            async for ch in stream:
                if ch.choices:
                    text += ch.choices[0].delta.content or ""
            return [r.choices[0].text for r in plain], text

    plain, streamed = asyncio.run(main())
    assert plain == [f"word{i}" for i in range(8)]
    assert streamed == "streamed reply"


def test_raw_sse_framing(server):
    with httpx.stream(
        "POST",
        f"{server.base_url}/completions",
        json={"model": MODEL, "prompt": "say x", "stream": True},
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    first = json.loads(events[0][len("data: ") :])
    assert first["choices"][0]["text"] == "x" and first["object"] == "text_completion"


def test_errors_are_openai_shaped_with_status_codes(server):
    with sync_client(server) as c:
        with pytest.raises(openai.NotFoundError) as e404:
            c.completions.create(model="gpt-4", prompt="say x")
        with pytest.raises(openai.BadRequestError) as e400:
            c.completions.create(model=MODEL, prompt="say x", top_p=0)
        with pytest.raises(openai.BadRequestError) as window:
            c.completions.create(model=MODEL, prompt="say " + "w " * 40, max_tokens=40)
        with pytest.raises(openai.BadRequestError) as streamed:  # refused before the stream
            c.completions.create(model=MODEL, prompt="say " + "w " * 40, max_tokens=40, stream=True)
        with pytest.raises(openai.NotFoundError):
            c.get("/nowhere", cast_to=object)
    for err in (e404, e400, window):
        assert set(err.value.body) == {"message", "type", "param", "code"}
    assert e404.value.body["code"] == "model_not_found" and e404.value.body["param"] == "model"
    assert e400.value.body["param"] == "top_p"
    assert window.value.body["code"] == streamed.value.body["code"] == "context_length_exceeded"
    assert "64 tokens" in window.value.body["message"]
    assert server.llm.calls == []  # nothing above reached the model


def test_api_key_on_every_route():
    key = "s3cret-key"
    with OpenAIServer(double(), api_key=key) as s:
        with sync_client(s, key) as good:
            assert good.completions.create(model=MODEL, prompt="say ok").choices[0].text == "ok"
            assert [m.id for m in good.models.list().data] == [MODEL]
        with sync_client(s, "wrong") as bad:
            with pytest.raises(openai.AuthenticationError) as err:
                bad.completions.create(model=MODEL, prompt="say no")
            with pytest.raises(openai.AuthenticationError):
                bad.models.list()
        assert err.value.body["code"] == "invalid_api_key"
        for path in ("/models", "/health", "/nowhere", "/chat/completions"):
            r = httpx.request("GET" if "chat" not in path else "POST", s.base_url + path)
            assert r.status_code == 401, path
        assert httpx.get(
            s.base_url + "/health", headers={"Authorization": f"Bearer {key}"}
        ).is_success
        assert len(s.llm.calls) == 1


def test_key_comparison():
    assert key_matches("Bearer abc", "abc") and key_matches("bearer abc", "abc")
    assert not key_matches("Bearer abd", "abc") and not key_matches("abc", "abc")
    assert not key_matches(None, "abc") and not key_matches("Basic abc", "abc")


def test_listen_backlog_is_large(server):
    assert server.config.backlog >= 1024
    if shutil.which("ss") is None:
        pytest.skip("ss not installed")
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{server.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "LISTEN" and int(out[2]) >= 1024  # Send-Q of a listener: its backlog


def test_binds_loopback_by_default(server):
    assert server.host == "127.0.0.1" and server.base_url.startswith("http://127.0.0.1:")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_official_client_streams_from_served_hf_default(embedded_llm):
    with (
        OpenAIServer(embedded_llm) as s,
        openai.OpenAI(base_url=s.base_url, api_key="x", max_retries=0) as c,
    ):
        stream = c.completions.create(
            model="default",
            prompt="The capital of France is",
            max_tokens=6,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    text = "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert text.strip()
    assert chunks[-1].usage.completion_tokens <= 6
    assert chunks[-1].usage.prompt_tokens == embedded_llm.prompt_tokens("The capital of France is")


def test_an_unexpected_server_error_is_an_openai_shaped_500():
    class BadDecoder(ScriptedLLM):
        def decode(self, ids):
            raise RuntimeError("decoder bug")

    with OpenAIServer(BadDecoder()) as s, sync_client(s) as c:
        with pytest.raises(openai.InternalServerError) as err:
            c.completions.create(model=MODEL, prompt=[1, 2, 3])
        assert err.value.body["type"] == "server_error"
        assert c.completions.create(model=MODEL, prompt="still up").choices[0].text == ""
