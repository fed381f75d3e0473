"""Does a MapReduce adapter tell the chunks that hold the answer from those that do not?

Teacher-forced on oracle map examples (``chunkwise synth --teacher oracle``), it reads the
probability a LoRA adapter over the embedded model gives the *deciding* token of the target:
the first token where the chunk's target and the empty record of the same document part ways
(right after ``Extracted Information:`` for ``Nothing in this part ...``; after the key for
kv_retrieval's ``"KEY": not in this part.``). A model that has learned the search puts it high
on both kinds of chunk (the finding's token on the chunk with the evidence, the empty record's
on the others); one that guesses puts about the same mass on "finding" everywhere. Minutes on
a CPU, so a recipe change can be checked before an hour-long run:

    .venv/bin/python bench/decision_probe.py --adapter src/chunkwise/models/default_mr \\
        --data runs/default-mr/synth/retrieval/data/oracle.jsonl --family kv_retrieval --k 8

Prints one JSON line per example and a summary table; ``--out`` also writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "embedded" / "default-mr.yaml"


def load_tokenizer_and_recipe() -> tuple[Any, Any]:
    """The embedded tokenizer under the recipe's chat template, and the recipe."""
    from chunkwise.config import load_config
    from chunkwise.llm.embedded import converted_dir
    from chunkwise.train.recipe import Recipe
    from chunkwise.train.tokenizer import load_tokenizer, resolve_chat_template

    recipe = load_config(Recipe, RECIPE)
    tok = load_tokenizer(str(converted_dir()))
    template = recipe.model.chat_template  # a repo-relative .jinja file in the recipe
    resolve_chat_template(tok, str(REPO / template) if template.endswith(".jinja") else template)
    return tok, recipe


def load_model(adapter: Path) -> Any:
    """The embedded model (fp32) with the LoRA adapter, for inference."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from chunkwise.llm.embedded import converted_dir

    base = AutoModelForCausalLM.from_pretrained(converted_dir(), dtype=torch.float32)
    return PeftModel.from_pretrained(base, adapter).eval()


def decision_index(labels: list[int], contrast: list[int]) -> int:
    """The position in ``labels`` of the first target token that differs from the target of
    ``contrast`` (the other kind of chunk of the same document): where the two records part
    ways. Targets are the labels that are not -100."""
    first = next(i for i, x in enumerate(labels) if x != -100)
    mine = labels[first:]
    other = [x for x in contrast if x != -100]
    for j, (a, b) in enumerate(zip(mine, other, strict=False)):
        if a != b:
            return first + j
    raise ValueError("the two targets do not part ways (one is a prefix of the other)")


def probe(adapter: Path, data: Path, family: str, k: int) -> list[dict[str, Any]]:
    import torch

    from chunkwise.strategies.protocol import parse_record
    from chunkwise.train.formats import build_examples

    tok, recipe = load_tokenizer_and_recipe()
    recipe.data.no_information_keep = 1.0
    examples, _ = build_examples(
        recipe.data, tok, recipe.data.prompts, [data]
    )  # bad data fails here
    maps: list[tuple[Any, list[int], str, str]] = []  # (example, labels, kind, document id)
    labels_of: dict[tuple[str, str], list[int]] = {}  # (document, kind) -> one example's labels
    for ex in examples:
        if ex.stage != "map" or not ex.id.startswith(f"{family}-"):
            continue
        labels = ex.labels.tolist()
        target = tok.decode([x for x in labels if x != -100])
        kind = "empty" if parse_record(target).no_information else "evidence"
        doc = ex.id.rsplit(":", 1)[0]
        maps.append((ex, labels, kind, doc))
        labels_of.setdefault((doc, kind), labels)
    model = load_model(adapter)
    rows: dict[str, list[dict[str, Any]]] = {"evidence": [], "empty": []}
    for ex, labels, kind, doc in maps:
        # None: a document with one kind of chunk only
        contrast = labels_of.get((doc, "empty" if kind == "evidence" else "evidence"))
        if contrast is None or len(rows[kind]) >= k:
            continue
        at = decision_index(labels, contrast)
        ids = ex.input_ids.tolist()
        with torch.no_grad():
            p = model(input_ids=torch.tensor([ids[:at]])).logits[0, -1].float().softmax(-1)
        rows[kind].append(
            {
                "id": ex.id,
                "chunk": kind,
                "tokens": len(ids),
                "p_target": round(float(p[ids[at]]), 4),
                "target_token": tok.decode([ids[at]]),
            }
        )
        print(json.dumps(rows[kind][-1]), flush=True)
        if all(len(v) >= k for v in rows.values()):
            break
    return rows["evidence"] + rows["empty"]


def summary_table(rows: list[dict[str, Any]]) -> str:
    """Per kind of chunk: how many, and the median, least and greatest probability."""
    from chunkwise.tables import markdown_table

    out = []
    for kind in ("evidence", "empty"):
        ps = [r["p_target"] for r in rows if r["chunk"] == kind]
        if ps:
            out.append(
                [kind, len(ps), *(f"{v:.3f}" for v in (statistics.median(ps), min(ps), max(ps)))]
            )
    return markdown_table(out, ["chunk", "n", "p(deciding token) median", "min", "max"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--adapter", type=Path, required=True, help="a LoRA folder over hf:default")
    ap.add_argument("--data", type=Path, required=True, help="oracle records (jsonl)")
    ap.add_argument("--family", default="kv_retrieval")
    ap.add_argument("--k", type=int, default=8, help="examples of each kind of chunk")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not (args.adapter / "adapter_config.json").is_file():
        raise SystemExit(f"decision_probe: {args.adapter} has no adapter_config.json")
    if not args.data.is_file():
        raise SystemExit(f"decision_probe: no such file {args.data}")
    from chunkwise.errors import BadInput

    try:
        rows = probe(args.adapter, args.data, args.family, args.k)
    except BadInput as e:  # an empty or malformed --data file, named in the message
        raise SystemExit(f"decision_probe: {e}") from None
    if not rows:
        raise SystemExit(f"decision_probe: no {args.family} map examples in {args.data}")
    print("\n" + summary_table(rows))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
