"""Model specs: the one place where a string like ``hf:default?ctx=8192`` becomes a backend.

Forms (options after ``?`` as ``key=value`` pairs joined by ``&``)::

    hf:default                          the embedded Gemma-3-270M (base), CPU
    hf:default-mr                       the same with its MapReduce-protocol LoRA adapter
                                        (package data; `make default-mr` trains it)
    hf:default-coa                      the same with its Chain-of-Agents worker/manager
                                        adapter (`make default-coa`)
    hf:/path/or/hub-id                  any transformers causal LM
    hf:BASE+adapter=/path/lora          a LoRA adapter over BASE (peft), merged into the
                                        weights for decoding unless ?merge=off
    openai:MODEL@http://host:port/v1    any OpenAI-compatible server
    vllm:hub-id?tp=8                    offline vLLM engine, tensor parallel
    vllm:default, vllm:default-mr       the embedded model (and its adapter) on vLLM
    llamacpp:default | llamacpp:/m.gguf GGUF through llama-cpp-python
    scripted:NAME                       deterministic test double (unit tests only)
    /path/to/training/output            a folder: full weights or a LoRA adapter (hf backend)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import parse_qsl

from chunkwise.errors import BadInput
from chunkwise.options import build_options

log = logging.getLogger(__name__)

T = TypeVar("T")

#: options that make a backend run code shipped with a model: only the user's own spec (the
#: command line, a config they wrote) may set them, never a spec read from a model folder
CODE_OPTIONS = frozenset({"trust_remote_code"})

VALID_FORMS = (
    "hf:default",
    "hf:/path/or/hub-id",
    "hf:BASE+adapter=/path/lora",
    "openai:MODEL@http://127.0.0.1:8000/v1",
    "vllm:hub-id?tp=8",
    "llamacpp:default",
    "llamacpp:/path/model.gguf",
    "scripted:NAME",
    "/path/to/checkpoint-folder",
)


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: backend, target, ``?key=value`` options as text (a backend reads them
    through :func:`spec_options` into its options dataclass), adapter, and the raw string."""

    backend: str
    target: str
    options: dict[str, str] = field(default_factory=dict)
    adapter: str | None = None
    raw: str = ""


# backend name -> "module:function" that builds an LLM from a ModelSpec (imported lazily so that
# `chunkwise --help` does not pay for torch).
BACKENDS: dict[str, str] = {
    "hf": "chunkwise.llm.hf:load",
    "openai": "chunkwise.llm.openai_compat:load",
    "vllm": "chunkwise.llm.vllm_backend:load",
    "llamacpp": "chunkwise.llm.llamacpp:load",
    "scripted": "chunkwise.llm.scripted:load",
}


def _bad(spec: str, why: str) -> BadInput:
    forms = "\n  ".join(VALID_FORMS)
    return BadInput(f"invalid model spec {spec!r}: {why}. Valid forms:\n  {forms}")


def parse_spec(spec: str) -> ModelSpec:
    """Parse a model spec string; raise :class:`BadInput` listing the valid forms."""
    raw = spec.strip()
    if not raw:
        raise _bad(spec, "empty")
    backend, sep, rest = raw.partition(":")
    if not sep or backend not in BACKENDS:
        path = Path(raw).expanduser()
        if path.is_dir():
            return ModelSpec("hf", str(path), raw=raw)
        if sep and "/" not in backend:
            raise _bad(spec, f"unknown backend {backend!r}")
        raise _bad(spec, "no backend prefix and not an existing folder")
    rest, _, query = rest.partition("?")
    try:
        options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise _bad(spec, f"options {query!r} are not key=value pairs joined by '&'") from None
    adapter = None
    if "+adapter=" in rest:
        rest, _, adapter = rest.partition("+adapter=")
        if not adapter:
            raise _bad(spec, "empty adapter path")
    if not rest:
        raise _bad(spec, "nothing after the backend prefix")
    return ModelSpec(backend, rest, options, adapter, raw)


def spec_options(spec: ModelSpec, cls: type[T], options: Mapping[str, str] | None = None) -> T:
    """The spec's ``?key=value`` options (or ``options``, e.g. with a model folder's own
    merged in) as the backend's options dataclass ``cls``
    (:mod:`chunkwise.llm.backend_options`): text converted by each option's declared type,
    unknown keys refused, both in the one error format naming the spec."""
    return build_options(
        f"model spec {spec.raw!r}", cls, spec.options if options is None else options
    )


def file_options(
    options: Mapping[str, str],
    source: object,
    allowed: Callable[[str, str], bool] | None = None,
) -> dict[str, str]:
    """The options of a spec read from a file in a model folder (``source``, e.g. a
    ``chunkwise_model.json``) that may be applied: never :data:`CODE_OPTIONS`, and only those
    ``allowed(key, value)`` accepts. Dropped ones are logged with how to set them oneself."""
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for key, value in options.items():
        if key not in CODE_OPTIONS and (allowed is None or allowed(key, value)):
            kept[key] = value
        else:
            dropped.append(f"{key}={value}")
    if dropped:
        log.warning(
            "%s: ignoring option(s) %s: options that run or fetch code are only taken from "
            "your own --model spec (e.g. hf:FOLDER?trust_remote_code=1, if you trust that code)",
            source,
            ", ".join(dropped),
        )
    return kept
