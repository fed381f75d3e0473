"""Issue #47 (a): `chunkwise eval` against an `openai:` server that dies mid-run.

Real processes throughout: the server is chunkwise's own OpenAI-compatible server over
``scripted:passkey`` (tests/llm/held_server.py, which answers N requests and then holds the next
one, so the kill lands mid-request at a known point; the restart is ``chunkwise serve``), the
eval is ``python -m chunkwise.cli eval``, the kill is SIGKILL. Nothing is timed: the test waits
for the predictions file to hold N lines, or for a process to exit.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HELD = REPO / "tests" / "llm" / "held_server.py"
N = 10  # examples
SECRETS = ("alice", "hunter2")

pytestmark = pytest.mark.timeout(300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_MODE": "disabled"}


def start_held(port: int, answer: int) -> subprocess.Popen:
    """The server that answers ``answer`` requests, then holds the next; up when it returns."""
    cmd = [sys.executable, str(HELD), "--port", str(port), "--answer", str(answer)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env())
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url == f"http://127.0.0.1:{port}/v1", (url, proc.poll())
    return proc


def start_served(port: int) -> subprocess.Popen:
    """`chunkwise serve` on ``port`` (the restart; the eval's retries find it when it is up)."""
    cmd = [sys.executable, "-m", "chunkwise.cli", "serve", "--model", "scripted:passkey"]
    return subprocess.Popen(
        [*cmd, "--port", str(port)], stderr=subprocess.DEVNULL, env=env(), cwd=REPO
    )


def wait_up(port: int, proc: subprocess.Popen) -> None:
    """Until the server on ``port`` accepts connections."""
    deadline = time.monotonic() + 120
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert proc.poll() is None, "the server exited"
        assert time.monotonic() < deadline, "the server never came up"
        time.sleep(0.05)


def start_eval(spec: str, out: Path, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "chunkwise.cli", "eval", f"--model={spec}"]
    cmd += ["--data=synthetic:400", "--tasks=passkey", f"--limit={N}", f"--output={out}"]
    cmd += ["--no-progress"]
    with log.open("w") as f:  # the file stays open in the child
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env(), cwd=REPO)


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def predictions(out: Path) -> list[dict]:
    """Every line of the predictions file; each must parse (nothing torn, nothing merged)."""
    path = out / "predictions" / "passkey.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def complete_lines(out: Path) -> int:
    path = out / "predictions" / "passkey.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def wait_for_lines(out: Path, n: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 120
    while complete_lines(out) < n:
        assert proc.poll() is None, f"eval exited early:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, "no predictions came"
        time.sleep(0.02)


def wait_for_text(log: Path, text: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while text not in log.read_text():
        assert proc.poll() is None, f"eval exited early:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"never logged {text!r}"
        time.sleep(0.02)


def assert_complete(out: Path) -> None:
    recs = predictions(out)
    ids = [r["id"] for r in recs]
    assert len(ids) == len(set(ids)) == N, ids
    assert not [r for r in recs if r.get("error")]
    results = json.loads((out / "results.json").read_text())
    assert results["results"]["passkey"]["n"] == N
    assert results["results"]["passkey"]["score"] == 100.0  # every answer is the real one


def test_eval_survives_a_server_killed_and_restarted(tmp_path):
    port = free_port()
    out, log = tmp_path / "run", tmp_path / "eval.log"
    servers = [start_held(port, answer=4)]
    ev = start_eval(f"openai:passkey@http://127.0.0.1:{port}/v1?retry_seconds=120", out, log)
    try:
        wait_for_lines(out, 4, ev, log)  # the 5th request is now held by the server (or sent)
        kill(servers[0])
        assert complete_lines(out) == 4  # killed mid-run
        wait_for_text(log, "refuses connections", ev)  # the eval now waits for the server
        servers.append(start_served(port))  # back on the same port
        rc = ev.wait(240)
    finally:
        for p in [ev, *servers]:
            kill(p)
    assert rc == 0, log.read_text()[-3000:]
    assert_complete(out)


def test_eval_exits_with_one_line_naming_a_server_that_never_returns(tmp_path):
    port = free_port()
    out, log = tmp_path / "run", tmp_path / "eval.log"
    spec = f"openai:passkey@http://alice:hunter2@127.0.0.1:{port}/v1?retry_seconds=2"
    server = start_held(port, answer=3)
    ev = start_eval(spec, out, log)
    try:
        wait_for_lines(out, 3, ev, log)
        kill(server)
        rc = ev.wait(120)  # bounded: retry_seconds, then one error
    finally:
        kill(ev)
        kill(server)
    text = log.read_text()
    assert rc == 2, text[-3000:]
    assert "Traceback" not in text
    errors = [ln for ln in text.splitlines() if ": error: " in ln]
    assert len(errors) == 1, text[-3000:]
    assert f"the server at http://***@127.0.0.1:{port}/v1 went away" in errors[0]
    for s in SECRETS:
        assert s not in text
    done = predictions(out)  # intact: every line parses, each id once
    assert len(done) == len({r["id"] for r in done}) == 3

    server = start_served(port)  # the server is back: the same command completes the run
    try:
        wait_up(port, server)  # a server never reached fails fast; this one must be up
        rerun = start_eval(spec, out, tmp_path / "rerun.log")
        rc = rerun.wait(240)
    finally:
        kill(server)
    assert rc == 0, (tmp_path / "rerun.log").read_text()[-3000:]
    assert_complete(out)
    assert [r["id"] for r in predictions(out)][:3] == [r["id"] for r in done]
