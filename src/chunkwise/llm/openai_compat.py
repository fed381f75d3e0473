"""``openai`` backend: any OpenAI-compatible HTTP server (vLLM, SGLang, llama.cpp server, OpenAI).

Spec form (options after ``?``, joined by ``&``)::

    openai:MODEL@http://127.0.0.1:8000/v1?api=completions&concurrency=8&tokenizer=hf:default
    openai:gpt-4o-mini?api=chat                  (no ``@URL``: https://api.openai.com/v1)

Its options (``api``, ``concurrency``, ``timeout``, ``retries``, ``retry_seconds``, ``backoff``,
``backoff_max``, ``ctx``, ``tokenizer``, ``key_env``) are declared, with their defaults and
meaning, in :class:`chunkwise.llm.backend_options.OpenAIOptions`.

Retried: connection errors, timeouts, HTTP 408, 429 and 5xx, and 2xx bodies that are not the
expected JSON. Other 4xx answers fail at once. A request that runs out of attempts raises
:class:`~chunkwise.errors.LLMRequestError` naming it (index, prompt excerpt, URL, last error);
the other requests of that ``generate`` call are cancelled.

A server that has answered this backend once and then refuses connections is taken to be
restarting: requests keep trying it (back-off up to ``backoff_max``) for ``retry_seconds``, so a
long eval survives a server restart; if it is not back by then the error names the server. A
server never reached (a wrong URL, not started yet) fails after ``retries`` as before.

The API key is sent as a bearer token and nowhere else: it is never logged and is scrubbed from
every error text (servers sometimes echo what they were sent).

``generate`` is a plain blocking call: requests run on a private asyncio loop in a background
thread, so it works from sync code and from inside a running event loop alike, and the HTTP
connections are reused across calls.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import math
import os
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from chunkwise.errors import BadInput, LLMRequestError, MissingDependency
from chunkwise.llm.backend_options import OpenAIOptions
from chunkwise.llm.base import LLM, Completion, Prompt, Request
from chunkwise.llm.openai_wire import (
    DEFAULT_URL,
    Fatal,
    Refused,
    Retry,
    excerpt,
    parse_response,
    prompt_excerpt,
    request_body,
    split_target,
)
from chunkwise.llm.spec import ModelSpec, parse_spec, spec_options

log = logging.getLogger(__name__)

APIS = ("completions", "chat")
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
#: the shortest pause between tries at a server that refuses connections (even with ?backoff=0)
_MIN_OUTAGE_DELAY = 0.1


@dataclass
class _Outage:
    """One request's view of a server that refuses connections: since when, how many tries."""

    since: float | None = None
    refusals: int = 0


