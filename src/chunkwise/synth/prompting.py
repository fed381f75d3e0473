"""The synthesis prompt set (``prompts/synth/{chat,base}.yaml``) and how requests are made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chunkwise.llm import LLM, GenerationParams, Request
from chunkwise.prompts import prompt_set


@dataclass
class SynthPrompts:
    kind: str  # chat | base
    templates: dict[str, Any]

    @classmethod
    def for_llm(cls, llm: LLM, kind: str = "auto", family: str = "qa") -> SynthPrompts:
        k = kind if kind != "auto" else ("chat" if llm.chat else "base")
        return cls(k, prompt_set("synth", k, family))

    @property
    def version(self) -> str:
        return str(self.templates["version"])

    def render(self, name: str, **values: str) -> str:
        text = self.templates[name].format(**values)
        # no trailing spaces: a dangling space derails base models (sentencepiece)
        return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n").rstrip()

    def params(self, stage: str, **changes: Any) -> GenerationParams:
        p = GenerationParams(
            max_new_tokens=int(self.templates[f"{stage}_max_new_tokens"]),
            temperature=float(self.templates.get(f"{stage}_temperature", 0.0)),
            stop=tuple(self.templates.get(f"{stage}_stop", [])),
        )
        return p.with_(**changes) if changes else p

    def get(self, key: str, default: Any = None) -> Any:
        return self.templates.get(key, default)


def make_request(llm: LLM, text: str, params: GenerationParams) -> Request:
    """Chat models get one user message; base models get the plain completion prompt."""
    return Request(llm.as_prompt(text), params)


def wrap(llm: LLM, text: str) -> Any:
    return llm.as_prompt(text)
