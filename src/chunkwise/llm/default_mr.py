"""``hf:default-mr``: the embedded Gemma-3-270M with the LoRA adapter that teaches it the
MapReduce protocol (trained by ``make default-mr`` from oracle records, shipped as package data
in ``chunkwise/models/default_mr/``), and its sibling ``hf:default-coa``, the Chain-of-Agents
worker/manager head (``make default-coa``, ``chunkwise/models/default_coa/``): the embedded
model's packaged adapters (:data:`PACKAGED`). Every function takes the adapter's name.

The adapter alone is shipped (a few MB); the tokenizer is the embedded model's, with the chat
template the adapter was trained under (``prompts/mapreduce/gemma_chat.jinja``). On first use
the pieces are put together in a cache folder (``$CHUNKWISE_CACHE/models/default-mr-<hash>``)
that the hf backend loads as an ordinary adapter folder over ``hf:default`` with chat prompts.
Decode it with the strategy options it was trained with (:func:`strategy_args`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.llm.model_defaults import (
    RECIPE_FILE,
    STRATEGY_FILE,
    read_recipe,
    read_strategy_file,
    recipe_strategy_options,
)
from chunkwise.llm.spec import ModelSpec

NAME = "default-mr"
#: packaged adapter name -> (package folder, env variable that overrides it, make target)
PACKAGED: dict[str, tuple[str, str, str]] = {
    "default-mr": ("default_mr", "CHUNKWISE_DEFAULT_MR", "default-mr"),
    "default-coa": ("default_coa", "CHUNKWISE_DEFAULT_COA", "default-coa"),
}
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
TEMPLATE = "mapreduce/gemma_chat.jinja"
#: decoding-only mapreduce options written into strategy.json beside the trained ones: the
#: oracle teaches the MapReduce adapter to quote its evidence, so a retrieval finding whose
#: quote is not in its chunk is made up (chunkwise.strategies.grounding), unless its answer is
#: a value copied with one slip (at a long value's edge, or a repeated digit miscounted), which
#: snaps to the chunk's value; and a finding that echoes a phrase the question quotes from a
#: chunk without that phrase is made up too (anchor_quotes)
DECODING: dict[str, Any] = {"grounding": True, "snap_quotes": True, "anchor_quotes": True}


def _entry(name: str) -> tuple[str, str, str]:
    if name not in PACKAGED:
        raise BadInput(f"no packaged adapter {name!r}; known: {', '.join(PACKAGED)}")
    return PACKAGED[name]


def package_dir(name: str = NAME) -> Path:
    """Where the committed adapter lives (its env variable, e.g. ``CHUNKWISE_DEFAULT_MR``,
    overrides, for tests)."""
    folder, env, _ = _entry(name)
    override = os.environ.get(env)
    if override:
        return Path(override)
    return Path(str(resources.files("chunkwise") / "models" / folder))


def _missing(name: str = NAME) -> BadInput:
    return BadInput(
        f"hf:{name} has no trained adapter in this installation ({package_dir(name)} holds no "
        f"adapter_model.safetensors): run `make {_entry(name)[2]}` to train it from oracle "
        "records, or use hf:default"
    )


def chat_template() -> str:
    return (resources.files("chunkwise.prompts") / TEMPLATE).read_text(encoding="utf-8")


def strategy_args(name: str = NAME) -> dict[str, Any]:
    """The mapreduce options the committed adapter was trained with (e.g. chunk_tokens)."""
    path = package_dir(name) / STRATEGY_FILE
    if not path.is_file():
        raise _missing(name)
    return dict(read_strategy_file(path).get("mapreduce", {}))


def model_dir(name: str = NAME) -> Path:
    """A loadable adapter folder for ``hf:<name>`` (built once per adapter version)."""
    src = package_dir(name)
    if not all((src / f).is_file() for f in ADAPTER_FILES):
        raise _missing(name)
    from chunkwise.environ import cache_root
    from chunkwise.llm.built_once import build_once
    from chunkwise.llm.embedded import converted_dir

    digest = hashlib.sha256()
    for f in ADAPTER_FILES:
        digest.update((src / f).read_bytes())
    template = chat_template()
    digest.update(template.encode())
    out = cache_root() / "models" / f"{name}-{digest.hexdigest()[:12]}"
    if _assembled(out):
        return out
    base = converted_dir()
    return build_once(out, _assembled, lambda tmp: _assemble(src, base, template, tmp))


def _assembled(folder: Path) -> bool:
    return (folder / "chunkwise_model.json").exists()  # written last


def _assemble(src: Path, base: Path, template: str, tmp: Path) -> None:
    """The adapter of ``src`` with the embedded tokenizer of ``base`` under ``template``."""
    for f in ADAPTER_FILES:
        shutil.copyfile(src / f, tmp / f)
    for f in base.iterdir():
        if f.name == "tokenizer.json":  # ~33 MB: linked, not copied
            os.symlink(f, tmp / f.name)
        elif f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copyfile(f, tmp / f.name)
    cfg_path = tmp / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.exists() else {}
    cfg["chat_template"] = template
    cfg_path.write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    (tmp / "chat_template.jinja").write_text(template, encoding="utf-8")
    (tmp / "chunkwise_model.json").write_text(
        json.dumps({"base": "hf:default?chat=on"}), encoding="utf-8"
    )


def counting_llm(window: int = 32768) -> Any:
    """``hf:default-mr`` for counting only: the embedded tokenizer with the adapter's chat
    template, prompts wrapped and measured as the hf backend wraps them, no weights (what the
    oracle teacher needs before any adapter exists)."""
    from transformers import AutoTokenizer

    from chunkwise.llm.base import LLM, template_kwargs
    from chunkwise.llm.embedded import converted_dir
    from chunkwise.text import HFTokenCounter

    tokenizer = AutoTokenizer.from_pretrained(str(converted_dir()))
    tokenizer.chat_template = chat_template()

    class TokenizerLLM(LLM):
        chat = True
        spec = f"hf:{NAME}(tokenizer)"

        def __init__(self) -> None:
            self.tokenizer = tokenizer
            self.counter = HFTokenCounter(tokenizer)

        @property
        def context_window(self) -> int:
            return window

        def count_tokens(self, text: str) -> int:
            return self.counter.count_tokens(text)

        def token_offsets(self, text: str) -> list[tuple[int, int]]:
            return self.counter.token_offsets(text)

        def encode(self, text: str) -> list[int]:
            return self.counter.encode(text)

        def decode(self, ids: Any) -> str:
            return self.counter.decode(ids)

        def prompt_tokens(self, prompt: Any) -> int:
            if isinstance(prompt, str):
                return len(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])
            text = self.tokenizer.apply_chat_template(
                prompt, tokenize=False, **template_kwargs(prompt)
            )
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

        def _generate(self, requests: Any) -> Any:
            raise BadInput(f"hf:{NAME} was opened for counting tokens only")

    return TokenizerLLM()


def resolve(spec: ModelSpec) -> ModelSpec:
    """``hf:default-mr?opts`` (or ``vllm:default-mr?opts``, or another name of
    :data:`PACKAGED`) as the spec of its adapter folder on the same backend (options kept)."""
    opts = {"chat": "on", **spec.options}
    return ModelSpec(spec.backend, str(model_dir(spec.target)), opts, None, spec.raw)


def _save_half(src: Path, dest: Path) -> None:
    """The adapter's fp32 tensors as fp16 (half the package size; the LoRA deltas and token
    rows are small numbers, well inside fp16's range; loading casts them back)."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = {
        k: v.to(torch.float16) if v.dtype == torch.float32 else v
        for k, v in load_file(str(src)).items()
    }
    save_file(tensors, str(dest), metadata={"format": "pt"})