class _LoopThread:
    """A private asyncio event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="chunkwise-openai", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Any) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


class OpenAICompatLLM(LLM):
    def __init__(
        self,
        model: str,
        base_url: str = DEFAULT_URL,
        *,
        api: str = "completions",
        concurrency: int = 8,
        timeout: float = 300.0,
        retries: int = 4,
        retry_seconds: float = 120.0,
        backoff: float = 0.5,
        backoff_max: float = 30.0,
        ctx: int = 8192,
        api_key: str | None = None,
        tokenizer: str | LLM | None = None,
    ):
        if api not in APIS:
            raise BadInput(f"api must be one of {', '.join(APIS)}, got {api!r}")
        if (
            concurrency < 1
            or retries < 0
            or timeout <= 0
            or backoff < 0
            or ctx < 1
            or not 0 <= retry_seconds < math.inf
        ):
            raise BadInput(
                "openai backend: need concurrency >= 1, retries >= 0, timeout > 0, backoff >= 0, "
                f"ctx >= 1, retry_seconds >= 0 (got {concurrency}, {retries}, {timeout}, "
                f"{backoff}, {ctx}, {retry_seconds})"
            )
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api = api
        self.chat = api == "chat"
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_attempts = retries + 1
        self.retry_seconds = retry_seconds
        #: whether the server has answered this backend (a refusal after that is a restart)
        self._reached = False
        self.backoff = backoff
        self.backoff_max = backoff_max
        self._window = ctx
        self.__key = api_key or None
        self._tokenizer_spec: str | None = None
        self._tokenizer: LLM | None = None
        self._owns_tokenizer = False
        if isinstance(tokenizer, LLM):
            self._tokenizer = tokenizer
        elif tokenizer:
            parse_spec(tokenizer)  # fail now on a malformed spec; load on first use
            self._tokenizer_spec = tokenizer
        self._tok_lock = threading.Lock()
        self._fallback: Any = None
        self._lock = threading.Lock()
        self._runner: _LoopThread | None = None
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None

    def __repr__(self) -> str:  # never shows the key
        return (
            f"OpenAICompatLLM(model={self.model!r}, base_url={self._redact(self.base_url)!r}, "
            f"api={self.api!r})"
        )

    # -- tokens ---------------------------------------------------------------------------
    @property
    def context_window(self) -> int:
        return self._window

    def _counter(self) -> Any:
        """The delegate tokenizer backend, or the conservative word-piece estimate."""
        if self._tokenizer is not None:
            return self._tokenizer
        if self._tokenizer_spec is not None:
            with self._tok_lock:
                if self._tokenizer is None:
                    from chunkwise.llm.loading import load_llm

                    self._tokenizer = load_llm(self._tokenizer_spec)
                    self._owns_tokenizer = True
            return self._tokenizer
        if self._fallback is None:
            from chunkwise.text import WordPieceCounter

            self._fallback = WordPieceCounter(scale=1.3)
        return self._fallback

    def count_tokens(self, text: str) -> int:
        return self._counter().count_tokens(text)

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        counter = self._counter()
        batched = getattr(counter, "count_tokens_batch", None)
        if batched is not None:
            return list(batched(list(texts)))
        return [counter.count_tokens(t) for t in texts]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        counter = self._counter()
        if not hasattr(counter, "token_offsets"):
            raise NotImplementedError(f"tokenizer {self._tokenizer_spec!r} gives no token offsets")
        return counter.token_offsets(text)

    def encode(self, text: str) -> list[int]:
        if not (self._tokenizer or self._tokenizer_spec):
            raise NotImplementedError("openai backend without ?tokenizer= exposes no token ids")
        return self._counter().encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        if not (self._tokenizer or self._tokenizer_spec):
            raise NotImplementedError("openai backend without ?tokenizer= exposes no token ids")
        return self._counter().decode(ids)

    def prompt_tokens(self, prompt: Prompt) -> int:
        if self._tokenizer is not None or self._tokenizer_spec is not None:
            return self._counter().prompt_tokens(prompt)
        return super().prompt_tokens(prompt)

    # -- secrets --------------------------------------------------------------------------
    def _redact(self, text: str) -> str:
        from chunkwise.redact import redact

        key = self.__key
        if key and key in text:
            text = text.replace(key, "[redacted]")
        return redact(text)  # credentials in the base URL (user:pass@, ?api_key=)

    # -- generation -----------------------------------------------------------------------
    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        with self._lock:
            if self._runner is None:
                self._runner = _LoopThread()
            runner = self._runner
        if threading.current_thread() is runner.thread:  # pragma: no cover - misuse
            raise RuntimeError("OpenAICompatLLM.generate called from its own event loop")
        fut = runner.submit(self._run_all(list(requests)))
        try:
            out = fut.result()
        except BaseException:
            fut.cancel()  # e.g. KeyboardInterrupt: stop the in-flight requests too
            raise
        for req, c in zip(requests, out, strict=True):  # counts the server did not report
            if c.prompt_tokens < 0:
                c.prompt_tokens = self.prompt_tokens(req.prompt)
            if c.completion_tokens < 0:
                c.completion_tokens = self.count_tokens(c.text)
        return out

    def _ensure_client(self) -> None:
        if self._client is not None:
            return
        try:
            import httpx
        except ImportError:  # pragma: no cover - a declared dependency
            raise MissingDependency("httpx", "pip install httpx") from None
        headers = {"Content-Type": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        host = urlsplit(self.base_url).hostname or ""
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(self.timeout),
            limits=httpx.Limits(
                max_connections=self.concurrency, max_keepalive_connections=self.concurrency
            ),
            # proxies from the environment never apply to a server on this machine
            trust_env=host not in _LOOPBACK,
        )
        self._sem = asyncio.Semaphore(self.concurrency)

    async def _run_all(self, requests: list[Request]) -> list[Completion]:
        self._ensure_client()
        tasks = [asyncio.ensure_future(self._one(i, r)) for i, r in enumerate(requests)]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            pending = [t for t in tasks if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        # read every task's exception (asyncio logs a traceback for any never read); the
        # lowest failing index names the error
        errors = [t.exception() for t in tasks if not t.cancelled()]
        for e in errors:
            if e is not None:
                raise e
        return [t.result() for t in tasks]

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        base = min(self.backoff_max, self.backoff * 2 ** (attempt - 1))
        delay = base * random.uniform(0.5, 1.5)
        if retry_after:
            with contextlib.suppress(ValueError):  # an HTTP date: keep our own schedule
                delay = max(delay, min(float(retry_after), self.backoff_max))
        return delay

    async def _post(self, url: str, body: dict[str, Any]) -> Any:
        """One attempt: the HTTP response, or :class:`Refused` / :class:`Retry`."""
        import httpx

        assert self._client is not None
        try:
            resp = await asyncio.wait_for(self._client.post(url, json=body), timeout=self.timeout)
        except (TimeoutError, httpx.TimeoutException) as e:
            raise Retry(
                f"no answer within the {self.timeout:g} s timeout ({type(e).__name__})"
            ) from None
        except httpx.ConnectError as e:
            raise Refused(f"ConnectError: {excerpt(e, 200)}") from None
        except (httpx.TransportError, httpx.DecodingError) as e:
            raise Retry(f"{type(e).__name__}: {excerpt(e, 200)}") from None
        self._reached = True
        return resp

    async def _one(self, index: int, req: Request) -> Completion:
        url, body, chat = request_body(self.model, self.base_url, self.api, req)
        assert self._client is not None and self._sem is not None
        last = "no attempt made"
        started: float | None = None
        attempts = failures = 0  # failures: the attempts charged to ?retries=
        outage = _Outage()
        while True:
            attempts += 1
            retry_after = None
            try:
                async with self._sem:
                    if started is None:
                        started = time.perf_counter()
                    resp = await self._post(url, body)
                status = resp.status_code
                if 200 <= status < 300:
                    return parse_response(resp, req, chat, time.perf_counter() - started)
                detail = f"HTTP {status}: {excerpt(resp.text, 200)}"
                if status in (408, 429) or status >= 500:
                    retry_after = resp.headers.get("retry-after")
                    raise Retry(detail)
                raise Fatal(detail)
            except Refused as e:
                last = str(e)
                if self._reached and self.retry_seconds > 0:
                    await self._wait_for_restart(index, req, outage, attempts, last)
                    continue
                failures += 1
            except Retry as e:
                last = str(e)
                failures += 1
                outage = _Outage()
            except Fatal as e:
                raise self._error(index, req, url, attempts, str(e)) from None
            if failures >= self.max_attempts:
                raise self._error(index, req, url, attempts, last)
            delay = self._delay(failures, retry_after)
            log.warning(
                "%s",
                self._redact(
                    f"request {index} to {url}: attempt {failures}/{self.max_attempts} failed "
                    f"({last}); retrying in {delay:.2f} s"
                ),
            )
            await asyncio.sleep(delay)

    async def _wait_for_restart(
        self, index: int, req: Request, outage: _Outage, attempts: int, why: str
    ) -> None:
        """Back off before the next try at a server that refused a connection after it had
        answered; raise the error naming the server once ``retry_seconds`` have passed."""
        now = time.monotonic()
        if outage.since is None:
            outage.since = now
            log.warning(
                "%s",
                self._redact(
                    f"request {index}: the server at {self.base_url} refuses connections ({why}); "
                    f"waiting up to {self.retry_seconds:g} s for it to come back"
                ),
            )
        waited = now - outage.since
        left = self.retry_seconds - waited
        if left <= 0:
            raise self._down_error(index, req, attempts, waited, why)
        outage.refusals += 1
        await asyncio.sleep(min(left, max(_MIN_OUTAGE_DELAY, self._delay(outage.refusals, None))))

    def _down_error(
        self, index: int, req: Request, attempts: int, waited: float, why: str
    ) -> LLMRequestError:
        msg = (
            f"the server at {self.base_url} went away: it has refused connections for "
            f"{waited:.1f} s ({attempts} attempts of request {index}, "
            f"{prompt_excerpt(req.prompt)!r}; last: {why}). Start it again and rerun (eval and "
            f"synth resume where they stopped), or wait longer with ?retry_seconds= "
            f"(now {self.retry_seconds:g})"
        )
        return LLMRequestError(self._redact(msg))

    def _error(
        self, index: int, req: Request, url: str, attempts: int, why: str
    ) -> LLMRequestError:
        n = f"{attempts} attempt" + ("s" if attempts != 1 else "")
        if why.startswith(("HTTP 401", "HTTP 403")):
            hint = " Check the API key (OPENAI_API_KEY, or the variable ?key_env= names)."
        elif why.startswith("HTTP 404"):
            hint = " Check the model name and the URL (it usually ends in /v1)."
        elif attempts > 1:
            hint = " Check that the server is up; if it is just slow, raise ?timeout= or ?retries=."
        else:
            hint = ""
        msg = (
            f"request {index} ({prompt_excerpt(req.prompt)!r}) to {url} failed after {n}: "
            f"{why}.{hint}"
        )
        return LLMRequestError(self._redact(msg))

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            runner, self._runner = self._runner, None
        if runner is not None:
            client, self._client, self._sem = self._client, None, None
            if client is not None:
                try:
                    runner.submit(client.aclose()).result(timeout=10)
                except Exception as e:  # pragma: no cover - best effort on the way out
                    log.debug("closing the HTTP client: %s", self._redact(str(e)))
            runner.stop()
        if self._tokenizer is not None and self._owns_tokenizer:
            self._tokenizer.close()
            self._tokenizer, self._owns_tokenizer = None, False


def load(spec: ModelSpec) -> LLM:
    o = spec_options(spec, OpenAIOptions)
    model, url = split_target(spec.target, spec.raw)
    key_env = o.key_env
    if key_env is not None:
        api_key = os.environ.get(key_env)
        if not api_key:
            raise BadInput(f"model spec {spec.raw!r}: environment variable {key_env} is not set")
    else:
        api_key = os.environ.get("OPENAI_API_KEY") or None
        if api_key is None and (urlsplit(url).hostname or "").endswith("openai.com"):
            raise BadInput(
                f"{url} needs an API key: set OPENAI_API_KEY (or name a variable with ?key_env=)"
            )
    return OpenAICompatLLM(
        model,
        url,
        api=o.api,
        concurrency=o.concurrency,
        timeout=o.timeout,
        retries=o.retries,
        retry_seconds=o.retry_seconds,
        backoff=o.backoff,
        backoff_max=o.backoff_max,
        ctx=o.ctx,
        api_key=api_key,
        tokenizer=o.tokenizer or None,
    )
