"""Data-parallel evaluation from a recipe (see recipes/eval/README.md).

    accelerate launch --multi_gpu --num_processes 8 eval/run.py \
        --config recipes/eval/infinitebench-full.yaml [--key=value ...]
    python eval/run.py --config recipes/eval/passkey-smoke.yaml        # one process

Every process loads the model once and answers examples rank::world into its own shard file;
rank 0 waits for the others, merges the shards into predictions/<task>.jsonl, scores, and
writes results.json. Rerun the same command to resume an interrupted run.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="chunkwise evaluation with a recipe; --key=value overrides any recipe key",
        allow_abbrev=False,
    )
    parser.add_argument("--config", required=True, help="recipe YAML (recipes/eval/*.yaml)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args, overrides = parser.parse_known_args(argv)

    from chunkwise.config import load_config
    from chunkwise.errors import ChunkwiseError
    from chunkwise.eval.distributed import from_env
    from chunkwise.eval.runner import EvalConfig, run_eval
    from chunkwise.logs import setup_logging
    from chunkwise.redact import redact

    setup_logging()
    try:
        cfg = load_config(EvalConfig, args.config, overrides)
        with from_env() as dist:
            results = run_eval(cfg, dist=dist, progress=not args.no_progress)
    except ChunkwiseError as e:
        sys.stderr.write(
            f"eval/run.py: error: {redact(str(e))}\n"
        )  # one write: ranks' lines stay whole
        return 2
    if results is not None:  # rank 0
        print(
            json.dumps(
                {
                    "output": results["config"]["output"],
                    "world_size": results["distributed"]["world_size"],
                    "results": results["files"]["results"],
                    "scores": {t: r["score"] for t, r in results["results"].items()},
                    "stderr": {t: r["score_stderr"] for t, r in results["results"].items()},
                    "average": results["average"]["score"],
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
