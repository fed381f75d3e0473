"""The Pyramid-Align record: its fields, their types, and a validator.

::

    {id, source_id, document, question,
     intermediate: {map: [R, ...], collapse: [[R, ...], ...],   # M: MapReduce's trace
                    reduce?: {rationale, answer}},                  # the reduce call's output
     answer,
     meta: {node_level, node_ids, levels, model, prompt_version,
            node_kind, leaves, char_span,
            mapreduce: {prompt_version, prompt_kind, chunk_budget, chunks},
            task?, family?, seed?, length_tokens?}}

``R`` is a parsed map/collapse result (:class:`chunkwise.strategies.protocol.Record`):
``{extracted_information, rationale, answer, confidence, no_information, raw, sources}``, where
``sources`` are chunk indices. ``meta.mapreduce.chunks`` holds the ``[start, end)`` character
span of every chunk MapReduce read, so ``document[start:end]`` is exactly the text of the map
call for chunk ``i`` (training renders the same prompts from it). ``node_level`` is 0 for a leaf;
``levels`` counts the pyramid's levels including the leaves (a one-leaf pyramid has 1);
``node_ids`` names the node(s) the question was written from; ``node_kind`` is leaf/mid/root;
``leaves`` the first and last leaf the node covers and ``char_span`` the document span.
Keys marked ``?`` are optional: ``intermediate.reduce`` holds the reduce rationale that
mapreduce-mode training puts before the answer (``train/formats.py``); ``meta.task`` is the task
family the question belongs to (prompt set; default qa); the oracle teacher adds the document
``family``, its ``seed`` and target ``length_tokens``.
"""

from __future__ import annotations

from typing import Any

MAP_RECORD_KEYS = (
    "extracted_information",
    "rationale",
    "answer",
    "confidence",
    "no_information",
    "raw",
    "sources",
)
RECORD_KEYS = ("id", "source_id", "document", "question", "intermediate", "answer", "meta")
META_KEYS = (
    "node_level",
    "node_ids",
    "levels",
    "model",
    "prompt_version",
    "node_kind",
    "leaves",
    "char_span",
    "mapreduce",
)
MAPREDUCE_KEYS = ("prompt_version", "prompt_kind", "chunk_budget", "chunks")
OPTIONAL_META_KEYS = ("task", "family", "seed", "length_tokens")
REDUCE_KEYS = ("rationale", "answer")


def map_record(d: dict[str, Any]) -> dict[str, Any]:
    """A trace output normalized to exactly the map-record fields and types."""
    conf = d.get("confidence")
    ans = d.get("answer")
    return {
        "extracted_information": str(d.get("extracted_information") or ""),
        "rationale": str(d.get("rationale") or ""),
        "answer": None if ans is None else str(ans),
        "confidence": None if conf is None else float(conf),
        "no_information": bool(d.get("no_information", False)),
        "raw": str(d.get("raw") or ""),
        "sources": [int(s) for s in d.get("sources") or []],
    }


def features() -> Any:
    """``datasets.Features`` of a record (explicit, so every shard has the same schema)."""
    from datasets import Features, Value

    rec = {
        "extracted_information": Value("string"),
        "rationale": Value("string"),
        "answer": Value("string"),
        "confidence": Value("float64"),
        "no_information": Value("bool"),
        "raw": Value("string"),
        "sources": [Value("int64")],
    }
    return Features(
        {
            "id": Value("string"),
            "source_id": Value("string"),
            "document": Value("string"),
            "question": Value("string"),
            "intermediate": {"map": [rec], "collapse": [[rec]]},
            "answer": Value("string"),
            "meta": {
                "node_level": Value("int64"),
                "node_ids": [Value("string")],
                "levels": Value("int64"),
                "model": Value("string"),
                "prompt_version": Value("string"),
                "node_kind": Value("string"),
                "leaves": [Value("int64")],
                "char_span": [Value("int64")],
                "mapreduce": {
                    "prompt_version": Value("string"),
                    "prompt_kind": Value("string"),
                    "chunk_budget": Value("int64"),
                    "chunks": [[Value("int64")]],
                },
            },
        }
    )


def _is_str(x: Any, nonempty: bool = True) -> bool:
    return isinstance(x, str) and (bool(x.strip()) or not nonempty)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_map_record(r: Any, where: str, n_chunks: int) -> list[str]:
    if not isinstance(r, dict):
        return [f"{where} is not an object"]
    errs = []
    if tuple(sorted(r)) != tuple(sorted(MAP_RECORD_KEYS)):
        errs.append(f"{where} keys {sorted(r)} != {sorted(MAP_RECORD_KEYS)}")
        return errs
    for k in ("extracted_information", "rationale", "raw"):
        if not isinstance(r[k], str):
            errs.append(f"{where}.{k} is not a string")
    if r["answer"] is not None and not isinstance(r["answer"], str):
        errs.append(f"{where}.answer is not a string or null")
    c = r["confidence"]
    if c is not None and (
        not isinstance(c, (int, float)) or isinstance(c, bool) or not 0 <= c <= 5
    ):
        errs.append(f"{where}.confidence {c!r} is not null or a number in [0, 5]")
    if not isinstance(r["no_information"], bool):
        errs.append(f"{where}.no_information is not a boolean")
    s = r["sources"]
    if not isinstance(s, list) or not s or not all(_is_int(i) and 0 <= i < n_chunks for i in s):
        errs.append(f"{where}.sources {s!r} are not chunk indices in [0, {n_chunks})")
    return errs


