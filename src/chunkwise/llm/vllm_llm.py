"""The LLM interface over a started vLLM engine (:mod:`chunkwise.llm.vllm_backend` starts it):
prompts tokenized here (chat messages through the template, plain text with the tokenizer's usual
special tokens) and sent as token ids, the whole batch in one ``LLM.generate`` call, completions
with the stop string named and log-probabilities per token."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.llm.base import LLM, Completion, Message, Prompt, Request, template_kwargs
from chunkwise.llm.turns import end_of_turn_ids

log = logging.getLogger(__name__)

#: ids of the open backends whose engine runs in this process (at most one: see ``load``)
INPROC: set[int] = set()


def _token_ids(encoded: Any) -> list[int]:
    """``apply_chat_template(tokenize=True)`` returns a list or (transformers 5) a mapping."""
    if isinstance(encoded, Mapping) or hasattr(encoded, "keys"):
        encoded = encoded["input_ids"]
    ids = list(encoded)
    if ids and isinstance(ids[0], (list, tuple)):  # a batch of one
        ids = list(ids[0])
    return [int(i) for i in ids]


def flatten_messages(messages: Sequence[Message]) -> str:
    """Plain text for a model without a chat template: contents joined by blank lines."""
    return "\n\n".join(m["content"] for m in messages)


class VLLMBackend(LLM):
    continues_replies = True

    def __init__(
        self,
        engine: Any,
        sampling_params_cls: Any,
        *,
        window: int,
        chat: bool | None = None,
        lora_request: Any = None,
        inproc: bool = False,
    ):
        self.engine = engine
        #: the engine runs in this process (see :func:`chunkwise.llm.vllm_backend.load`); its close frees the slot
        self.inproc = inproc
        self._sampling_params_cls = sampling_params_cls
        self.tokenizer = engine.get_tokenizer()
        self._window = int(window)
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        self.chat = has_template if chat is None else chat
        if self.chat and not has_template:
            raise BadInput("chat=1 was asked for but the model's tokenizer has no chat template")
        self.lora_request = lora_request
        self._warned_flatten = False
        #: a chat reply ends with its turn (a base model's generation_config lists only <eos>)
        self._turn_end_ids = end_of_turn_ids(self.tokenizer) if self.chat else []

    # -- tokens ---------------------------------------------------------------------------

    @property
    def context_window(self) -> int:
        return self._window

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        ids = self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(x) for x in ids]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        if not getattr(self.tokenizer, "is_fast", True):
            raise NotImplementedError(
                "token offsets need a fast (Rust) tokenizer; this model only has a slow one"
            )
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return [(int(s), int(e)) for s, e in enc["offset_mapping"]]

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def _prompt_ids(self, prompt: Prompt) -> list[int]:
        if isinstance(prompt, str):
            return list(self.tokenizer(prompt)["input_ids"])  # with BOS etc., as vLLM would
        if self.chat:
            return _token_ids(
                self.tokenizer.apply_chat_template(
                    list(prompt), tokenize=True, **template_kwargs(prompt)
                )
            )
        if not self._warned_flatten:
            log.warning("%s has no chat template: chat messages are sent as plain text", self.spec)
            self._warned_flatten = True
        return list(self.tokenizer(flatten_messages(prompt))["input_ids"])

    def prompt_tokens(self, prompt: Prompt) -> int:
        return len(self._prompt_ids(prompt))

    # -- generation -----------------------------------------------------------------------

    def _sampling_params(self, req: Request, max_tokens: int) -> Any:
        p = req.params
        greedy = p.temperature == 0
        kwargs: dict[str, Any] = {}
        if self._turn_end_ids:
            kwargs["stop_token_ids"] = list(self._turn_end_ids)
        return self._sampling_params_cls(
            n=1,
            max_tokens=max_tokens,
            temperature=p.temperature,
            top_p=1.0 if greedy else p.top_p,
            stop=list(p.stop) or None,
            seed=p.seed,
            logprobs=1 if p.logprobs else None,
            **kwargs,
        )

    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        results: list[Completion | None] = [None] * len(requests)
        prompts, params, where = [], [], []
        for i, req in enumerate(requests):
            ids = self._prompt_ids(req.prompt)
            room = self._window - len(ids)
            if room < 1:
                log.warning(
                    "request %d: prompt of %d tokens does not fit the %d-token context window",
                    i,
                    len(ids),
                    self._window,
                )
                results[i] = Completion("", len(ids), 0, "error", 0.0)
                continue
            prompts.append({"prompt_token_ids": ids})
            params.append(self._sampling_params(req, min(req.params.max_new_tokens, room)))
            where.append(i)
        if prompts:
            kwargs: dict[str, Any] = {"use_tqdm": False}
            if self.lora_request is not None:
                kwargs["lora_request"] = self.lora_request
            t0 = time.perf_counter()
            outputs = self.engine.generate(prompts, params, **kwargs)
            wall = time.perf_counter() - t0
            if len(outputs) != len(prompts):  # pragma: no cover - a vLLM bug
                raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)}")
            for i, out in zip(where, outputs, strict=True):
                results[i] = self._completion(out, requests[i], wall)
        return [c for c in results if c is not None]

    def _completion(self, out: Any, req: Request, wall: float) -> Completion:
        o = out.outputs[0]
        token_ids = list(o.token_ids)
        reason = o.finish_reason
        finish = "length" if reason == "length" else "stop" if reason in ("stop", None) else "error"
        lps = tokens = None
        if req.params.logprobs and o.logprobs is not None:
            lps = []
            for tid, entry in zip(token_ids, o.logprobs, strict=False):
                lp = entry.get(tid) if entry else None
                lps.append(float(lp.logprob) if lp is not None else float("nan"))
            tokens = self._token_strings(token_ids[: len(lps)])
        return Completion(
            text=o.text,
            prompt_tokens=len(out.prompt_token_ids or ()),
            completion_tokens=len(token_ids),
            finish_reason=finish,  # type: ignore[arg-type]
            latency_s=wall,
            token_logprobs=lps,
            tokens=tokens,
            stop_reason=_stop_string(o, req),
        )

    def _token_strings(self, ids: Sequence[int]) -> list[str]:
        """Per-token text whose concatenation is the decoded text (multi-byte safe)."""
        pieces, prev = [], ""
        for n in range(1, len(ids) + 1):
            cur = self.tokenizer.decode(list(ids[:n]), skip_special_tokens=True)
            if cur.endswith("\ufffd"):  # an incomplete UTF-8 sequence: wait for its end
                pieces.append("")
                continue
            pieces.append(cur[len(prev) :] if cur.startswith(prev) else cur)
            prev = cur
        return pieces

    def close(self) -> None:
        engine, self.engine = getattr(self, "engine", None), None
        if engine is None:
            return
        if getattr(self, "inproc", False):
            INPROC.discard(id(self))
        from chunkwise.llm.vllm_replicas import ReplicaPool

        if isinstance(engine, ReplicaPool):  # dp=N: end the replica processes
            engine.close()
        elif not getattr(self, "inproc", False):
            # vLLM's engine-core process ends when its client is collected, which another
            # reference can put off until exit (a dp=1 reference engine lived on beside the
            # dp=2 server in tests/vllm_engine/test_dp.py): end it now
            core = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
            if callable(getattr(core, "shutdown", None)):
                core.shutdown()
        del engine
        try:  # free the GPU memory for a next engine in this process
            import gc

            import torch

            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:  # pragma: no cover - best effort
            pass


def _stop_string(o: Any, req: Request) -> str | None:
    """The stop string that ended ``o``: vLLM reports it as ``stop_reason`` (an int there is a
    stop token id, not a string)."""
    reason = getattr(o, "stop_reason", None)
    if isinstance(reason, str) and reason in req.params.stop:
        return reason
    return None


__all__ = ["INPROC", "VLLMBackend", "flatten_messages"]
