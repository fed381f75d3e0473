"""``python -m chunkwise.demo.evaluate OUT LABEL [LABEL ...]``: these models' evaluations of a
demo run, one after another in this interpreter (the demo starts it in the vLLM environment
when it evaluates on vLLM).

The demo's settings are read back from its ledger (``OUT/demo.json``), so this process
evaluates exactly what the demo would, and skips runs that already finished.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    from chunkwise.demo.pipeline import Demo
    from chunkwise.errors import BadInput
    from chunkwise.io import read_json
    from chunkwise.llm.sigterm import exit_on_sigterm

    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m chunkwise.demo.evaluate OUT LABEL [LABEL ...]", file=sys.stderr)
        return 2
    out, labels = Path(args[0]), args[1:]
    ledger = out / "demo.json"
    state = read_json(ledger, "demo ledger")
    if not isinstance(state, dict) or not all(k in state for k in ("sizes", "model", "seed")):
        raise BadInput(f"{ledger} is not a demo ledger (no sizes, model and seed)")
    size = _size_of(ledger, state["sizes"])
    demo = Demo(out, size, model=state["model"], seed=state["seed"], engine="vllm")
    demo.state = state  # the ledger the parent process owns: read, never written here
    models = {m.label: m for m in demo.eval_models()}
    unknown = [label for label in labels if label not in models]
    if unknown:
        raise BadInput(f"no model {unknown[0]!r} in this demo; known: {', '.join(models)}")
    exit_on_sigterm()
    for label in labels:
        demo.evaluate_model(models[label], "vllm")
    return 0


#: what each annotation of a DemoSize field accepts, as the ledger's JSON holds it
_KINDS = {
    "str": lambda v: isinstance(v, str),
    "str | None": lambda v: v is None or isinstance(v, str),
    "int": lambda v: type(v) is int,
    "float": lambda v: type(v) in (int, float),
    "tuple[str, ...]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "tuple[int, ...]": lambda v: isinstance(v, list) and all(type(x) is int for x in v),
}


def _size_of(ledger: Path, sizes: object) -> Any:
    """The DemoSize the ledger's ``sizes`` record; one BadInput naming the ledger and the
    setting when it is not one."""
    from dataclasses import MISSING, fields

    from chunkwise.demo.sizes import DemoSize
    from chunkwise.errors import BadInput

    if not isinstance(sizes, dict):
        raise BadInput(f"{ledger}: 'sizes' is not a mapping of the demo size's settings")
    values = {}
    for f in fields(DemoSize):
        if f.name not in sizes:
            if f.default is MISSING:
                raise BadInput(f"{ledger}: sizes.{f.name} is missing")
            continue
        v = sizes[f.name]
        if not _KINDS.get(str(f.type), lambda _: True)(v):
            raise BadInput(f"{ledger}: sizes.{f.name} is not a value of type {f.type}")
        values[f.name] = tuple(v) if isinstance(v, list) else v
    return DemoSize(**values)


def _cli() -> int:
    from chunkwise.errors import ChunkwiseError

    try:
        return main()
    except ChunkwiseError as e:  # one line, not a traceback; the demo shows this log's tail
        print(f"chunkwise.demo.evaluate: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_cli())
