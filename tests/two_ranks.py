"""Two CPU ranks under ``accelerate launch``: the one command the multi-process tests share.

``accelerate launch --cpu`` starts a single process (ARCHITECTURE's known trap), so the tests
launch ``--multi_gpu`` with two processes on gloo and no visible GPU, and assert the world size
inside the run so that a silent single-process run fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ACCELERATE = Path(sys.executable).with_name("accelerate")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accelerate_launch(*script_and_args: str, port: int | str = 0) -> list[str]:
    """The ``accelerate launch`` command running ``script_and_args`` on two CPU ranks."""
    return [
        str(ACCELERATE),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(port),
        *script_and_args,
    ]


def launch_eval(out: Path, *extra: str) -> subprocess.CompletedProcess:
    """eval/run.py on two CPU ranks: the passkey smoke recipe with a scripted model into ``out``."""
    cmd = accelerate_launch(
        str(REPO / "eval" / "run.py"),
        "--config",
        str(REPO / "recipes" / "eval" / "passkey-smoke.yaml"),
        "--model=scripted:passkey",
        "--data=synthetic:400",
        f"--output={out}",
        "--no-progress",
        *extra,
        port=free_port(),
    )
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
