"""``python -m chunkwise.demo.evaluate OUT LABEL [LABEL ...]``: these models' evaluations of a
demo run, one after another in this interpreter (the demo starts it in the vLLM environment
when it evaluates on vLLM).

The demo's settings are read back from its ledger (``OUT/demo.json``), so this process
evaluates exactly what the demo would, and skips runs that already finished.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from chunkwise.demo.pipeline import Demo
    from chunkwise.demo.sizes import DemoSize
    from chunkwise.errors import BadInput
    from chunkwise.io import read_json
    from chunkwise.llm.vllm_backend import exit_on_sigterm

    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m chunkwise.demo.evaluate OUT LABEL [LABEL ...]", file=sys.stderr)
        return 2
    out, labels = Path(args[0]), args[1:]
    state = read_json(out / "demo.json", "demo ledger")
    if not isinstance(state, dict) or not all(k in state for k in ("sizes", "model", "seed")):
        raise BadInput(f"{out / 'demo.json'} is not a demo ledger (no sizes, model and seed)")
    sizes = {k: tuple(v) if isinstance(v, list) else v for k, v in state["sizes"].items()}
    known = set(DemoSize.__dataclass_fields__)
    size = DemoSize(**{k: v for k, v in sizes.items() if k in known})
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


def _cli() -> int:
    from chunkwise.errors import ChunkwiseError

    try:
        return main()
    except ChunkwiseError as e:  # one line, not a traceback; the demo shows this log's tail
        print(f"chunkwise.demo.evaluate: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(_cli())
