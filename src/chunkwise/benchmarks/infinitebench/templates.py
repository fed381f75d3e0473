"""InfiniteBench's official prompt templates, read from a user's copy of its ``src/prompt.py``.

The file is parsed as data, never imported or executed: :mod:`ast` finds the module-level
assignments ``<family>_templates = {"task": "template", ...}`` and only dict literals of string
keys and string values are accepted (``ast.literal_eval`` on that one node). Families are the
dict names without ``_templates`` (``gpt4``, ``claude2``, ``kimi``, ``yarn_mistral``); the
official scripts' model names that share a dict (``yarn-mistral``, ``yi-6b-200k``,
``yi-34b-200k``, ``chatglm3`` -> ``yarn_mistral``) are accepted too.

:func:`fill` builds a task's prompt from an example the way the official ``create_prompt``
does (``eval_utils.py``): the code_run call pulled out of the input, the four options as
``OPTION_A..D``, math_find's "What is <target> in the following list?" prefix, and for the
gpt4 family's math_calc the bare context (its scripts put the rest in chat messages). The
project carries none of the official text; results.json records which file, family and hash
were used.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput

#: official model names that use another family's templates (eval_utils.MODEL_TO_PROMPT_TEMPLATE)
FAMILY_ALIASES = {
    "yarn-mistral": "yarn_mistral",
    "yi-6b-200k": "yarn_mistral",
    "yi-34b-200k": "yarn_mistral",
    "chatglm3": "yarn_mistral",
}
_SUFFIX = "_templates"
_FUNC_CALL = re.compile(r"func_[0-9]+\(\-?[0-9]+\)")
_TARGET = re.compile(r"The .+ of")
#: stands in for the document while a template is filled, then splits it into (before, after)
_DOC = "\x00chunkwise-document\x00"


@dataclass(frozen=True)
class TemplateSet:
    """One family's templates from one file."""

    source: Path
    family: str
    templates: dict[str, str]
    file_sha256: str

    @property
    def sha256(self) -> str:
        """Hash of this family's templates (what changes a prompt)."""
        text = json.dumps(self.templates, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def task_sha256(self, task: str) -> str:
        return hashlib.sha256(self.template(task).encode("utf-8")).hexdigest()

    def describe(self) -> dict[str, Any]:
        return {
            "source": str(self.source),
            "family": self.family,
            "file_sha256": self.file_sha256,
            "templates_sha256": self.sha256,
        }

    def template(self, task: str) -> str:
        try:
            return self.templates[task]
        except KeyError:
            raise BadInput(
                f"{self.source}: the {self.family} templates have no {task!r} entry "
                f"(it has: {', '.join(sorted(self.templates))})"
            ) from None


def read_families(path: str | Path) -> dict[str, dict[str, str]]:
    """Every ``<family>_templates`` dict literal in ``path``, parsed, not executed."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise BadInput(f"--prompt-source {path}: no such file (give InfiniteBench's src/prompt.py)")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError) as e:
        raise BadInput(f"--prompt-source {path}: not a readable Python file ({e})") from None
    families: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id.endswith(_SUFFIX):
                try:
                    value = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                    continue  # not plain data: ignored, never evaluated
                if all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                    families[target.id[: -len(_SUFFIX)]] = value
    if not families:
        raise BadInput(
            f"--prompt-source {path}: no '<family>_templates = {{...}}' dicts of strings found"
        )
    return families


def load_templates(path: str | Path, family: str) -> TemplateSet:
    """The templates of ``family`` in ``path`` (see the module docstring)."""
    path = Path(path).expanduser().resolve()
    families = read_families(path)
    name = FAMILY_ALIASES.get(family, family)
    if name not in families:
        valid = sorted([*families, *(a for a, f in FAMILY_ALIASES.items() if f in families)])
        raise BadInput(f"--prompt-family {family!r} is not in {path}; valid: {', '.join(valid)}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return TemplateSet(path, name, families[name], digest)


def _format(template: str, values: dict[str, str], where: str) -> str:
    """``template.format(**values)`` for plain ``{name}`` fields only (no attribute or index
    look-ups, no conversions), so a template file cannot reach into Python objects."""
    out = []
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as e:
        raise BadInput(f"{where}: bad template ({e})") from None
    for literal, name, spec, conversion in parts:
        out.append(literal)
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            raise BadInput(f"{where}: template field {{{name}}} is not a plain name")
        if name not in values:
            raise BadInput(f"{where}: template field {{{name}}} has no value for this task")
        out.append(values[name])
    return "".join(out)


def fill(templates: TemplateSet, task: str, example: dict[str, Any], context: str) -> str:
    """The official prompt of ``task`` for ``example`` with ``context`` as its document."""
    where = f"{templates.source} ({templates.family}, {task}, id {example.get('id')})"
    if templates.family == "gpt4" and task == "math_calc":
        return context
    question = example.get("input") or ""
    options = list(example.get("options") or [])
    values = {"context": context, "input": question, "question": question}
    if task == "code_run":
        calls = _FUNC_CALL.findall(question)
        if not calls:
            raise BadInput(f"{where}: no func_N(x) call in the input {question!r}")
        values.update(func_call=calls[0], func=calls[0].split("(")[0])
    elif task == "math_find":
        found = _TARGET.findall(question)
        if not found:
            raise BadInput(f"{where}: cannot tell what to find from the input {question!r}")
        values["prefix"] = f"What is {found[0].lower()[:-3]} in the following list?"
    if task in ("code_debug", "longbook_choice_eng"):
        if len(options) < 4:
            raise BadInput(f"{where}: the template needs four options, the example has {options}")
        values.update({f"OPTION_{letter}": options[i] for i, letter in enumerate("ABCD")})
    return _format(templates.template(task), values, where)


def frame(templates: TemplateSet, task: str, example: dict[str, Any]) -> tuple[str, str]:
    """The official prompt around the document: (text before it, text after it)."""
    text = fill(templates, task, example, _DOC)
    if text.count(_DOC) != 1:
        raise BadInput(
            f"{templates.source} ({templates.family}, {task}): the template must hold "
            "{context} exactly once"
        )
    before, after = text.split(_DOC)
    return before, after


def question_of(templates: TemplateSet, task: str, example: dict[str, Any]) -> str:
    """The official prompt without its document: the question multi-call strategies ask
    (LLM×MapReduce asks InfiniteBench's template with the context removed)."""
    before, after = frame(templates, task, example)
    lines = [line for line in (before + "\n" + after).splitlines() if line.strip()]
    return "\n".join(lines).strip() or (example.get("input") or "").strip()  # may be ""


__all__ = ["FAMILY_ALIASES", "TemplateSet", "fill", "frame", "load_templates", "question_of"]