def validate_record(rec: Any) -> list[str]:
    """Every way ``rec`` departs from the record format (empty list: valid)."""
    if not isinstance(rec, dict):
        return ["record is not an object"]
    if tuple(sorted(rec)) != tuple(sorted(RECORD_KEYS)):
        return [f"record keys {sorted(rec)} != {sorted(RECORD_KEYS)}"]
    errs = []
    for k in ("id", "source_id", "document", "answer"):
        if not _is_str(rec[k]):
            errs.append(f"{k} is not a non-empty string")
    q = rec["question"]
    if not _is_str(q) or not q.strip():  # an instruction or a cue ("... the key is:") too
        errs.append("question is not a non-empty string")
    meta = rec["meta"]
    if not isinstance(meta, dict) or not (
        set(META_KEYS) <= set(meta) <= set(META_KEYS) | set(OPTIONAL_META_KEYS)
    ):
        return [
            *errs,
            f"meta keys {sorted(meta) if isinstance(meta, dict) else meta!r} != {sorted(META_KEYS)}"
            f" (+ optional {', '.join(OPTIONAL_META_KEYS)})",
        ]
    for k in ("task", "family"):
        if k in meta and not _is_str(meta[k]):
            errs.append(f"meta.{k} is not a non-empty string")
    if "task" in meta and _is_str(meta["task"]):
        from chunkwise.strategies.base import TASK_FAMILIES

        if meta["task"] not in TASK_FAMILIES:
            errs.append(f"meta.task {meta['task']!r} is not one of {', '.join(TASK_FAMILIES)}")
    for k in ("seed", "length_tokens"):
        if k in meta and not _is_int(meta[k]):
            errs.append(f"meta.{k} is not an integer")
    levels, level = meta["levels"], meta["node_level"]
    if not (_is_int(levels) and levels >= 1 and _is_int(level) and 0 <= level < levels):
        errs.append(f"meta.node_level {level!r} / levels {levels!r}: need 0 <= node_level < levels")
    ids = meta["node_ids"]
    if not isinstance(ids, list) or not ids or not all(_is_str(i) for i in ids):
        errs.append("meta.node_ids is not a non-empty list of strings")
    for k in ("model", "prompt_version"):
        if not _is_str(meta[k]):
            errs.append(f"meta.{k} is not a non-empty string")
    if meta["node_kind"] not in ("leaf", "mid", "root"):
        errs.append(f"meta.node_kind {meta['node_kind']!r} is not leaf/mid/root")
    doc_len = len(rec["document"]) if isinstance(rec["document"], str) else 0
    for k in ("leaves", "char_span"):
        v = meta[k]
        if not (
            isinstance(v, list) and len(v) == 2 and all(_is_int(x) for x in v) and 0 <= v[0] <= v[1]
        ):
            errs.append(f"meta.{k} {v!r} is not an ordered [first, last] pair")
    cs = meta["char_span"]
    if isinstance(cs, list) and len(cs) == 2 and _is_int(cs[1]) and cs[1] > doc_len:
        errs.append(f"meta.char_span {cs!r} runs past the document ({doc_len} chars)")
    mr = meta["mapreduce"]
    n_chunks = 0
    if not isinstance(mr, dict) or tuple(sorted(mr)) != tuple(sorted(MAPREDUCE_KEYS)):
        errs.append(
            f"meta.mapreduce keys {sorted(mr) if isinstance(mr, dict) else mr!r} != {sorted(MAPREDUCE_KEYS)}"
        )
    else:
        for k in ("prompt_version", "prompt_kind"):
            if not _is_str(mr[k]):
                errs.append(f"meta.mapreduce.{k} is not a non-empty string")
        if not (_is_int(mr["chunk_budget"]) and mr["chunk_budget"] > 0):
            errs.append("meta.mapreduce.chunk_budget is not a positive integer")
        chunks = mr["chunks"]
        ok = (
            isinstance(chunks, list)
            and bool(chunks)
            and all(
                isinstance(c, list)
                and len(c) == 2
                and all(_is_int(x) for x in c)
                and 0 <= c[0] < c[1] <= doc_len
                for c in chunks
            )
        )
        if not ok:
            errs.append("meta.mapreduce.chunks are not [start, end) spans inside the document")
        else:
            n_chunks = len(chunks)
    m = rec["intermediate"]
    if not isinstance(m, dict) or tuple(sorted(set(m) - {"reduce"})) != ("collapse", "map"):
        return [*errs, "intermediate must be {map: [...], collapse: [[...]], reduce?: {...}}"]
    if "reduce" in m:
        red = m["reduce"]
        if not isinstance(red, dict) or not set(red) <= set(REDUCE_KEYS):
            errs.append(f"intermediate.reduce must be an object with keys {REDUCE_KEYS}")
        elif not all(isinstance(v, str) for v in red.values()):
            errs.append("intermediate.reduce values are not strings")
    if not isinstance(m["map"], list) or not m["map"]:
        errs.append("intermediate.map is not a non-empty list")
    else:
        if n_chunks and len(m["map"]) != n_chunks:
            errs.append(f"intermediate.map has {len(m['map'])} records for {n_chunks} chunks")
        for i, r in enumerate(m["map"]):
            errs += _check_map_record(r, f"intermediate.map[{i}]", n_chunks)
    if not isinstance(m["collapse"], list) or not all(isinstance(g, list) for g in m["collapse"]):
        errs.append("intermediate.collapse is not a list of lists")
    else:
        for j, g in enumerate(m["collapse"]):
            for i, r in enumerate(g):
                errs += _check_map_record(r, f"intermediate.collapse[{j}][{i}]", n_chunks)
    return errs
