"""What `chunkwise demo` prints at the end: the comparison, where everything is, how to rerun."""

from __future__ import annotations

import shlex

from chunkwise.demo.engines import engine_spec
from chunkwise.demo.pipeline import DECODING, TRAIN_MODES, Demo
from chunkwise.demo.training import fmt3, rerun_training


def eval_engine_of(demo: Demo) -> str:
    """The engine the evaluation stage ran on (hf or vllm), as its summary recorded it."""
    stage = demo.state.get("stages", {}).get("evaluation", {})
    return (stage.get("summary") or {}).get("engine", "hf")


def rerun_commands(demo: Demo) -> list[str]:
    """Each stage as the standalone command it corresponds to (the evaluation on the engine the
    demo used: vLLM's from its own environment)."""
    s, out, q = demo.size, demo.out, shlex.quote
    mr = ",".join(f"{k}={v}" for k, v in demo.mapreduce_args().items())
    engine = eval_engine_of(demo)
    ckpt = q(engine_spec(str(out / "train" / "mapreduce"), engine))
    cli = ".venv-vllm/bin/chunkwise" if engine == "vllm" else "chunkwise"
    return [
        f"chunkwise synth --teacher oracle --model hf:default-mr --families "
        f"{','.join(s.train_families)} --lengths {','.join(map(str, s.train_lengths))} "
        f"--n {s.train_docs} --seed {demo.seed} --window {s.eval_window} --strategy-args {mr} "
        f"--out {q(str(out / 'synth'))}",
        *(rerun_training(demo.recipe_path(m)) for m in TRAIN_MODES),
        f"{cli} eval --model {ckpt} --strategy mapreduce --strategy-args {mr} "
        f"--benchmark generated --tasks {','.join(s.eval_tasks)} --data heldout:{s.eval_length} "
        f"--limit {s.eval_n} --context-window {s.eval_window} "
        f"--output {q(str(out / 'eval' / 'sft-mapreduce' / 'mapreduce'))}",
    ]


FULL_SCALE = [
    "chunkwise synth --docs THUDM/LongAlign-10k --model 'vllm:meta-llama/Llama-3.1-8B-Instruct?tp=8' "
    "--out data/pyramid_align --window 8192 --num-shards 8 --shard-index $RANK",
    "accelerate launch --config_file configs/accelerate/zero3.yaml train/sft.py "
    "recipes/llama3.1-8b/pyramid_align-mapreduce.yaml",
    "chunkwise eval --config recipes/eval/infinitebench-full.yaml "
    "--model runs/train/llama3.1-8b-pyramid_align-mapreduce --strategy mapreduce",
]


def final_text(demo: Demo) -> str:
    st = demo.state["stages"]
    rep = st["report"]["summary"]
    out = demo.out
    lines = [
        "",
        rep["caption"],
        "base = "
        + engine_spec(demo.model, eval_engine_of(demo))
        + " (its base-model scaffolds); sft-* = LoRA-trained here in that "
        "mode, read with the chat protocol; reference = the packaged adapter, same decoding.",
        "",
        rep["table"],
        "",
        *rep["verdict"],
        "",
        "Training: "
        + "; ".join(
            f"{m} {v['steps']} steps, loss {fmt3(v['first_loss'])} -> {fmt3(v['final_loss'])}"
            for m, v in st["training"]["summary"].items()
        ),
        "Stage seconds (this and earlier runs): "
        + ", ".join(f"{k} {v.get('seconds', 0):.0f}" for k, v in st.items()),
        "",
        "Where things are:",
        f"  documents        {out / 'docs'}/{{train,heldout}}.jsonl (ground truth included)",
        f"  Pyramid-Align    {out / 'synth'}/data/oracle.jsonl (X, Q, M, A), training set in "
        f"{out / 'data'}",
        f"  checkpoints      {out / 'train'}/{{{','.join(TRAIN_MODES)}}} (LoRA adapters; load with "
        f"--model <folder>); logs {out / 'train'}/*.log",
        f"  wandb (offline)  {out / 'train'}/*/wandb  (wandb sync <run folder> to upload)",
        f"  evaluation       {out / 'eval'}/<model>/{{{','.join(DECODING)}}}/results.json "
        "(per-document predictions beside)",
        f"  report           {out / 'report'}/{{table.md,report.json,accuracy.png}}",
        "",
        "Rerun one stage alone (the demo calls the same code):",
        *(f"  {c}" for c in rerun_commands(demo)),
        "",
        "The same loop at full scale on GPUs:",
        *(f"  {c}" for c in FULL_SCALE),
    ]
    return "\n".join(lines)


__all__ = ["FULL_SCALE", "final_text", "rerun_commands"]
