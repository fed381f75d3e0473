"""How many document tokens fit in one call."""

from __future__ import annotations

from chunkwise.errors import BadInput


def chunk_budget(
    context_window: int,
    template_tokens: int,
    question_tokens: int,
    max_new_tokens: int,
    *,
    safety: int = 16,
) -> int:
    """Tokens left for a chunk of the document in one call.

    ``context_window - template - question - max_new_tokens - safety``: the output budget is
    the real ``max_new_tokens`` of the call (the reference implementation reserved a fixed 300
    tokens whatever the output length). ``safety`` absorbs the few tokens that differ when
    pieces are joined or a chat template wraps the prompt.
    """
    budget = context_window - template_tokens - question_tokens - max_new_tokens - safety
    if budget < 1:
        raise BadInput(
            f"no room for the document: window {context_window} - prompt template "
            f"{template_tokens} - question {question_tokens} - output {max_new_tokens} tokens "
            f"leaves {budget}; use a larger --context-window or shorter question/output"
        )
    return budget
