"""The benchmark registry: name -> how to load a task, ask its questions and score the answers.

A benchmark is a small registered unit, so the runner never special-cases one: it loads a
task's examples (:class:`~chunkwise.benchmarks.types.Example`), turns each into a
:class:`~chunkwise.strategies.Query` with :attr:`Benchmark.build_query`, and scores the
predictions with :attr:`Benchmark.score`. Each benchmark is a subpackage of
:mod:`chunkwise.benchmarks` whose ``__init__`` calls :func:`register_benchmark`; the
subpackages are found and imported on first use (:func:`discover`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from chunkwise.benchmarks import evidence as _evidence
from chunkwise.benchmarks.checks import check_examples
from chunkwise.benchmarks.types import TaskData
from chunkwise.errors import BadInput


class Templates(Protocol):
    """A benchmark's official prompt templates (``--prompt-source``), as its
    :attr:`Benchmark.load_templates` returns them."""

    def describe(self) -> dict[str, Any]:
        """What identifies them in results.json (source file, family, hashes)."""
        ...


def _auto_is_none(extract: str, strategy: str | None) -> str:
    """The default :attr:`Benchmark.resolve_extract`: ``auto`` is the text as it is."""
    return "none" if extract == "auto" else extract


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: its tasks, how its ``--data`` is read, asked and scored."""

    name: str
    tasks: tuple[str, ...]
    #: ``parse_data(text) -> spec`` checks a ``--data`` value before any model is loaded
    parse_data: Callable[[str], Any]
    #: ``load(task, spec, *, limit, revision, seed, count_tokens) ->``
    #: :class:`~chunkwise.benchmarks.types.TaskData`
    load: Callable[..., TaskData]
    #: ``build_query(task, example, kind, window) -> Query``; kind is chat | base
    build_query: Callable[..., Any]
    #: ``score(task, prediction, ground_truth, scorer, extract) -> float in [0, 1]``
    score: Callable[[str, str, Any, str, str], float]
    scorers: tuple[str, ...] = ("official",)
    extractors: tuple[str, ...] = ("none",)
    #: version string of the benchmark's question wording (recorded in results.json)
    prompt_version: Callable[[], str] = lambda: "0"
    #: short display names for tables and plots
    display: dict[str, str] = field(default_factory=dict)
    default_data: str = "hub"
    #: ``available_tasks(data_spec) -> tasks`` the data can provide (``--tasks all``); None:
    #: every task
    available_tasks: Callable[[Any], Sequence[str]] | None = None
    #: ``load_templates(path, family) -> templates`` for ``--prompt-source`` (official prompt
    #: files); ``build_query`` then takes ``templates=``. None: the benchmark has none
    load_templates: Callable[[str, str], Templates] | None = None
    #: ``extract_answer(task, text, extract) -> text`` the scorer reads (recorded per sample)
    extract_answer: Callable[[str, str, str], str] | None = None
    #: ``task_config(task, kind, templates) -> dict`` what defines a task's prompts (hashed)
    task_config: Callable[[str, str, Templates | None], dict[str, Any]] | None = None
    #: ``resolve_extract(extract, strategy) -> extractor``: what ``extract: auto`` means for
    #: output written by ``strategy``'s prompts (any other name stands for itself); default:
    #: ``auto`` is ``none``
    resolve_extract: Callable[[str, str | None], str] = _auto_is_none
    #: ``reads_raw(extract) -> bool``: whether the extractor reads the last model call's raw
    #: text (a prediction line's ``raw_output``) rather than the strategy's answer
    reads_raw: Callable[[str], bool] = lambda extract: False
    #: answer markers a completion scaffold may end with: a prediction's ``raw_output`` puts the
    #: one its last prompt ended with back in front of the reply (as raw-reading extractors
    #: expect); ``Answer:`` is every strategy's default answer prefix
    answer_markers: tuple[str, ...] = ("Answer:",)
    #: the Hub revision ``--data hub`` reads when no ``--revision`` is given, pinned in the run's
    #: config.yaml; None: the loader picks, and the config leaves it unset
    hub_revision: str | None = None
    #: ``evidence(task, example) -> [(start, end), ...] | None``: where the gold evidence is
    #: in the example's context (:mod:`chunkwise.benchmarks.evidence`); None: unknown. Default:
    #: the spans its generator recorded in the example's ``evidence`` field, if any
    evidence: Callable[[str, dict[str, Any]], list[tuple[int, int]] | None] = _evidence.recorded

    def all_tasks(self, data_spec: Any) -> list[str]:
        if self.available_tasks is None:
            return list(self.tasks)
        return list(self.available_tasks(data_spec))

    def extracted(self, task: str, text: str, extract: str) -> str:
        return text if self.extract_answer is None else self.extract_answer(task, text, extract)

    def check_tasks(self, tasks: Sequence[str]) -> list[str]:
        """The tasks, deduplicated in order; an unknown one is an error listing the valid."""
        out: list[str] = []
        for t in tasks:
            t = t.strip()
            if not t:
                continue
            if t not in self.tasks:
                raise BadInput(
                    f"unknown {self.name} task {t!r}; valid tasks: {', '.join(self.tasks)}"
                )
            if t not in out:
                out.append(t)
        if not out:
            raise BadInput(f"no tasks given; valid {self.name} tasks: {', '.join(self.tasks)}")
        return out

    def check_scoring(self, scorer: str, extract: str) -> None:
        if scorer not in self.scorers:
            raise BadInput(f"unknown scorer {scorer!r}; valid scorers: {', '.join(self.scorers)}")
        if extract not in self.extractors:
            raise BadInput(
                f"unknown extractor {extract!r}; valid extractors: {', '.join(self.extractors)}"
            )


