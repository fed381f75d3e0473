"""docs/synthesis.md's Slurm array: its ``chunkwise synth`` line, run as two array tasks (the
vLLM server replaced by a scripted teacher through the script's own ``TEACHER`` override), merges
both shards into one output folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MARKER = "<!-- slurm-synth:"


def slurm_script() -> str:
    text = (REPO / "docs" / "synthesis.md").read_text(encoding="utf-8")
    after = text[text.index(MARKER) :]
    return re.search(r"```bash\n(.*?)```", after, re.S).group(1)


def chunkwise_line(script: str) -> str:
    """The script's ``chunkwise synth`` command with its continuation lines."""
    lines = script.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("chunkwise synth"))
    cmd = []
    for line in lines[start:]:
        cmd.append(line.rstrip("\\").strip())
        if not line.endswith("\\"):
            break
    return " ".join(cmd)


def test_the_slurm_array_tasks_write_one_merged_output(tmp_path):
    script = slurm_script()
    assert "--data-parallel-size" in script and "#SBATCH --array" in script
    docs = tmp_path / "docs.jsonl"
    with docs.open("w") as f:
        for i in range(4):
            text = " ".join(f"Record {i} of the mill ledger, line {j}." for j in range(80))
            f.write(json.dumps({"messages": [{"role": "user", "content": text}]}) + "\n")
    # the script's lines that set variables, then its chunkwise line (no server, no sbatch)
    setup = "\n".join(x for x in script.splitlines() if re.match(r"(SHARED|PORT|TEACHER)=", x))
    line = chunkwise_line(script) + " --embedder hashing --window 1024"
    bindir = Path(sys.executable).parent
    for task in ("1", "0"):
        env = {
            **os.environ,
            "PATH": f"{bindir}:{os.environ['PATH']}",
            "SHARED": str(tmp_path),
            "TEACHER": "scripted:echo",
            "SLURM_ARRAY_TASK_COUNT": "2",
            "SLURM_ARRAY_TASK_ID": task,
        }
        res = subprocess.run(
            ["bash", "-c", f"set -euo pipefail\n{setup}\n{line}"],
            env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-2000:]
    out = tmp_path / "out"
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents"]["total"] == 4 and stats["documents"]["failed"] == 0
    assert stats["files"]["data"] == [
        "data/part-00000-of-00002.jsonl",
        "data/part-00001-of-00002.jsonl",
    ]
    assert (out / "dataset").is_dir()
