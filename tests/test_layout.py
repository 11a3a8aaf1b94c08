"""The house by concern (issue 19): packages that show the layers, imports that only point down,
no import cycle even counting imports inside functions, and rooms of one job each."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "smart_search"
# Top to bottom. A module may import its own package and any package below its own, never one
# above: the shell calls the search walk and the report; the walk calls the budget, which keeps
# its state in the store, which reads the host's settings; the host learns which sources exist
# from the registry of sources, whose modules are wire formats only; text safety, the contract
# and errors sit under everything. `smart_search/__init__` (version, name) is the floor. Imports
# under `if TYPE_CHECKING:` are annotations only, never run, and do not count.
LAYERS = (
    ("shell",),
    ("report",),
    ("search",),
    ("logs",),
    ("budget",),
    ("store",),
    ("host",),
    ("sources",),
    ("text",),
    ("contract",),
    ("errors",),
    ("",),
)
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = modules()


def imports_of(name: str) -> set[str]:
    """Every module of the package `name` imports, at the top or inside a function."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module or ""
            for alias in node.names:
                full = f"{base_name}.{alias.name}"
                out.add(full if full in MODULES else base_name)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: imports_of(name) for name in MODULES}


def layer(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_sits_in_a_known_layer() -> None:
    unknown = {layer(m) for m in MODULES} - set(RANK) - {"__main__"}
    assert not unknown, f"packages without a layer in LAYERS: {sorted(unknown)}"


def upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports from a module into a package of a higher layer."""
    return sorted(
        (m, t)
        for m, targets in graph.items()
        for t in targets
        if layer(m) != "__main__" and layer(m) != layer(t) and RANK[layer(t)] < RANK[layer(m)]
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles (strongly connected components of more than one module; Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in graph:
        if name not in index:
            visit(name)
    return found


def test_imports_point_only_down_the_layers() -> None:
    assert not upward(GRAPH), f"imports that point up a layer: {upward(GRAPH)}"


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    assert not cycles(GRAPH), f"import cycles: {cycles(GRAPH)}"


def test_the_checks_catch_a_lazy_import_up_a_layer_and_the_cycle_it_makes() -> None:
    """A lazy import hides a cycle; it does not remove it. The walk reads imports inside
    functions, and both checks see what one would do."""
    tree = ast.parse("def f():\n    from ..search import tools\n")
    lazy = next(n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom))
    assert (lazy.level, lazy.module) == (2, "search")
    planted = {k: set(v) for k, v in GRAPH.items()}
    planted["smart_search.budget.quota"].add("smart_search.search.tools")
    assert ("smart_search.budget.quota", "smart_search.search.tools") in upward(planted)
    assert any("smart_search.budget.quota" in c for c in cycles(planted))


def test_at_most_fifteen_modules_directly_in_the_package() -> None:
    direct = [m for m in MODULES if m.count(".") == 1]
    assert len(direct) <= 15, sorted(direct)


def test_rooms_of_one_job_each() -> None:
    """No module past 600 lines; at most three functions past 60 lines in the whole package."""
    long_modules = []
    long_functions = []
    for name, path in MODULES.items():
        text = path.read_text()
        if text.count("\n") > 600:
            long_modules.append(name)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.end_lineno - node.lineno + 1 > 60:
                    long_functions.append(f"{name}.{node.name}")
    assert not long_modules
    assert len(long_functions) <= 3, long_functions


def private_imports(source: str) -> list[str]:
    """The names a module's text imports from another module of the package that are that
    module's private names (one leading underscore; `__version__` and the like are public)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").startswith("smart_search")
        ):
            found += [
                f"{node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")
            ]
    return found


def test_at_most_two_imports_of_another_modules_private_names() -> None:
    """Issue 19, point 4: what a module keeps private stays its own."""
    found = [f"{name}: {imported}" for name, path in MODULES.items()
             for imported in private_imports(path.read_text())]  # fmt: skip
    assert len(found) <= 2, found
    # The check sees one, at the top or inside a function, and not a dunder.
    planted = (
        "from smart_search.budget.quota import _agent\n"
        "def f():\n    from ..text.urls import _SCHEME\n"
        "from smart_search import __version__\n"
    )
    assert private_imports(planted) == ["smart_search.budget.quota._agent", "text.urls._SCHEME"]