BENCHMARKS: dict[str, Callable[[], Benchmark]] = {}


def register_benchmark(name: str, factory: Callable[[], Benchmark]) -> None:
    """Register a benchmark; the factory is called on first use (imports stay lazy)."""
    BENCHMARKS[name] = factory


_discovered = False


def discover() -> dict[str, Callable[[], Benchmark]]:
    """Import every subpackage of :mod:`chunkwise.benchmarks` once (each registers itself)."""
    global _discovered
    if not _discovered:
        import importlib
        import logging
        import pkgutil

        _discovered = True
        # the package's own folder (this module's), read without importing the package
        for info in pkgutil.iter_modules([str(Path(__file__).resolve().parent)]):
            if not info.ispkg:
                continue
            try:
                importlib.import_module(f"chunkwise.benchmarks.{info.name}")
            except ImportError as e:  # a peer's optional dependency: the others still work
                logging.getLogger(__name__).warning("benchmark %s unavailable: %s", info.name, e)
    return BENCHMARKS


def get_benchmark(name: str) -> Benchmark:
    """The registered benchmark ``name``; its ``load`` checks the examples it returns."""
    factory = BENCHMARKS.get(name) or discover().get(name)
    if factory is None:
        valid = ", ".join(sorted(BENCHMARKS))  # sorted: the same list whatever was imported first
        raise BadInput(f"unknown benchmark {name!r}; valid benchmarks: {valid}")
    return checked(factory())


def checked(bench: Benchmark) -> Benchmark:
    """``bench`` whose ``load`` also checks the examples against the runner's contract
    (:func:`chunkwise.benchmarks.checks.check_examples`: unique string or integer ids, string
    context and input, options a list of strings) before any model call. Loaders check their
    records themselves, naming ``file:line``; this is the backstop for any that misses one."""
    load = bench.load

    def checked_load(task: str, spec: Any, **kwargs: Any) -> TaskData:
        data = load(task, spec, **kwargs)
        check_examples(data.examples, f"{bench.name} {task}")
        return data

    return replace(bench, load=checked_load)


__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "Templates",
    "checked",
    "discover",
    "get_benchmark",
    "register_benchmark",
]
