"""What a strategy sent and got back, whatever the strategy: a recording view of the model.

The runner hands strategies a :class:`RecordingLLM` around the real model. It forwards every
attribute, and its ``generate`` notes each request's prompt (text or chat messages, exactly as
sent) and each completion's text, so a prediction line can hold the exact prompt(s) and the
raw output of the last call without any strategy knowing about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chunkwise.llm import Completion, Request


class RecordingLLM:
    """Forwards everything to ``inner``; records the calls since the last :meth:`reset`."""

    def __init__(self, inner: Any):
        self._inner = inner
        self.prompts: list[Any] = []
        self.outputs: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def wrapped(self) -> Any:
        """The model this records."""
        return self._inner

    def reset(self) -> None:
        self.prompts, self.outputs = [], []

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        out = self._inner.generate(requests)
        self.prompts.extend(r.prompt for r in requests)
        self.outputs.extend(c.text for c in out)
        return out

    def complete(self, prompt: Any, **params: object) -> Completion:
        from chunkwise.llm import GenerationParams

        return self.generate([Request(prompt, GenerationParams(**params))])[0]  # type: ignore[arg-type]

    def raw_output(self, markers: Sequence[str] = ()) -> str:
        """The last call's completion as a reader of the whole reply sees it: when the prompt
        ended with one of ``markers`` (a completion scaffold ending in ``Answer:``), that
        marker is put back in front."""
        if not self.outputs:
            return ""
        text, prompt = self.outputs[-1], self.prompts[-1]
        if not isinstance(prompt, str):
            prompt = prompt[-1].get("content", "") if prompt else ""
        tail = prompt.rstrip()
        for marker in markers:
            if tail.endswith(marker):
                return marker + text
        return text


__all__ = ["RecordingLLM"]
