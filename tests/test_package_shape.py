"""The package's shape, held by tests: imports run from higher layers to lower ones only, no two
modules import each other (directly or round a loop, lazy imports inside functions included),
and no module grows past the size a reader takes in at once.

The import graph is read from the source with :mod:`ast` (no module is imported), so a lazy
``from chunkwise.x import y`` inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "chunkwise"

#: the layers, lowest first: a module may import from its own layer and the ones below it.
#: Each name is a top-level module or subpackage of chunkwise.
LAYERS: list[set[str]] = [
    # plain utilities: no model, no strategy, no data
    {
        "errors",
        "environ",
        "redact",
        "logs",
        "io",
        "digests",
        "config",
        "options",
        "documents",
        "run_folders",
        "stats",
        "tables",
    },
    {"text", "prompts", "embed"},  # tokens and chunks, prompt data, embedders
    {"llm"},  # the one LLM interface and its backends
    {"strategies"},  # ways of reading a long document
    {"data"},  # document generators with ground truth
    {"benchmarks"},  # one package per benchmark
    {"synth", "train"},  # making training data, training
    {"eval"},  # the evaluation harness
    {"experiments"},  # what the bench scripts share: a cell as an eval run, the ledger
    {"serve"},  # the OpenAI-compatible server
    {"demo"},  # the whole loop at laptop scale
    {"commands", "cli", "__main__"},  # the command line
]

#: lines a module may have (issue #46: each module one job, none above ~500 lines)
MAX_LINES = 520


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module (or package) ``name`` lives in: ``chunkwise.llm.spec.parse_spec`` ->
    ``chunkwise.llm.spec``."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (imports for annotations
    only, which never run)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the chunkwise modules it imports (anywhere in its body)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [f"{base}.{a.name}" for a in node.names]
            for name in targets:
                if not name.startswith("chunkwise"):
                    continue
                target = _resolve(name, modules)
                if target and target != mod:
                    graph[mod].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _layer(module: str) -> int | None:
    top = module.split(".")[1] if "." in module else ""
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    return None


def test_no_module_imports_itself_round_a_loop():
    cycles = _cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_every_package_has_a_layer():
    unplaced = sorted({m.split(".")[1] for m in _modules() if "." in m and _layer(m) is None})
    assert not unplaced, f"add these to LAYERS in {__file__}: {unplaced}"


def test_imports_run_from_higher_layers_to_lower_ones():
    upward = [
        f"{mod} (layer {_layer(mod)}) imports {target} (layer {_layer(target)})"
        for mod, targets in import_graph().items()
        for target in sorted(targets)
        if "." in mod and "." in target and (_layer(mod) or 0) < (_layer(target) or 0)
    ]
    assert not upward, "imports from a lower layer up:\n" + "\n".join(upward)


def test_modules_stay_small():
    big = {
        _module_name(p): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not big, f"modules over {MAX_LINES} lines (split them by job): {big}"


def test_the_checks_see_what_they_check():
    """The graph reader is not blind: it finds a lazy import inside a function, a relative
    import and a cycle built for it."""
    graph = import_graph()
    # chunkwise.llm.loading imports the packaged adapters at the top, the backends by name
    assert "chunkwise.llm.default_mr" in graph["chunkwise.llm.loading"]
    assert "chunkwise.llm.spec" in graph["chunkwise.llm.default_mr"]
    # a lazy import inside a function counts; one under ``if TYPE_CHECKING:`` does not
    lazy = ast.parse("def f():\n    from chunkwise.x import y\n")
    typing_only = ast.parse("if TYPE_CHECKING:\n    from chunkwise.x import y\n")
    assert any(isinstance(n, ast.ImportFrom) for n in _runtime_nodes(lazy))
    assert not any(isinstance(n, ast.ImportFrom) for n in _runtime_nodes(typing_only))
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("name", ["chunkwise.eval.runner", "chunkwise.cli"])
def test_layers_are_ordered(name):
    assert _layer(name) is not None
    assert _layer("chunkwise.errors") == 0
