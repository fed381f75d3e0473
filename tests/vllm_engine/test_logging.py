"""vLLM's own log goes to stderr when chunkwise imports it, so that what our commands print
on stdout (``chunkwise answer --json``) stays parseable; a stream the caller chose is kept."""

from __future__ import annotations

import os
import subprocess
import sys

#: vLLM 0.32 configures its logging when an engine's arguments are built; the probe calls that
#: step directly instead of paying for an engine
PROBE = (
    "from chunkwise.llm.vllm_backend import _import_vllm; _import_vllm(); "
    "from vllm.logger import _configure_vllm_root_logger as configure, init_logger; configure(); "
    "init_logger('vllm.probe').warning('probe-line')"
)


def _run(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env
    )


def test_vllm_logs_to_stderr_unless_the_caller_chose_a_stream():
    env = {k: v for k, v in os.environ.items() if k != "VLLM_LOGGING_STREAM"}
    r = _run(env)
    assert r.returncode == 0, r.stderr[-2000:]
    line = next(x for x in r.stderr.splitlines() if "probe-line" in x)
    assert "WARNING" in line  # vLLM's own handler wrote it, not Python's last resort
    assert "probe-line" not in r.stdout
    r = _run({**env, "VLLM_LOGGING_STREAM": "ext://sys.stdout"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "probe-line" in r.stdout
