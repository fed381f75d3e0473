"""DTCRS: a summary tree built per question, guided by its sub-questions.

Per question:

1. **Table of contents** of the document, written by the LLM (cached per document: it does
   not depend on the question). Reference setting: from the document's first 125,000
   characters (``toc_input=head``), cut further, keeping the head, to what fits the window.
2. **Classifier**: given the table of contents, does the question need information from
   several sections? A "no" sends the question to DPR-style retrieval (:class:`Retrieval`).
3. **Decomposition**: the question is broken into sub-questions, guided by the table of
   contents. Reference setting: every non-empty line of the reply is a sub-question (its
   list marker removed), no cap and no retries; an empty reply leaves the question itself.
4. **First layer**: 500-token chunks of whole sentences; no summary layer at all when there
   are ``dim + 1`` (11) or fewer chunks (the reference's stop rule applies at layer 0 too).
   Otherwise chunk and sub-question embeddings are reduced by one UMAP fit together and a
   Gaussian mixture with exactly one component per sub-question, means initialised at the
   reduced sub-question points, gives soft clusters (posterior above the threshold).
   A cluster over 10,000 tokens is re-clustered, guided by the same sub-questions (the
   reference recurses into its clustering with the sub-questions; its recursion falls back
   to the hierarchical scheme), and packed in document order only when that cannot split it.
5. **Higher layers** as RAPTOR (BIC, global + local), usually none: the first layer has as
   many nodes as sub-questions, below RAPTOR's stop rule.
6. **Collapsed-tree retrieval** over leaves and summaries (3,500 tokens, at most 10 nodes),
   then one answer call.

Defaults follow the reference code (luoguanran/DTCRS: ``cluster_tree_builder.py``,
``cluster_utils.py``, ``query_breakdown.py``, ``RetrievalAugmentation.py``); ``preset=v1``
restores this project's earlier settings (2 leaves suffice for a layer, 3,500-token clusters
split by RAPTOR's clustering then document order, numbered sub-questions only, 2 to 5 of
them with 2 sampled retries, a 2,000-token retrieval budget, the table of contents from an
evenly spaced 3,000-token excerpt). Any option given explicitly overrides the preset.

Ablation switches (the paper's): ``classifier=false`` (every question builds a tree),
``toc=false`` (classifier and decomposer see only the question), ``decomposition=false`` (the
question itself is the only guide: a one-component first layer), ``global_clustering=false``
(the reference's ``cluster_method=hierarchical``: the joint UMAP uses ``sqrt(N - 1)``
neighbours instead of 10, and each guided cluster of more than ``dim + 1`` chunks is split
again by RAPTOR's local stage).

One module per job:

    strategy.py      the options, the per-document caches, a run's stages in order
    presets.py       the reference code's settings and this project's earlier ones
    excerpts.py      what the table of contents is written from
    questions.py     the classifier and the decomposition into sub-questions
    first_layer.py   leaves clustered around the sub-questions
"""

from chunkwise.strategies.dtcrs.excerpts import head_excerpt, spread_excerpt
from chunkwise.strategies.dtcrs.presets import PRESETS
from chunkwise.strategies.dtcrs.questions import parse_lines, parse_subquestions, parse_yes
from chunkwise.strategies.dtcrs.strategy import DTCRS

__all__ = [
    "DTCRS",
    "PRESETS",
    "head_excerpt",
    "parse_lines",
    "parse_subquestions",
    "parse_yes",
    "spread_excerpt",
]