def _relative_to(value: Any, root: Path) -> Any:
    """``value`` with every string path under ``root`` made relative to it, so a committed
    ``train_info.json`` names ``runs/...`` and not the training machine's checkout."""
    if isinstance(value, dict):
        return {k: _relative_to(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_relative_to(v, root) for v in value]
    prefix = f"{root}/"
    return value[len(prefix) :] if isinstance(value, str) and value.startswith(prefix) else value


def install(train_dir: Path, dest: Path | None = None, name: str = NAME) -> Path:
    """Copy a finished training run's adapter into the package data (``make default-mr``,
    ``make default-coa``), with the mapreduce options of its recipe (decoding must use the
    same ones)."""
    dest = dest or package_dir(name)
    missing = [f for f in ADAPTER_FILES if not (train_dir / f).is_file()]
    if missing:
        raise BadInput(f"{train_dir} is not a finished LoRA run: no {', '.join(missing)}")
    recipe_path = train_dir / RECIPE_FILE
    recipe = (read_recipe(recipe_path) if recipe_path.exists() else None) or {}
    trained = recipe_strategy_options(recipe, recipe_path)["mapreduce"]
    mr = {**(DECODING if name == NAME else {}), **trained}
    dest.mkdir(parents=True, exist_ok=True)
    for f in ADAPTER_FILES:
        if f.endswith(".safetensors"):
            _save_half(train_dir / f, dest / f)
        else:
            shutil.copyfile(train_dir / f, dest / f)
    info = train_dir / "train_info.json"
    if info.exists():
        data = _relative_to(json.loads(info.read_text(encoding="utf-8")), Path.cwd())
        (dest / "train_info.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    (dest / STRATEGY_FILE).write_text(
        json.dumps({"mapreduce": mr}, indent=1) + "\n", encoding="utf-8"
    )
    return dest


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m chunkwise.llm.default_mr")
    ap.add_argument("command", choices=["install"])
    ap.add_argument("train_dir", type=Path)
    ap.add_argument("--name", default=NAME, choices=sorted(PACKAGED))
    args = ap.parse_args(argv)
    try:
        print(install(args.train_dir, name=args.name))
    except BadInput as e:
        print(f"{args.name} install: error: {e}", file=sys.stderr)
        return 2
    return 0


__all__ = [
    "NAME",
    "PACKAGED",
    "chat_template",
    "counting_llm",
    "install",
    "model_dir",
    "package_dir",
    "resolve",
    "strategy_args",
]


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
