"""SIGTERM unwinds a process that started a vLLM engine, so the engine's processes go with it
(Python's default SIGTERM ends the interpreter at once and left them running)."""

from __future__ import annotations

import signal
import subprocess
import sys

PROBE = """
import os, signal, sys
from chunkwise.llm.sigterm import exit_on_sigterm
installed = exit_on_sigterm()
print("installed", installed, flush=True)
try:
    os.kill(os.getpid(), signal.SIGTERM)
    signal.pause()
finally:
    print("unwound", flush=True)  # where the engine is closed
"""

KEPT = """
import signal
from chunkwise.llm.sigterm import exit_on_sigterm
def mine(signum, frame):
    pass
signal.signal(signal.SIGTERM, mine)
print("installed", exit_on_sigterm(), signal.getsignal(signal.SIGTERM) is mine)
"""


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_sigterm_runs_the_finally_blocks_and_exits_143():
    out = run(PROBE)
    assert out.stdout.split() == ["installed", "True", "unwound"], out.stderr[-1000:]
    assert out.returncode == 128 + signal.SIGTERM


def test_a_callers_own_sigterm_handler_is_kept():
    out = run(KEPT)
    assert out.stdout.split() == ["installed", "False", "True"], out.stderr[-1000:]
