"""The core is pure: it imports nothing else from autopilot, and no module that reads
a clock, a file or a process."""

from __future__ import annotations

import ast
from pathlib import Path

import autopilot.core

CORE = Path(autopilot.core.__file__).parent
IMPURE_MODULES = {"os", "time", "subprocess", "socket", "psutil", "filelock", "pathlib"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_core_imports_nothing_else_from_autopilot() -> None:
    modules = sorted(CORE.glob("*.py"))
    assert len(modules) > 10
    outside = {
        f"{path.name}: {name}"
        for path in modules
        for name in _imports(path)
        if name.startswith("autopilot") and not name.startswith("autopilot.core")
    }
    assert outside == set()


def test_the_step_and_its_parts_read_no_clock_file_or_process() -> None:
    for name in (
        "step",
        "step_events",
        "change",
        "attempt",
        "outcome",
        "spend",
        "state",
        "ending",
        "vocabulary",
        "text",
        "policy",
        "completion",
    ):
        imported = {module.split(".")[0] for module in _imports(CORE / f"{name}.py")}
        assert imported & IMPURE_MODULES == set(), name
