"""What `chunkwise demo` prints at the end: the comparison, where everything is, how to rerun."""

from __future__ import annotations

import shlex

from chunkwise.demo.pipeline import DECODING, TRAIN_MODES, Demo, fmt3


def rerun_commands(demo: Demo) -> list[str]:
    """Each stage as the standalone command it corresponds to."""
    s, out, q = demo.size, demo.out, shlex.quote
    cfg = demo.synth_config()
    mr = f"chunk_tokens={s.map_chunk_tokens}"
    ckpt = out / "train" / "mapreduce"
    return [
        f"chunkwise synth --docs {q(cfg.docs)} --model {q(demo.model)} --out {q(cfg.out)} "
        f"--window {s.synth_window} --questions-per-doc {s.questions_per_doc} "
        f"--strategy-args {mr} --seed {demo.seed}",
        *(f"accelerate launch train/sft.py {q(str(demo.recipe_path(m)))}" for m in TRAIN_MODES),
        f"chunkwise eval --model {q(str(ckpt))} --strategy mapreduce --strategy-args {mr} "
        f"--tasks {','.join(s.retrieval_tasks)} --data synthetic:{s.eval_length} "
        f"--limit {s.eval_n} --context-window {s.eval_window} "
        f"--output {q(str(out / 'eval' / 'sft-mapreduce' / 'mapreduce' / 'retrieval'))}",
        f"chunkwise eval --model {q(str(ckpt))} --strategy mapreduce --strategy-args {mr} "
        f"--benchmark pyramid_align --tasks qa --data {q(str(out / 'data' / 'heldout.jsonl'))} "
        f"--limit {s.heldout_questions} --context-window {s.eval_window} "
        f"--output {q(str(out / 'eval' / 'sft-mapreduce' / 'mapreduce' / 'heldout'))}",
        f"chunkwise compare {q(str(out))}/eval/*/* --plot {q(str(out / 'report' / 'compare.png'))}",
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
    table = st["report"]["summary"]["table"]
    from chunkwise.eval.compare import to_markdown

    out = demo.out
    s = demo.size
    lines = [
        "",
        f"Scores (%): rows are tasks, columns are <model>/<decoding>; window {s.eval_window:,} "
        f"tokens, {' and '.join(s.retrieval_tasks)} at {s.eval_length:,} tokens (n={s.eval_n} each), "
        f"held-out questions scored by ROUGE-L F1 against the teacher's MapReduce answers "
        f"(n<={s.heldout_questions}). base = hf:default; sft-* = LoRA-trained in that mode.",
        "",
        to_markdown(table),
        "",
        "Note: base/mapreduce is the synthesis teacher itself (same model, decoding and chunk "
        "size), so on held-out questions it reproduces the reference answers by construction.",
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
        f"  documents        {out / 'docs'}",
        f"  Pyramid-Align    {out / 'synth'} (data/*.jsonl, dataset/, stats.json), "
        f"split in {out / 'data'}",
        f"  checkpoints      {out / 'train'}/{{{','.join(TRAIN_MODES)}}} (LoRA adapters; load with "
        f"--model <folder>); logs {out / 'train'}/*.log",
        f"  wandb (offline)  {out / 'train'}/*/wandb  (wandb sync <run folder> to upload)",
        f"  evaluation       {out / 'eval'}/<model>/{{{','.join(DECODING)}}}/"
        "{retrieval,heldout}/results.json",
        f"  report           {out / 'report'}/compare.{{md,json,png}}",
        "",
        "Rerun one stage alone (the demo calls the same code):",
        *(f"  {c}" for c in rerun_commands(demo)),
        "",
        "The same loop at full scale on GPUs:",
        *(f"  {c}" for c in FULL_SCALE),
    ]
    return "\n".join(lines)


__all__ = ["FULL_SCALE", "final_text", "rerun_commands"]
