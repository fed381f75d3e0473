"""A synthetic multi-hop task on which the reading order of a bounded-memory chain matters.

Each document is a list of *sections* separated by blank lines; each section holds one fact
sentence among a few filler sentences (the filler names nobody and holds no digits). The
question asks for the code of one object; the answer needs a chain of facts spread over
distant sections that refer to each other::

    The vault code is in the note about Odile.               (head: names the object)
    Note about Odile: its code is in the note about Bruno.   (middle hops, hops >= 3)
    Note about Bruno: the code is 4817.                      (tail: holds the answer)

Distractor chains of the same shape lead to other objects' codes, and filler sections hold no
fact at all. Section positions are shuffled, so the chain can appear in any order. A reader
whose memory holds only a few facts loses the tail when it reads it before it knows the tail
matters and later facts push it out: that is the loss the ordering has to prevent.

Records have the benchmark shape ``{id, context, input, answer, options}`` plus ``meta``:
``sections`` (the texts), ``chain`` (section indices head → tail), ``hops``, ``facts``
(section index → fact sentence) and ``seed``. :func:`chunk_tokens_for` gives the chunk size
that makes the chunker cut exactly one section per chunk for a given tokenizer.

:func:`memory_cap_reader` is a scripted reader for this task that keeps only what its memory
cap allows: it keeps the facts it knows are on the question's chain first, then the most
recently read other facts, while they fit. It plays the workers and the manager of the chat prompt
set (workers that rewrite the memory).

**Trees.** :func:`generate_tree` builds documents whose dependency structure is a tree, not a
chain: variable assignments (RULER's variable tracking) where one root variable holds a value
and ``branches`` chains of ``depth`` variables each copy it from the root::

    VAR QKZTB = 48213.            root
    VAR HJWLM = VAR QKZTB.        branch 1, depth 1        VAR PLMNB = VAR QKZTB.   branch 2
    VAR ASDFG = VAR HJWLM.        branch 1, depth 2        VAR CVBNX = VAR PLMNB.

among distractor trees of the same shape holding other values, one fact per section. Two
questions: ``all`` ("Which variables are assigned the value 48213?": every branch and the
root) and ``leaf`` ("Which value is VAR ASDFG assigned?": the root and one branch). A reader
that knows which facts matter only once it has read the fact they hang from keeps the answer's
tree under a tight memory when it reads parents before children; a breadth-first walk from
the root does, a greedy chain through the document does not always. :func:`tree_reader` is the
scripted capped reader for these documents (same prompt set and rules as
:func:`memory_cap_reader`).
"""

from chunkwise.data.multihop.capped_reader import (
    keep_facts,
    keep_tree_facts,
    memory_cap_reader,
    tree_reader,
)
from chunkwise.data.multihop.chains import (
    FACT,
    HEAD,
    MIDDLE,
    NAMES,
    OBJECTS,
    QUESTION,
    TAIL,
    chain_names,
    facts_in,
    generate,
    resolve,
    score,
)
from chunkwise.data.multihop.sections import chunk_tokens_for
from chunkwise.data.multihop.trees import (
    TREE_LINK,
    TREE_QUESTION,
    TREE_QUESTIONS,
    TREE_ROOT,
    assignments_in,
    generate_tree,
    holders,
    tree_answer,
    tree_recall,
    tree_score,
    tree_support,
    value_of,
)

__all__ = [
    "FACT",
    "HEAD",
    "MIDDLE",
    "NAMES",
    "OBJECTS",
    "QUESTION",
    "TAIL",
    "TREE_LINK",
    "TREE_QUESTION",
    "TREE_QUESTIONS",
    "TREE_ROOT",
    "assignments_in",
    "chain_names",
    "chunk_tokens_for",
    "facts_in",
    "generate",
    "generate_tree",
    "holders",
    "keep_facts",
    "keep_tree_facts",
    "memory_cap_reader",
    "resolve",
    "score",
    "tree_answer",
    "tree_reader",
    "tree_recall",
    "tree_score",
    "tree_support",
    "value_of",
]
