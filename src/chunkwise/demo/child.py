"""Run one of the demo's child processes (training, evaluation in the vLLM environment) with
its output appended to a log, a progress callback every 2 s, and a clean stop on interrupt."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from chunkwise.demo.errors import DemoError


def run_logged(
    cmd: list[str],
    log_path: Path,
    desc: str,
    env: dict[str, str],
    tick: Callable[[], None] | None = None,
) -> None:
    """Run ``cmd`` with its output appended to ``log_path``, calling ``tick`` every 2 s;
    stopped (terminate, then kill) when this process is interrupted; a failure is one
    :class:`DemoError` with the log's last lines."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", **env}
    with open(log_path, "a", encoding="utf-8") as logf:
        logf.write(f"\n$ {' '.join(cmd)}\n")
        logf.flush()
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)
        try:
            while proc.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=2)
                if tick is not None:
                    tick()
        except BaseException:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    if proc.returncode != 0:
        tail = "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise DemoError(
            f"{desc} failed (exit {proc.returncode}); last lines of {log_path}:\n{tail}"
        )


def count_lines(files: list[Path]) -> int:
    """Non-empty lines in ``files``: a child's progress, read from the JSONL it appends to."""
    return sum(1 for f in files for line in f.read_text(encoding="utf-8").splitlines() if line)


__all__ = ["count_lines", "run_logged"]
