"""transformers backend: any causal LM folder or hub id, LoRA adapters through peft.

Batched generation with left padding, greedy or sampling, stop strings, optional per-token
log-probabilities. Chat-tuned models with a chat template get it applied; base models (such
as the embedded default) get plain prompts.

On CPU in fp32 the output head runs as ``(W @ x.T).T`` (``chunkwise.llm.output_head``: batched
decoding with Gemma-3's 262K vocabulary ~1.6x faster); ``fast_head=0`` keeps
torch's ``linear``.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput, MissingDependency
from chunkwise.llm.backend_options import HfOptions
from chunkwise.llm.base import (
    LLM,
    Completion,
    GenerationParams,
    Prompt,
    Request,
    find_stop,
    template_kwargs,
)
from chunkwise.llm.cpu import choose_cpu_dtype
from chunkwise.llm.devices import pin_cpus, placement
from chunkwise.llm.output_head import fast_output_head
from chunkwise.llm.spec import ModelSpec, file_options, parse_spec, spec_options
from chunkwise.llm.step_checkpoint import describe as describe_step
from chunkwise.llm.step_checkpoint import load_model as load_step_model
from chunkwise.llm.turns import end_of_turn_ids
from chunkwise.text.tokens import HFTokenCounter

log = logging.getLogger(__name__)

#: file a training run writes beside an adapter to say which base model it extends
BASE_SPEC_FILE = "chunkwise_model.json"


def _torch():
    try:
        import torch
    except ImportError:
        raise MissingDependency(
            "torch", "pip install torch==2.13.0 (CPU) or a CUDA build"
        ) from None
    return torch


class _StopOnStrings:
    """Stopping criterion: a row is done once its generated tail contains a stop string."""

    def __init__(self, tokenizer: Any, stops: Sequence[str], prompt_len: int):
        self.tokenizer = tokenizer
        self.stops = [s for s in stops if s]
        self.prompt_len = prompt_len
        self.window = 4 + max(len(s) for s in self.stops)  # tokens: >= 1 char each

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        torch = _torch()
        tails = input_ids[:, max(self.prompt_len, input_ids.shape[1] - self.window) :]
        texts = self.tokenizer.batch_decode(tails, skip_special_tokens=True)
        done = [any(s in t for s in self.stops) for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class HFLLM(LLM):
    continues_replies = True

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        window: int,
        chat: bool,
        batch_size: int = 8,
        max_batch_tokens: int = 32768,
        prefill_chunk: int = 0,
    ):
        self.model = model
        self.tokenizer = tokenizer
        self._window = window
        self.chat = chat
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        #: prefill long prompts this many tokens at a time (0: in one pass). With sliding-window
        #: attention layers (Gemma 3) this turns their quadratic prefill cost linear.
        self.prefill_chunk = prefill_chunk
        self.device = next(model.parameters()).device
        self.counter = HFTokenCounter(tokenizer)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos = model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tokenizer.eos_token_id is not None:
            self.eos_ids.add(tokenizer.eos_token_id)
        if chat:  # a reply ends with its turn, even where generation_config does not say so
            self.eos_ids.update(end_of_turn_ids(tokenizer))

    # -- tokens ---------------------------------------------------------------------------
    @property
    def context_window(self) -> int:
        return self._window

    def count_tokens(self, text: str) -> int:
        return self.counter.count_tokens(text)

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        return self.counter.count_tokens_batch(texts)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return self.counter.token_offsets(text)

    def encode(self, text: str) -> list[int]:
        return self.counter.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.counter.decode(ids)

    def render(self, prompt: Prompt) -> tuple[str, bool]:
        """(prompt text, whether the tokenizer should add special tokens)."""
        if isinstance(prompt, str):
            return prompt, True
        if self.chat:
            text = self.tokenizer.apply_chat_template(
                prompt, tokenize=False, **template_kwargs(prompt)
            )
            return text, False  # the template writes its own BOS
        return "\n\n".join(m["content"] for m in prompt), True

    def prompt_tokens(self, prompt: Prompt) -> int:
        text, special = self.render(prompt)
        return len(self.tokenizer(text, add_special_tokens=special)["input_ids"])

    # -- generation -----------------------------------------------------------------------
    def _generate(self, requests: Sequence[Request]) -> list[Completion]:
        encoded = []
        for r in requests:
            text, special = self.render(r.prompt)
            encoded.append(self.tokenizer(text, add_special_tokens=special)["input_ids"])
        out: list[Completion | None] = [None] * len(requests)
        groups: dict[GenerationParams, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            groups[r.params].append(i)
        for params, idx in groups.items():
            idx.sort(key=lambda i: -len(encoded[i]))
            for batch in self._batches(idx, encoded):
                for i, c in zip(
                    batch, self._run_batch([encoded[i] for i in batch], params), strict=True
                ):
                    out[i] = c
        return out  # type: ignore[return-value]

    def _batches(self, idx: list[int], encoded: list[list[int]]) -> list[list[int]]:
        batches: list[list[int]] = []
        cur: list[int] = []
        for i in idx:  # longest first, so the first item of a batch sets its padded length
            longest = len(encoded[cur[0]]) if cur else len(encoded[i])
            if cur and (
                len(cur) >= self.batch_size or longest * (len(cur) + 1) > self.max_batch_tokens
            ):
                batches.append(cur)
                cur = []
            cur.append(i)
        if cur:
            batches.append(cur)
        return batches

    def _run_batch(self, prompts: list[list[int]], p: GenerationParams) -> list[Completion]:
        torch = _torch()
        from transformers import GenerationConfig, StoppingCriteriaList

        t0 = time.perf_counter()
        width = max(len(x) for x in prompts)
        over = [len(x) for x in prompts if len(x) + p.max_new_tokens > self._window]
        if over:
            log.warning(
                "prompt of %d tokens + %d new tokens exceeds the %d-token window",
                max(over),
                p.max_new_tokens,
                self._window,
            )
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, x in enumerate(prompts):
            ids[row, width - len(x) :] = torch.tensor(x, dtype=torch.long)
            mask[row, width - len(x) :] = 1
        sample = p.temperature > 0
        cfg = GenerationConfig(
            max_new_tokens=p.max_new_tokens,
            do_sample=sample,
            temperature=p.temperature if sample else None,
            top_p=p.top_p if sample else None,
            top_k=None,
            pad_token_id=pad,
            eos_token_id=sorted(self.eos_ids) or None,
            return_dict_in_generate=True,
            output_scores=p.logprobs,
        )
        if self.prefill_chunk and width > self.prefill_chunk:
            cfg.prefill_chunk_size = self.prefill_chunk
        criteria = StoppingCriteriaList()
        if p.stop:
            criteria.append(_StopOnStrings(self.tokenizer, p.stop, width))
        if sample and p.seed is not None:
            torch.manual_seed(p.seed)
        with torch.inference_mode():
            res = self.model.generate(
                input_ids=ids.to(self.device),
                attention_mask=mask.to(self.device),
                generation_config=cfg,
                stopping_criteria=criteria,
            )
        gen = res.sequences[:, width:].tolist()
        logprobs = None
        if p.logprobs and res.scores:
            steps = torch.stack(res.scores, dim=1).float().log_softmax(-1)  # (B, T, V)
            logprobs = steps
        latency = time.perf_counter() - t0
        out = []
        for row, (x, g) in enumerate(zip(prompts, gen, strict=True)):
            n = len(g)
            for j, tok in enumerate(g):
                if tok in self.eos_ids or tok == pad:
                    n = j
                    break
            ended = n < len(g) or (n < p.max_new_tokens and bool(p.stop))
            full = self.tokenizer.decode(g[:n], skip_special_tokens=True)
            cut, hit = find_stop(full, p.stop)
            text = full[:cut]
            c = Completion(
                text=text,
                stop_reason=hit,
                prompt_tokens=len(x),
                completion_tokens=n,
                finish_reason="stop"
                if (hit is not None or ended or n < p.max_new_tokens)
                else "length",
                latency_s=latency,
            )
            if logprobs is not None:
                c.token_logprobs = [float(logprobs[row, j, g[j]]) for j in range(n)]
                c.tokens = self._token_strings(g[:n])
            out.append(c)
        return out

    def _token_strings(self, ids: list[int]) -> list[str]:
        """Per-token text such that the pieces concatenate to the decoded text."""
        pieces, prev = [], ""
        for j in range(len(ids)):
            cur = self.tokenizer.decode(ids[: j + 1], skip_special_tokens=True)
            pieces.append(cur[len(prev) :])
            prev = cur
        return pieces


def _resolve(target: str) -> tuple[str, bool]:
    """(local folder or hub id, whether it is the embedded default)."""
    if target == "default":
        from chunkwise.llm.embedded import converted_dir

        return str(converted_dir()), True
    return target, False


#: options that a spec read from a file in a model folder (chunkwise_model.json,
#: adapter_config.json) may set: plain data. Anything that runs or fetches code
#: (``trust_remote_code``, a hub kernel repo as ``attn``) comes only from the user's own spec.
FILE_OPTIONS = frozenset(
    {
        "ctx",
        "dtype",
        "device",
        "chat",
        "batch_size",
        "max_batch_tokens",
        "prefill_chunk",
        "merge",
        "fast_head",
    }
)
#: attention implementations built into transformers (anything else names a hub kernel repo)
BUILTIN_ATTN = frozenset(
    {"sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention"}
)


def _safe_from_file(key: str, value: str) -> bool:
    return key in FILE_OPTIONS or (key == "attn" and value in BUILTIN_ATTN)


def _base_of_adapter(folder: Path) -> tuple[ModelSpec, Path]:
    """The base model an adapter folder names, and the file that named it."""
    from chunkwise.io import read_json

    meta = folder / BASE_SPEC_FILE
    if meta.exists():
        data, key = read_json(meta), "base"
    else:
        meta = folder / "adapter_config.json"
        data, key = read_json(meta), "base_model_name_or_path"
    base = data.get(key) if isinstance(data, dict) else None
    if not isinstance(base, str) or not base.strip():
        raise BadInput(f"{meta}: no {key!r} naming the base model of this adapter")
    try:
        spec = parse_spec(base if meta.name == BASE_SPEC_FILE else "hf:" + base)
    except BadInput as e:  # its message lists the valid forms over several lines
        why = str(e).splitlines()[0]
        raise BadInput(f"{meta}: base model {base!r} is not a usable model spec ({why})") from None
    if spec.backend != "hf" or spec.adapter is not None:
        raise BadInput(f"{meta}: base model {base!r} must be a plain hf: spec (no adapter)")
    return spec, meta


def _custom_code_error(path: str, e: ValueError) -> BadInput | None:
    """transformers' refusal to run a model's own code, as one line saying what to do."""
    text = str(e)
    if "trust_remote_code" not in text:
        return None
    return BadInput(
        f"model {path!r} needs its own Python code (custom architecture); chunkwise does not "
        "run it unless you ask: add ?trust_remote_code=1 to your --model spec "
        f"(e.g. hf:{path}?trust_remote_code=1) only if you trust that code"
    )


def load(spec: ModelSpec) -> LLM:
    target, adapter, options = spec.target, spec.adapter, dict(spec.options)
    folder = Path(target).expanduser()
    # a training run's step checkpoint: its run's model files, and for LoRA its base
    step = describe_step(folder) if adapter is None else None
    if step is not None and step.lora:
        base, source = _base_of_adapter(step.files)
        target = base.target
        options = {**file_options(base.options, source, _safe_from_file), **options}
    elif adapter is None and folder.is_dir() and (folder / "adapter_config.json").exists():
        base, source = _base_of_adapter(folder)
        target, adapter = base.target, str(folder)
        # the user's own options win; the file's may never enable code (FILE_OPTIONS)
        options = {**file_options(base.options, source, _safe_from_file), **options}
    o = spec_options(spec, HfOptions, options)  # (a bad value fails before the model loads)
    path, is_default = _resolve(target)
    if not is_default and not Path(path).expanduser().exists() and "/" not in path:
        raise BadInput(f"model {path!r} is neither a local folder nor a hub id (org/name)")
    torch = _torch()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trust = o.trust_remote_code
    cuda = torch.cuda.is_available()
    if o.device is None:  # a launcher's rank gets its own GPU (or its own cores)
        where = placement(n_gpus=torch.cuda.device_count() if cuda else 0)
        pin_cpus(where)
        device = where.device
    else:
        device = o.device
    dtype_name = o.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    if o.dtype is None and device.startswith("cpu"):
        dtype_name, why = choose_cpu_dtype()
        log.info("%s on cpu in %s: %s", spec.raw, dtype_name, why)
    try:
        dtype = getattr(torch, dtype_name)
    except AttributeError:
        raise BadInput(f"model spec {spec.raw!r}: unknown dtype {dtype_name!r}") from None
    attn = o.attn
    if attn is None:
        attn = "sdpa"
        if device.startswith("cuda"):
            try:
                import flash_attn  # noqa: F401

                attn = "flash_attention_2"
            except ImportError:
                pass
    t0 = time.perf_counter()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own log line says what is loading
    try:
        # A training run saves the tokenizer (with its chat template) beside an adapter.
        tok_src = (
            adapter if adapter and (Path(adapter) / "tokenizer_config.json").exists() else path
        )
        if step is not None:
            tok_src = str(step.files)
        tokenizer = AutoTokenizer.from_pretrained(tok_src, trust_remote_code=trust)
        if step is not None:
            model = load_step_model(step, path, dtype=dtype, attn=attn, trust=trust)
        else:
            model = AutoModelForCausalLM.from_pretrained(
                path, dtype=dtype, attn_implementation=attn, trust_remote_code=trust
            )
    except OSError as e:
        raise BadInput(f"cannot load model {path!r}: {str(e).splitlines()[0]}") from None
    except ValueError as e:
        err = _custom_code_error(path, e)
        if err is None:
            raise
        raise err from None
    if adapter:
        try:
            from peft import PeftModel
        except ImportError:
            raise MissingDependency("peft (for LoRA adapters)", "pip install peft") from None
        if not (Path(adapter) / "adapter_config.json").exists():
            raise BadInput(f"adapter folder {adapter!r} has no adapter_config.json")
        model = PeftModel.from_pretrained(model, adapter)
    if (adapter or (step is not None and step.lora)) and o.merge:
        # decoding never trains: fold B@A into the base weights (no per-layer LoRA matmuls)
        model = model.merge_and_unload()
    model.to(device).eval()
    if o.fast_head:
        fast_output_head(model)
    log.debug(
        "loaded %s in %.1f s on %s (%s, %s)",
        spec.raw,
        time.perf_counter() - t0,
        device,
        dtype_name,
        attn,
    )
    cfg = getattr(model.config, "text_config", model.config)
    window = o.ctx or int(getattr(cfg, "max_position_embeddings", 0) or 2048)
    if o.chat == "auto":
        # The embedded base is a base model, but an adapter trained on it with a chat template
        # saves that template with its tokenizer: the adapter is served as it was trained.
        own_tokenizer = tok_src != path
        chat = getattr(tokenizer, "chat_template", None) is not None and (
            own_tokenizer or not is_default
        )
    else:
        chat = o.chat
    prefill_chunk = o.prefill_chunk if o.prefill_chunk is not None else (0 if cuda else 2048)
    return HFLLM(
        model,
        tokenizer,
        window=window,
        chat=chat,
        batch_size=o.batch_size,
        max_batch_tokens=o.max_batch_tokens,
        prefill_chunk=prefill_chunk,
    )
