"""``python -m chunkwise.train RECIPE [--key=value ...]``: the training entry as a module, what
``accelerate launch -m chunkwise.train`` runs from an installed package (train/sft.py is the same
entry as a script in the checkout)."""

from chunkwise.train.loop import exit_rank, main

if __name__ == "__main__":
    exit_rank(main())
