"""The real vLLM engine on CPU, from ``.venv-vllm`` (``make vllm``; ``make test`` runs these).

One engine and one ``vllm serve`` process per test session, shared by every test (each costs
~45-100 s to start; the server starts at collection, alongside the first tests). Without vLLM
installed (the main ``.venv``) nothing here is collected.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chunkwise.llm.cpu import cpu_dtype

_spec = importlib.util.find_spec("vllm")
if _spec is None or _spec.origin is None:  # not installed (None: a namespace package)
    collect_ignore_glob = ["test_*.py"]

#: KV cache per engine in GiB: 1 holds ~50K tokens of the embedded model, plenty for tests
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
SERVED_NAME = "gemma"
#: fp32, as hf:default runs: the parity tests compare the engines, not bf16 rounding (on an
#: AMX Xeon vLLM's default bf16 gave 17/20 identical greedy outputs against hf's fp32; on an
#: AVX2 EPYC, where both run fp32, 20/20)
#: inproc=0: the session's engine in its own processes, so that the tests' short-lived engines
#: can each run in this process (only one may at a time: vLLM's parallel groups are module
#: globals), which starts them in about half the time
VLLM_SPEC = "vllm:default?max_model_len=8192&dtype=float32&inproc=0"


@pytest.fixture(scope="session")
def vllm_llm():
    """``vllm:default`` in this process, loaded once."""
    from chunkwise.llm import load_llm

    llm = load_llm(VLLM_SPEC)
    yield llm
    llm.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: the embedded model is a base model without a chat template; the chat endpoint needs one
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}"
    "<end_of_turn>\n{% endfor %}<start_of_turn>model\n"
)


def serve_command(
    model_dir: Path, port: int, chat_template: Path, max_model_len: int = 8192
) -> list[str]:
    """The README's command: vLLM's OpenAI-compatible server on loopback, CPU settings. (The
    ``vllm serve`` script of vllm-cpu 0.32.0 exits at start: it asks for the version of a
    package named ``vllm``, which vllm-cpu is not; the server module runs the same server.)"""
    return [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        cpu_dtype(),
        "--max-model-len",
        str(max_model_len),
        "--enforce-eager",
        "--distributed-executor-backend",  # one rank: its worker in the engine's process
        "uni",
        "--chat-template",
        str(chat_template),
    ]


class _Server:
    """The ``vllm serve`` process: started as soon as collection shows a test that needs it, so
    that its ~100 s start (mostly single-threaded imports) overlaps the tests that run first."""

    proc: subprocess.Popen | None = None
    port = 0
    log: Path | None = None

    @classmethod
    def start(cls, tmp_path_factory) -> None:
        if cls.proc is not None:
            return
        from chunkwise.llm.embedded import converted_dir

        folder = tmp_path_factory.mktemp("vllm-serve")
        cls.port, cls.log = _free_port(), folder / "server.log"
        template = folder / "chat.jinja"
        template.write_text(CHAT_TEMPLATE)
        with open(cls.log, "wb") as fh:
            cls.proc = subprocess.Popen(
                serve_command(converted_dir(), cls.port, template),
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends its engine too
            )

    @classmethod
    def stop(cls) -> None:
        """End the server and every process it started (the engine core and its worker, ~4 GB
        together, outlive a server killed alone and would crowd out the tests after it)."""
        if cls.proc is None:
            return
        stop_group(cls.proc)
        cls.proc = None


def stop_group(proc: subprocess.Popen) -> None:
    """End a process started with ``start_new_session=True`` and every process it started."""
    group = proc.pid  # a new session: its group id is its pid
    _signal_group(group, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _signal_group(group, signal.SIGKILL)
        proc.wait()
    _signal_group(group, signal.SIGKILL)  # children that outlived a clean exit


def wait_healthy(proc: subprocess.Popen, port: int, log: Path, timeout: float = 300) -> None:
    """Poll a starting server's health endpoint until it answers 200; fail the test with the
    end of its log if it exits or is not up within ``timeout`` seconds."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"vllm serve not up after {timeout:.0f} s:\n{log.read_text()[-3000:]}")
        time.sleep(1)


def _signal_group(group: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, sig)


def pytest_collection_finish(session) -> None:
    if any("vllm_server" in getattr(item, "fixturenames", ()) for item in session.items):
        _Server.start(session.config._tmp_path_factory)


def pytest_sessionfinish(session) -> None:
    _Server.stop()


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory):
    """A real ``vllm serve`` of the embedded model on loopback; yields the ``openai:`` spec
    that reaches it (``openai:MODEL@http://127.0.0.1:PORT/v1``)."""
    _Server.start(tmp_path_factory)  # (already started at collection)
    proc, port, log = _Server.proc, _Server.port, _Server.log
    try:
        wait_healthy(proc, port, log)
        yield f"openai:{SERVED_NAME}@http://127.0.0.1:{port}/v1"
    finally:
        _Server.stop()
