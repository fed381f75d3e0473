"""Supervised fine-tuning entry: what ``accelerate launch`` runs.

    accelerate launch --config_file configs/accelerate/zero3.yaml train/sft.py \
        recipes/llama3.1-8b/pyramid_align-mapreduce.yaml [--key=value ...]

Single process (CPU or one GPU) works without accelerate too:

    python train/sft.py recipes/tiny/pyramid_align-mapreduce.yaml

Rerunning with the same output_dir resumes from the latest checkpoint. See recipes/*/README.md.
"""

from chunkwise.train.loop import exit_rank, main

if __name__ == "__main__":
    exit_rank(main())
