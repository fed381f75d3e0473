"""Text examples -> token ids and labels (assistant spans only), and fitting them to
``data.max_length``."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from chunkwise.errors import BadInput
from chunkwise.train.records import IGNORE, TextExample

log = logging.getLogger("chunkwise.train.formats")

# --------------------------------------------------------------------------------------------
# tokenizing


class Encoder:
    """Text examples -> (input_ids, labels) with labels on assistant output only."""

    def __init__(self, tokenizer: Any, kind: str):
        if kind == "chat" and not getattr(tokenizer, "chat_template", None):
            raise BadInput(
                "chat prompts need a tokenizer with a chat template; set "
                "model.chat_template (llama3 or a .jinja file) or data.prompts=base"
            )
        self.tok = tokenizer
        self.kind = kind
        self.eos = tokenizer.eos_token_id

    def _ids(self, text: str, special: bool = False) -> list[int]:
        return list(self.tok(text, add_special_tokens=special)["input_ids"]) if text else []

    def _render(self, ex: TextExample, msgs: list[dict], **kw: Any) -> str:
        """The chat template's text of ``msgs``; a conversation it refuses (one opening with
        an assistant turn, roles a template insists alternate) is one BadInput naming it."""
        from jinja2.exceptions import TemplateError

        try:
            return self.tok.apply_chat_template(msgs, tokenize=False, **kw)
        except (ValueError, TemplateError) as e:
            why = (str(e).splitlines() or [type(e).__name__])[0]
            raise BadInput(
                f"{ex.where}: record {ex.id!r}: the chat template cannot render its messages "
                f"({why}); a conversation starts with a system or user message"
            ) from None

    def pieces(self, ex: TextExample) -> list[tuple[str, bool]]:
        """The example as (text, is_target) pieces, in order."""
        msgs = ex.messages
        if self.kind == "chat":
            out: list[tuple[str, bool]] = []
            done = ""
            for j, m in enumerate(msgs):
                if m["role"] != "assistant":
                    continue
                head = self._render(ex, msgs[:j], add_generation_prompt=True)
                full = self._render(ex, msgs[: j + 1])
                if not head.startswith(done) or not full.startswith(head):
                    raise BadInput(
                        f"{ex.where}: record {ex.id!r}: the chat template is not prefix-stable (the "
                        "rendering of the first turns changes when a turn is added), so assistant "
                        "spans cannot be labelled; use model.chat_template=llama3 or another template"
                    )
                out += [(head[len(done) :], False), (full[len(head) :], True)]
                done = full
            return out
        out = []
        for j, m in enumerate(msgs):
            if m["role"] == "assistant":
                out.append((m["content"], True))
            else:
                out.append((("\n\n" if j else "") + m["content"], False))
        return out

    def encode(self, ex: TextExample) -> tuple[np.ndarray, np.ndarray]:
        ids: list[int] = []
        labels: list[int] = []
        pieces = self.pieces(ex)
        for k, (text, target) in enumerate(pieces):
            toks = self._ids(text, special=(self.kind == "base" and k == 0))
            if target and self.kind == "base" and (k == len(pieces) - 1) and self.eos is not None:
                toks = [*toks, self.eos]
            ids += toks
            labels += toks if target else [IGNORE] * len(toks)
        return np.asarray(ids, dtype=np.int32), np.asarray(labels, dtype=np.int32)


def fit_length(
    ids: np.ndarray, labels: np.ndarray, max_length: int, policy: str, ex: TextExample
) -> tuple[np.ndarray, np.ndarray, str]:
    """Apply the over-long policy; returns (ids, labels, status: ok|truncated|skip:<why>)."""
    n = len(ids)
    if n <= max_length:
        return ids, labels, "ok"
    if policy == "error":
        raise BadInput(
            f"{ex.where}: record {ex.id!r} ({ex.stage}) takes {n} tokens, over data.max_length="
            f"{max_length}; raise data.max_length, or set data.overlong to truncate or skip"
        )
    if policy == "skip":
        return ids, labels, "skip:overlong"
    # truncate: cut the middle of the longest prompt span (the document), keep the targets
    prompt = labels == IGNORE
    best, start = (0, 0, 0), None
    for i, flag in enumerate([*prompt.tolist(), False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if i - start > best[0]:
                best = (i - start, start, i)
            start = None
    length, s, e = best
    excess = n - max_length
    keep = length - excess
    if keep < 2:
        return ids, labels, "skip:targets_too_long"
    head = keep // 2
    tail = keep - head
    sel = np.concatenate([np.arange(0, s + head), np.arange(e - tail, n)])
    return ids[sel], labels[sel], "truncated"
