"""The project's ``.autopilot/`` folder, for people and agents to read and edit
(``docs/architecture.md``, "The project's ``.autopilot/`` folder"): ``config.toml``,
``memory.md`` and the ``OFF`` switch live there; machine state never does."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from autopilot.store.run_state import RunState
    from autopilot.store.state_file import StateView

PROJECT_DIR = ".autopilot"
OFF_NAME = "OFF"
MEMORY_NAME = "memory.md"
RECORD_NAMES = (
    MEMORY_NAME,
    OFF_NAME,
    "tasks.jsonl",
    "approved-run.json",
    "consistency-decision.json",
    "consistency-decision.applied.json",
    "consistency-decision.rejected.json",
)
"""autopilot's records in a ``.autopilot/`` folder: the run's memory, the pause file,
the backlog, its approved boundary and an agent's decision file (as it is, applied or
rejected). They tell what a run did and is doing, so ``restore`` never rewinds them,
``diff`` leaves them out, a ``--worktree`` run's branch never commits them and
``merge`` never brings them (``workspace.records``). ``config.toml`` is not one: it is
the user's, and follows the code."""


def is_record(path: str) -> bool:
    """Is ``path``, a ``/``-separated path in a repository, one of the ``RECORD_NAMES``
    in a ``.autopilot/`` folder (at any depth: a run may work in a subfolder)?"""
    folder, _, name = path.rpartition("/")
    return name in RECORD_NAMES and (folder == PROJECT_DIR or folder.endswith("/" + PROJECT_DIR))


def project_dir(project: Path) -> Path:
    """``<project>/.autopilot``."""
    return project / PROJECT_DIR


def off_path(project: Path) -> Path:
    """``<project>/.autopilot/OFF``: while it exists, autopilot takes no proactive action
    in the project: no relaunch, restart or retry starts, and its runs hold."""
    return project_dir(project) / OFF_NAME


def is_off(project: Path) -> bool:
    """True while the project's OFF switch is set (an unreadable folder counts as on)."""
    try:
        return off_path(project).exists()
    except OSError:
        return False


def run_projects(cwd: str | None, worktree: Mapping[str, Any] | None) -> tuple[Path, ...]:
    """The folders whose OFF switch holds a run: its work folder and, for a
    ``--worktree`` run, the same folder of the user's checkout the worktree was made
    from (where the user runs ``autopilot off``).

    Args:
        cwd: The run's work folder (``state.json`` ``cwd``; None or empty: ``.``).
        worktree: ``state.json``'s ``worktree`` record (``path``, ``origin``), if any.
    """
    project = Path(cwd or ".")
    folders = [project]
    path = worktree.get("path") if isinstance(worktree, Mapping) else None
    origin = worktree.get("origin") if isinstance(worktree, Mapping) else None
    if isinstance(path, str) and path and isinstance(origin, str) and origin:
        folders.append(checkout_folder(project, Path(path), Path(origin)))
    return tuple(dict.fromkeys(folders))


def checkout_folder(cwd: Path, worktree: Path, origin: Path) -> Path:
    """The folder of the user's checkout ``origin`` that ``cwd``, a folder of a run's
    worktree ``worktree``, stands for: the same subdirectory; ``cwd`` itself when it
    is not inside the worktree."""
    if not cwd.is_relative_to(worktree):
        return cwd
    return origin / cwd.relative_to(worktree)


def off_switch(cwd: str | None, worktree: Mapping[str, Any] | None) -> Path | None:
    """The OFF file that holds a run (see ``run_projects``), or None while it is ON."""
    for project in run_projects(cwd, worktree):
        if is_off(project):
            return off_path(project)
    return None


def run_off_switch(state: RunState | StateView) -> Path | None:
    """``off_switch`` of the run ``state`` describes."""
    worktree = state.extra.get("worktree")
    return off_switch(state.cwd, worktree if isinstance(worktree, Mapping) else None)


def memory_path(project: Path) -> Path:
    """``<project>/.autopilot/memory.md``, the run's memory file (``store.memory``)."""
    return project_dir(project) / MEMORY_NAME
