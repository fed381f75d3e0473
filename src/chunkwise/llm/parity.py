"""Short completion prompts whose greedy continuations are compared across engines.

A base model continues them deterministically enough that two engines running the same
weights should mostly agree; ``bench/backends.py`` and the vLLM tests both use them.
"""

PARITY_PROMPTS: list[str] = [
    "The capital of France is",
    "1, 2, 3, 4, 5,",
    "Monday, Tuesday, Wednesday,",
    "The opposite of hot is",
    "Water boils at a temperature of",
    "The first president of the United States was",
    "def add(a, b):\n    return",
    "A, B, C, D,",
    "The largest planet in the solar system is",
    "Once upon a time, there was a",
    "The chemical symbol for gold is",
    "January, February, March,",
    "In Python, a list is written with",
    "The sun rises in the",
    "Two plus two equals",
    "The color of the sky on a clear day is",
    "Paris is a city in",
    "The pass key is 71432. Remember it. The pass key is",
    "Cats and dogs are common",
    "The main ingredient of bread is",
]
