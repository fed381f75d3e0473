"""The demo's evaluations: the models and decodings it compares, the engine they run on (hf, or
vLLM here or in the environment `make vllm` sets up), that environment's child process, and the
scores read back from their results."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.demo.child import count_lines, run_logged
from chunkwise.demo.errors import DemoError
from chunkwise.errors import BadInput

#: the vLLM environment `make vllm` creates beside the project's own (.venv)
VLLM_VENV = ".venv-vllm"


@dataclass(frozen=True)
class EvalModel:
    label: str
    spec: str
    #: decoding -> strategy options
    decodings: dict[str, dict[str, Any]]


def engine_spec(spec: str, engine: str) -> str:
    """``spec`` on ``engine``: ``hf:default`` -> ``vllm:default``, a folder -> ``vllm:<folder>``."""
    if engine == "hf":
        return spec
    target = spec[3:] if spec.startswith("hf:") else spec
    return f"vllm:{target}"


def has_vllm() -> bool:
    """Whether this interpreter can import vLLM."""
    return importlib.util.find_spec("vllm") is not None


def vllm_python() -> Path | None:
    """The interpreter of the vLLM environment beside this one (`make vllm` makes ``.venv-vllm``
    next to ``.venv``), when it is set up."""
    venv = Path(sys.prefix).parent / VLLM_VENV
    ok = (venv / "bin" / "python").is_file() and (venv / ".chunkwise-installed").is_file()
    return venv / "bin" / "python" if ok else None


def resolve_engine(engine: str) -> str:
    """hf or vllm: what ``--engine`` (auto, hf or vllm) resolves to here."""
    if engine not in ("auto", "hf", "vllm"):
        raise BadInput(f"--engine must be auto, hf or vllm, got {engine!r}")
    if engine == "auto":
        return "vllm" if has_vllm() or vllm_python() is not None else "hf"
    if engine == "vllm" and not has_vllm() and vllm_python() is None:
        raise BadInput("--engine vllm: vLLM is not installed here; run `make vllm` first")
    return engine


def reference_available(spec: str) -> bool:
    """Whether a packaged adapter (``hf:default-mr``) ships in this install."""
    from chunkwise.llm import default_mr

    name = spec.split(":", 1)[-1]
    if name not in default_mr.PACKAGED:
        return True  # any other spec is the user's to provide
    return all((default_mr.package_dir(name) / f).is_file() for f in default_mr.ADAPTER_FILES)


@dataclass
class Progress:
    """A progress bar over answered documents, read from ``<output>/predictions/*.jsonl``."""

    outputs: list[Path]
    total: int

    def done(self) -> int:
        return count_lines([f for o in self.outputs for f in (o / "predictions").glob("*.jsonl")])


def evaluate_in(python: Path | None, out: Path, labels: list[str], progress: Progress) -> None:
    """The models' evaluations in the vLLM environment's interpreter, one process for all (the
    engine is closed when it ends); its output goes to ``<out>/eval/vllm.log``."""
    if python is None:
        raise DemoError("vLLM is not set up (run `make vllm`), or pass --engine hf")
    cmd = [str(python), "-m", "chunkwise.demo.evaluate", str(out), *labels]
    from tqdm import tqdm

    with tqdm(total=progress.total, desc="evaluate", unit="doc", dynamic_ncols=True) as bar:

        def tick() -> None:
            bar.update(max(0, min(progress.done(), progress.total) - bar.n))

        run_logged(cmd, out / "eval" / "vllm.log", "evaluating on vLLM", {}, tick)


def result_cells(path: Path) -> dict[str, dict[str, Any]]:
    """``{task: {score, ci95, n, seconds}}`` of an evaluation's results.json; a file that is
    not one (hand-edited, another tool's) is one :class:`BadInput` naming it."""
    from chunkwise.io import read_json

    res = read_json(path, "results file")
    results = res.get("results") if isinstance(res, dict) else None
    bad = [
        t
        for t, r in (results if isinstance(results, dict) else {}).items()
        if not isinstance(r, dict) or type(r.get("score")) not in (int, float)
    ]
    if not isinstance(results, dict) or bad:
        where = f"results.{bad[0]}.score" if bad else "results"
        raise BadInput(
            f"{path}: no {where} (not a chunkwise eval results file); delete it to evaluate "
            "that model again"
        )
    timing = res.get("timing")
    seconds = timing.get("session_seconds") if isinstance(timing, dict) else None
    return {
        task: {
            "score": r["score"],
            "ci95": r.get("score_ci95"),
            "n": r.get("n"),
            "seconds": seconds,
        }
        for task, r in results.items()
    }


__all__ = [
    "EvalModel",
    "Progress",
    "engine_spec",
    "evaluate_in",
    "has_vllm",
    "reference_available",
    "resolve_engine",
    "result_cells",
    "vllm_python",
]
