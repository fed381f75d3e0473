"""A deterministic, rule-driven LLM double for control-flow unit tests.

It never pretends to be a model: each rule is ``(regex, reply)``; the first rule whose regex
matches the prompt text answers, where ``reply`` is a string (``\\1``-style group references
expanded) or a function of the match. Token counting is a word-piece split, so budgets behave
like a real tokenizer's (roughly one token per word or punctuation mark).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chunkwise.errors import BadInput
from chunkwise.llm.backend_options import ScriptedOptions
from chunkwise.llm.base import LLM, Completion, Prompt, Request, find_stop
from chunkwise.llm.spec import ModelSpec, spec_options

Reply = str | Callable[[re.Match[str]], str]
_PIECE = re.compile(r"\s*(?:\w+|[^\w\s])|\s+")


def prompt_text(prompt: Prompt) -> str:
    if isinstance(prompt, str):
        return prompt
    return "\n".join(f"{m['role']}: {m['content']}" for m in prompt)


@dataclass
class ScriptedLLM(LLM):
    continues_replies = True

    rules: list[tuple[str, Reply]] = field(default_factory=list)
    default: str = ""
    window: int = 8192
    #: every request seen, in order (tests assert on it)
    calls: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._compiled = [(re.compile(p, re.S), r) for p, r in self.rules]
        self._vocab: dict[str, int] = {}
        self._inv: list[str] = []

    @property
    def context_window(self) -> int:
        return self.window

    def _pieces(self, text: str) -> list[str]:
        return _PIECE.findall(text)

    def count_tokens(self, text: str) -> int:
        return len(self._pieces(text))

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        spans = []
        for m in _PIECE.finditer(text):
            s, e = m.span()
            while s < e and text[s].isspace():
                s += 1
            spans.append((s, e) if s < e else m.span())
        return spans

    def encode(self, text: str) -> list[int]:
        ids = []
        for p in self._pieces(text):
            if p not in self._vocab:
                self._vocab[p] = len(self._inv)
                self._inv.append(p)
            ids.append(self._vocab[p])
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self._inv[i] for i in ids)

    def reply_for(self, text: str) -> str:
        for rx, reply in self._compiled:
            m = rx.search(text)
            if m:
                return reply(m) if callable(reply) else m.expand(reply)
        return self.default

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = []
        for req in requests:
            t0 = time.perf_counter()
            self.calls.append(req)
            text = prompt_text(req.prompt)
            full = self.reply_for(text)
            cut, hit = find_stop(full, req.params.stop)
            reply, stopped = full[:cut], hit is not None
            pieces = self._pieces(reply)
            finish = "stop"
            if len(pieces) > req.params.max_new_tokens:
                reply = "".join(pieces[: req.params.max_new_tokens])
                finish = "length"
            out.append(
                Completion(
                    text=reply,
                    prompt_tokens=self.count_tokens(text),
                    completion_tokens=min(len(pieces), req.params.max_new_tokens),
                    finish_reason=finish if not stopped else "stop",
                    latency_s=time.perf_counter() - t0,
                    stop_reason=hit,
                )
            )
        return out


def _passkey_reader(m: re.Match[str]) -> str:
    return m.group(1)


def _refuse(m: re.Match[str]) -> str:
    from chunkwise.errors import LLMRequestError

    raise LLMRequestError("scripted:poison refused a request (POISON in its prompt)")


# Named scripts usable from the CLI as ``scripted:NAME`` (handy for dry runs of pipelines).
SCRIPTS: dict[str, Callable[[], ScriptedLLM]] = {
    "echo": lambda: ScriptedLLM(rules=[(r"(?s)(.{0,200})$", r"\1")]),
    "silent": lambda: ScriptedLLM(default=""),
    # fails every request whose prompt holds POISON (a document that fails after retries)
    "poison": lambda: ScriptedLLM(rules=[(r"POISON", _refuse)], default=""),
    "passkey": lambda: ScriptedLLM(
        rules=[(r"pass key is (\d+)", _passkey_reader)], default="I don't know."
    ),
}


def load(spec: ModelSpec) -> LLM:
    factory = SCRIPTS.get(spec.target)
    if factory is None:
        raise BadInput(f"unknown scripted model {spec.target!r}; known: {', '.join(SCRIPTS)}")
    options = spec_options(spec, ScriptedOptions)
    llm = factory()
    llm.window = options.ctx or llm.window
    return llm
