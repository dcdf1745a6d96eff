"""The packages of autopilot import one another in one direction only (the layering in
docs/architecture.md, "Layers"): every import counts, at the top of a module, inside a
function, under ``TYPE_CHECKING`` or through ``importlib.import_module``."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

import autopilot

SOURCE = Path(autopilot.__file__).parent

LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "autopilot errors process_exit core testkit",
        "config_values prompts",
        "config_json",
        "config",
        "store",
        "config_sources agents workspace",
        "loop",
        "runtime",
        "hook",
        "manage",
        "control",
        "view",
        "demo",
        "cli",
        "launch",
        "__main__",
    )
)
"""Bottom first. A package (or a top-level module) imports only from layers below its
own; ``autopilot`` is the package's ``__init__``."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


def _unit(module: str) -> str:
    """The package a module belongs to (``store`` for ``autopilot.store.events``), or
    the top-level module itself (``config``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _known(name: str) -> str | None:
    """The module ``name`` loads: itself, or the nearest package or module above it."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _dynamic_target(call: ast.Call) -> str | None:
    """The module an ``importlib.import_module("autopilot.…")`` call names; for an
    f-string, the part before its first placeholder."""
    func = call.func
    named = isinstance(func, ast.Attribute) and func.attr == "import_module"
    if not named and not (isinstance(func, ast.Name) and func.id == "import_module"):
        return None
    if not call.args:
        return None
    argument = call.args[0]
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return argument.value
    if isinstance(argument, ast.JoinedStr) and argument.values:
        first = argument.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value.rstrip(".")
    return None


def imports_in(module: str, source: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """Every autopilot module the ``source`` of ``module`` imports, with the line:
    top-level, in a function, under ``TYPE_CHECKING``, relative, or through
    ``importlib``."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call):
            target = _dynamic_target(node)
            names = [target] if target else []
        for name in names:
            if name.split(".")[0] != "autopilot":
                continue
            target = _known(name)
            if target is not None and target != module:
                found.append((node.lineno, target))
    return found


EDGES = {
    module: imports_in(
        module, path.read_text(encoding="utf-8"), is_package=path.name == "__init__.py"
    )
    for module, path in MODULES.items()
}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    graph: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, found in EDGES.items():
        for line, target in found:
            mine, theirs = _unit(module), _unit(target)
            if mine != theirs:
                graph[mine].add(theirs)
                where[mine, theirs].append(f"{module}:{line} imports {target}")
    return graph, where


def test_the_walk_sees_every_kind_of_import() -> None:
    # Function-level, TYPE_CHECKING-only and importlib imports are all dependencies.
    assert len(MODULES) > 150
    in_function = {target for _, target in EDGES["autopilot.control"]}
    assert "autopilot.loop.messages" in in_function  # imported inside status()
    registry = {target for _, target in EDGES["autopilot.agents.registry"]}
    assert "autopilot.agents" in registry  # importlib.import_module(f"autopilot.agents.…")


def test_every_package_has_a_layer() -> None:
    placed = set().union(*LAYERS)
    units = {_unit(module) for module in MODULES}
    assert units - placed == set(), "place the new package in LAYERS and docs/architecture.md"
    assert placed - units == set()


def test_no_package_imports_a_package_above_or_beside_it() -> None:
    layer_of = {unit: n for n, layer in enumerate(LAYERS) for unit in layer}
    _, where = _package_graph()
    upward = [
        line
        for (mine, theirs), lines in sorted(where.items())
        if layer_of[theirs] >= layer_of[mine]
        for line in lines
    ]
    assert upward == []


def test_no_import_cycle_between_packages() -> None:
    graph, where = _package_graph()
    cycles = _cycles(graph)
    told = [
        line
        for cycle in cycles
        for mine in cycle
        for theirs in cycle
        for line in where.get((mine, theirs), [])
    ]
    assert cycles == [], told


def test_no_import_cycle_between_modules() -> None:
    graph = {module: {target for _, target in found} for module, found in EDGES.items()}
    assert _cycles(graph) == []


def test_core_imports_nothing_else_from_autopilot() -> None:
    outside = [
        f"{module}:{line} imports {target}"
        for module, found in EDGES.items()
        if _unit(module) == "core"
        for line, target in found
        if _unit(target) != "core"
    ]
    assert outside == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_the_cycle_finder_finds_cycles(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert _cycles(graph) == expected


def test_the_walk_reads_relative_and_dynamic_imports() -> None:
    source = (
        "import os\n"
        "from . import clock\n"
        "from ..store import events\n"
        "def later():\n"
        "    from autopilot.core.step import conclude\n"
        "    importlib.import_module(f'autopilot.agents.{name}')\n"
        "    importlib.import_module('autopilot.view.tui')\n"
    )
    assert imports_in("autopilot.loop.example", source) == [
        (2, "autopilot.loop.clock"),
        (3, "autopilot.store.events"),
        (5, "autopilot.core.step"),
        (6, "autopilot.agents"),
        (7, "autopilot.view.tui"),
    ]


MAX_MODULE_LINES = 400
MAX_DRIVER_LINES = 300


def test_no_module_is_longer_than_400_lines_and_the_driver_300() -> None:
    """Modules stay small enough to read whole; the driver holds the iteration's
    sequence only (its parts are in ``loop.parts``)."""
    lines = {
        path.relative_to(SOURCE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in SOURCE.rglob("*.py")
    }
    assert len(lines) > 100  # the walk found the package
    assert {name: n for name, n in lines.items() if n > MAX_MODULE_LINES} == {}
    assert lines["loop/driver.py"] <= MAX_DRIVER_LINES
