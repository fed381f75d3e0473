"""A LoRA step checkpoint before and after #50.3, in one run: the demo's MapReduce LoRA recipe
(embedded Gemma-3-270M, ``src/chunkwise/recipes/demo/pyramid_align-mapreduce.yaml``) on the
smoke demo's data, trained ``--steps`` steps twice with a checkpoint at the last step: once
saving the whole model (the old behaviour: accelerate's ``model.safetensors``, base included),
once saving the trainable weights only (``trainable.safetensors``, today's). Prints a table,
then the JSON (also written to ``--json``) with a top-level ``ratio`` (whole / trainable-only).

    .venv/bin/python bench/lora_checkpoint_size.py --out /tmp/lora-ckpt --json /tmp/lora-ckpt.json
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def folder_files(folder: Path) -> dict[str, int]:
    return {
        p.relative_to(folder).as_posix(): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def demo_recipe(out: Path) -> Path:
    """The smoke demo's documents, oracle records and training split; its mapreduce recipe."""
    from chunkwise.demo import Demo, get_size

    demo = Demo(out=out / "demo", size=get_size("smoke"), echo=lambda _: None)
    demo.load_state()
    for stage in (demo.documents, demo.synthesis, demo.split):
        stage()
    demo.close_models()
    return demo.write_recipe("mapreduce")


def train(recipe: Path, out: Path, steps: int, *, whole: bool) -> dict:
    import chunkwise.train.checkpoint_contents as contents
    from chunkwise.train.loop import run
    from chunkwise.train.recipe import load_recipe

    shutil.rmtree(out, ignore_errors=True)
    hooks = contents.install_hooks
    if whole:  # the old behaviour: accelerate's own save_state (model.safetensors, base included)
        contents.install_hooks = lambda *a, **k: None
    try:
        r = load_recipe(
            recipe,
            [
                f"--output_dir={out}",
                f"--train.max_steps={steps}",
                f"--train.save_steps={steps}",
                "--wandb.mode=disabled",
            ],
        )
        info = run(r)
    finally:
        contents.install_hooks = hooks
    files = folder_files(out / "checkpoints" / f"step-{steps:08d}")
    return {
        "files": files,
        "bytes": sum(files.values()),
        "params": info["params"],
        "trainable_params": info["trainable_params"],
        "losses": info["losses"],
        "adapter_bytes": (out / "adapter_model.safetensors").stat().st_size,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="scratch folder")
    ap.add_argument("--steps", type=int, default=2, help="training steps (checkpoint at the last)")
    ap.add_argument("--json", type=Path, help="write the JSON here too")
    a = ap.parse_args()
    recipe = demo_recipe(a.out)
    whole = train(recipe, a.out / "whole", a.steps, whole=True)
    trainable = train(recipe, a.out / "trainable", a.steps, whole=False)
    result = {
        "recipe": "src/chunkwise/recipes/demo/pyramid_align-mapreduce.yaml (smoke demo data)",
        "steps": a.steps,
        "whole_model": whole,
        "trainable_only": trainable,
        "same_losses": whole["losses"] == trainable["losses"],
        "ratio": round(whole["bytes"] / trainable["bytes"], 2),
    }
    print("| step checkpoint | bytes | files |")
    print("|---|---:|---|")
    for name in ("whole_model", "trainable_only"):
        r = result[name]
        print(f"| {name} | {r['bytes']:,} | {', '.join(r['files'])} |")
    print(f"ratio (whole / trainable-only): {result['ratio']}x")
    text = json.dumps(result, indent=1)
    if a.json:
        a.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
