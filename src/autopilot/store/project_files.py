"""The project's ``.autopilot/`` folder, for people and agents to read and edit
(SPEC §3): ``config.toml``, ``memory.md`` and the ``OFF`` switch live there; machine
state never does."""

from __future__ import annotations

from pathlib import Path

PROJECT_DIR = ".autopilot"
OFF_NAME = "OFF"
MEMORY_NAME = "memory.md"


def project_dir(project: Path) -> Path:
    """``<project>/.autopilot``."""
    return project / PROJECT_DIR


def off_path(project: Path) -> Path:
    """``<project>/.autopilot/OFF``: while it exists, autopilot takes no proactive action
    in the project (seed 004)."""
    return project_dir(project) / OFF_NAME


def is_off(project: Path) -> bool:
    """True while the project's OFF switch is set (an unreadable folder counts as on)."""
    try:
        return off_path(project).exists()
    except OSError:
        return False


def memory_path(project: Path) -> Path:
    """``<project>/.autopilot/memory.md``, the run's memory file (seed 003)."""
    return project_dir(project) / MEMORY_NAME
