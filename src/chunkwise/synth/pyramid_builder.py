"""Building a document's pyramid (:mod:`chunkwise.synth.pyramid`): leaves are chunks; each
parent summarizes up to ``fanout`` (3) consecutive nodes; levels repeat until one root remains.

Grouping, per level, left to right: a group takes the next node while it has fewer than
``fanout`` members and the rendered summary prompt with that node still fits the window L
(prompt + output budget); otherwise the group closes, so groups shrink exactly when the
children's text does not fit. A trailing group of one node (the remainder of a level) is not
summarized on its own: the node is carried up and joins the next level's grouping, which keeps
summarization at about (leaves - 1) / 2 calls. A one-node group that is *not* the last one
(its neighbours did not fit beside it) is summarized alone, to shrink it.

Summaries go through the LLM interface, one wave per level (all groups of the level, across
documents when a batching LLM wraps the backend). A summary that is empty, too short, mostly
non-words, looping, scaffold text, or unrelated to its children is retried once with sampling
(a looping one whose sentences before the loop pass these rules keeps those instead, no retry);
if it fails again the node gets an extractive summary (its children's top sentences) and the
repair is counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from chunkwise.embed import Embedder
from chunkwise.errors import BadInput
from chunkwise.llm import LLM
from chunkwise.synth import importance as imp
from chunkwise.synth.prompting import SynthPrompts, make_request, wrap
from chunkwise.synth.pyramid import Node, Pyramid, PyramidError, Sentence
from chunkwise.synth.summaries import clean_summary, cut_to_sentence, summary_problem, trim_loop
from chunkwise.text import chunk_document, middle_truncate
from chunkwise.text.sentences import sentence_spans

SAFETY_TOKENS = 16


def plan_groups(n: int, fits: Callable[[list[int]], bool], fanout: int = 3) -> list[list[int]]:
    """Consecutive groups of at most ``fanout`` of ``n`` items; a group grows while ``fits``."""
    groups: list[list[int]] = []
    i = 0
    while i < n:
        group = [i]
        i += 1
        while i < n and len(group) < fanout and fits([*group, i]):
            group.append(i)
            i += 1
        groups.append(group)
    return groups


def plan_sizes(sizes: Sequence[int], budget: int, fanout: int = 3) -> list[list[int]]:
    """:func:`plan_groups` for items of known token sizes under a token budget."""
    return plan_groups(len(sizes), lambda g: sum(sizes[j] for j in g) <= budget, fanout)


@dataclass
class PyramidConfig:
    window: int = 4096
    chunk_tokens: int = 0  # leaf size; 0 = what lets ``fanout`` leaves share one summary call
    fanout: int = 3
    mark_fraction: float = 0.2  # share of the children's sentences marked important
    mark_max: int = 8
    importance: str = "embedding"  # embedding | llm
    max_levels: int = 12
    seed: int = 0


@dataclass
class BuildReport:
    repairs: Counter = field(default_factory=Counter)  # summary_extractive_fallback, ...
    summary_calls: int = 0


class PyramidBuilder:
    """Builds one document's pyramid. ``llm`` is what summaries (and LLM-rated importance)
    are asked of; ``embedder`` embeds sentences for importance."""

    def __init__(
        self,
        llm: LLM,
        prompts: SynthPrompts,
        embedder: Embedder,
        cfg: PyramidConfig,
        rate_llm: LLM | None = None,
    ):
        if cfg.fanout < 2:
            raise BadInput(f"fanout must be at least 2, got {cfg.fanout}")
        if cfg.importance not in ("embedding", "llm"):
            raise BadInput(f"importance must be 'embedding' or 'llm', got {cfg.importance!r}")
        self.llm = llm
        self.rate_llm = rate_llm or llm
        self.prompts = prompts
        self.embedder = embedder
        self.cfg = cfg
        self.window = min(cfg.window, llm.context_window)
        self.params = prompts.params("summary")
        self.sep = str(prompts.get("child_separator", "\n\n"))
        empty = prompts.render("summary", children="", marked="")
        self.template_tokens = llm.prompt_tokens(wrap(llm, empty))
        self.prompt_budget = self.window - self.params.max_new_tokens - SAFETY_TOKENS
        room = self.prompt_budget - self.template_tokens
        # marked sentences are listed again in base prompts: leave them their share
        overhead = 1.0 if prompts.get("mark_inline") else 1.0 + cfg.mark_fraction + 0.05
        self.alone_budget = int(room / overhead)
        if self.alone_budget < 64:
            raise BadInput(
                f"window {self.window} leaves {self.alone_budget} tokens for a summary's input "
                f"(template {self.template_tokens}, output {self.params.max_new_tokens}); use a "
                "larger --window"
            )
        auto = room // (cfg.fanout * overhead)
        self.leaf_tokens = cfg.chunk_tokens or max(32, int(auto))
        if self.leaf_tokens > self.alone_budget:
            raise BadInput(
                f"--chunk-tokens {self.leaf_tokens} does not fit a summary prompt in window "
                f"{self.window}; use at most {self.alone_budget}"
            )
        # three summaries must fit together, or levels could stop shrinking
        if cfg.fanout * (self.params.max_new_tokens + 8) > room:
            raise BadInput(
                f"window {self.window} is too small for {cfg.fanout} summaries of "
                f"{self.params.max_new_tokens} tokens; use a larger --window"
            )
        self.report = BuildReport()
        self._emb: dict[str, np.ndarray] = {}

    # -- sentences and embeddings ----------------------------------------------------------
    def _sentences(self, text: str) -> list[Sentence]:
        return [Sentence(s, e) for s, e in sentence_spans(text)]

    def _embed_nodes(self, nodes: Sequence[Node]) -> None:
        texts, owners = [], []
        for n in nodes:
            for t in n.sentence_texts():
                texts.append(t)
                owners.append(n.id)
        vecs = self.embedder.encode(texts) if texts else np.zeros((0, 1), np.float32)
        pos = 0
        for n in nodes:
            k = len(n.sentences)
            self._emb[n.id] = vecs[pos : pos + k]
            pos += k

    # -- leaves ------------------------------------------------------------------------------
    def leaves(self, document: str) -> list[Node]:
        chunks = chunk_document(document, self.llm, self.leaf_tokens)
        if not chunks:
            raise PyramidError("empty_document")
        nodes = []
        for c in chunks:
            nodes.append(
                Node(
                    id=f"0.{c.index}",
                    level=0,
                    text=c.text,
                    leaves=(c.index, c.index),
                    char_span=(c.start_char, c.end_char),
                    tokens=c.tokens,
                    sentences=self._sentences(c.text),
                )
            )
        return nodes

    def score_leaves(self, leaves: list[Node]) -> None:
        self._embed_nodes(leaves)
        texts = [t for n in leaves for t in n.sentence_texts()]
        all_emb = np.concatenate([self._emb[n.id] for n in leaves]) if texts else np.zeros((0, 1))
        scores = imp.centrality(all_emb, texts)
        pos = 0
        per_leaf = []
        for n in leaves:
            k = len(n.sentences)
            per_leaf.append(scores[pos : pos + k])
            pos += k
        if self.cfg.importance == "llm":
            per_leaf = self._llm_rated(leaves, per_leaf)
        for n, sc in zip(leaves, per_leaf, strict=True):
            for s, v in zip(n.sentences, sc, strict=True):
                s.importance = float(v)

    def _llm_rated(self, leaves: list[Node], base: list[np.ndarray]) -> list[np.ndarray]:
        params = self.prompts.params("rate")
        reqs, which = [], []
        for i, n in enumerate(leaves):
            texts = n.sentence_texts()
            if len(texts) < 2:
                continue
            numbered = "\n".join(f"{k + 1}. {t}" for k, t in enumerate(texts))
            prompt = self.prompts.render("rate", numbered=numbered)
            if self.llm.prompt_tokens(wrap(self.llm, prompt)) + params.max_new_tokens > self.window:
                numbered, _ = middle_truncate(numbered, self.llm, self.alone_budget)
                prompt = self.prompts.render("rate", numbered=numbered)
            reqs.append(make_request(self.llm, prompt, params))
            which.append(i)
        out = list(base)
        limit = max(1, self.cfg.mark_max)
        for i, c in zip(which, self.rate_llm.generate(reqs), strict=True):
            picks = imp.parse_picks(c.text, len(leaves[i].sentences), limit)
            if picks:
                out[i] = imp.apply_picks(base[i], picks)
            else:
                self.report.repairs["importance_unparsed"] += 1
        return out

    # -- summary prompts ---------------------------------------------------------------------
    def _marked(self, group: Sequence[Node]) -> list[tuple[str, int]]:
        """(node id, sentence index) of the group's top sentences, in document order."""
        flat = [(n.id, k, s.importance) for n in group for k, s in enumerate(n.sentences)]
        idx = imp.top_k([v for _, _, v in flat], self.cfg.mark_fraction, self.cfg.mark_max)
        return [(flat[i][0], flat[i][1]) for i in idx]

    def render_summary(self, group: Sequence[Node], truncate: bool = False) -> str:
        marked = self._marked(group)
        chosen = set(marked)
        parts = []
        for n in group:
            text = n.text
            if self.prompts.get("mark_inline"):
                pieces, pos = [], 0
                for k, s in enumerate(n.sentences):
                    if (n.id, k) in chosen:
                        pieces += [text[pos : s.start], "**", text[s.start : s.end], "**"]
                        pos = s.end
                pieces.append(text[pos:])
                text = "".join(pieces)
            parts.append(text)
        by_id = {n.id: n for n in group}
        item = str(self.prompts.get("marked_item", "- {sentence}"))
        listed = "\n".join(
            item.format(sentence=" ".join(by_id[i].sentence_texts()[k].split())) for i, k in marked
        )
        children = self.sep.join(parts)
        if truncate:
            room = self.prompt_budget - self.template_tokens - self.llm.count_tokens(listed)
            children, _ = middle_truncate(children, self.llm, max(16, room))
        return self.prompts.render("summary", children=children, marked=listed)

    def _fits(self, group: Sequence[Node]) -> bool:
        return (
            self.llm.prompt_tokens(wrap(self.llm, self.render_summary(group))) <= self.prompt_budget
        )

    # -- the levels ----------------------------------------------------------------------------
    def build(self, document: str) -> Pyramid:
        leaves = self.leaves(document)
        self.score_leaves(leaves)
        nodes = list(leaves)
        current = list(leaves)
        groups_log: list[list[list[str]]] = []
        carried_log: list[list[str]] = []
        counters: Counter[int] = Counter()
        rounds = 0
        while len(current) > 1:
            rounds += 1
            if rounds > self.cfg.max_levels:
                raise PyramidError("pyramid_did_not_converge")
            level_nodes = current
            groups = plan_groups(
                len(level_nodes),
                lambda g, ns=level_nodes: self._fits([ns[j] for j in g]),
                self.cfg.fanout,
            )
            carry = len(groups) > 1 and len(groups[-1]) == 1
            to_summarize = groups[:-1] if carry else groups
            made = self._summarize([[current[j] for j in g] for g in to_summarize], counters)
            nodes.extend(made)
            groups_log.append([[current[j].id for j in g] for g in to_summarize])
            nxt = list(made)
            if carry:
                nxt.append(current[groups[-1][0]])
                carried_log.append([current[groups[-1][0]].id])
            else:
                carried_log.append([])
            current = nxt
        return Pyramid(nodes, current[0].id, groups_log, carried_log)

    def _summarize(self, groups: list[list[Node]], counters: Counter[int]) -> list[Node]:
        prompts = []
        for g in groups:
            text = self.render_summary(g)
            if self.llm.prompt_tokens(wrap(self.llm, text)) > self.prompt_budget:
                self.report.repairs["summary_input_truncated"] += 1
                text = self.render_summary(g, truncate=True)
            prompts.append(text)
        outs = self.llm.generate([make_request(self.llm, p, self.params) for p in prompts])
        self.report.summary_calls += len(outs)
        texts: list[str | None] = []
        for g, o in zip(groups, outs, strict=True):
            texts.append(self._accept(o.text, g, o.finish_reason))
        retry = [i for i, t in enumerate(texts) if t is None]
        if retry:  # one more try, sampled, for the ones that came back unusable
            params = self.params.with_(temperature=0.7, seed=self.cfg.seed + 1)
            outs2 = self.llm.generate([make_request(self.llm, prompts[i], params) for i in retry])
            self.report.summary_calls += len(outs2)
            for i, o in zip(retry, outs2, strict=True):
                texts[i] = self._accept(o.text, groups[i], o.finish_reason)
        made = []
        for g, t in zip(groups, texts, strict=True):
            origin = "llm"
            if t is None:
                self.report.repairs["summary_extractive_fallback"] += 1
                t = self._extractive(g)
                origin = "extractive"
            level = 1 + max(n.level for n in g)
            node = Node(
                id=f"{level}.{counters[level]}",
                level=level,
                text=t,
                children=[n.id for n in g],
                leaves=(g[0].leaves[0], g[-1].leaves[1]),
                char_span=(g[0].char_span[0], g[-1].char_span[1]),
                tokens=self.llm.count_tokens(t),
                origin=origin,
                sentences=self._sentences(t),
            )
            counters[level] += 1
            made.append(node)
        self._embed_nodes(made)
        for node, g in zip(made, groups, strict=True):
            child_emb = np.concatenate([self._emb[n.id] for n in g])
            child_imp = np.concatenate([n.importances() for n in g])
            scores = imp.propagate(self._emb[node.id], child_emb, child_imp)
            for s, v in zip(node.sentences, scores, strict=True):
                s.importance = float(v)
        return made

    def _accept(self, raw: str, group: Sequence[Node], finish: str) -> str | None:
        text = clean_summary(str(self.prompts.get("summary_prefix", "")) + raw)
        if finish == "length":
            text = cut_to_sentence(text)
        children = " ".join(n.text for n in group)
        problem = summary_problem(text, children)
        if problem == "looping":
            trimmed = trim_loop(text)
            if trimmed and summary_problem(trimmed, children) is None:
                self.report.repairs["summary_loop_trimmed"] += 1
                return trimmed
        if problem:
            self.report.repairs[f"summary_rejected_{problem}"] += 1
            return None
        return text

    def _extractive(self, group: Sequence[Node]) -> str:
        """Top sentences of the children, in order, within the summary's token budget."""
        picked = [
            " ".join(group_node.sentence_texts()[k].split())
            for nid, k in self._marked(group)
            for group_node in group
            if group_node.id == nid
        ]
        out: list[str] = []
        used = 0
        for s in picked:
            n = self.llm.count_tokens(s) + 1
            if out and used + n > self.params.max_new_tokens:
                break
            out.append(s)
            used += n
        text = " ".join(out) or " ".join(group[0].text.split()[:50])
        return text
