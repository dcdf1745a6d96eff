"""The project's own work items (``.autopilot/tasks.jsonl``, ``docs/backlog.md``), for the
live view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_PROJECT_TASKS = 2000
"""At most this many work items are read."""


def read_project_tasks(path: Path) -> list[dict[str, Any]]:
    """Work items of a project's ``.autopilot/tasks.jsonl`` (``docs/backlog.md``); [] if none."""
    items: list[dict[str, Any]] = []
    try:
        with path.open("rb") as stream:
            for raw in stream:
                try:
                    value = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(value, dict) and "id" in value:
                    items.append(value)
                    if len(items) >= MAX_PROJECT_TASKS:
                        break
    except OSError:
        return []
    return items
