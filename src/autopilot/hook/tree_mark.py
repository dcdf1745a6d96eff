"""The work tree as a hook iteration found it, kept in its folder: each Stop is a new
process, and the Stop that ends the iteration compares the work tree against it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from autopilot.store.private import write_private
from autopilot.workspace import git
from autopilot.workspace.git import TreeMark

TREE_MARK_FILE = "tree-start.json"
"""In an iteration's folder: the work tree's changed paths when it started (a Stop
is a new process; the next one compares against it)."""


def write_tree_mark(folder: Path, mark: TreeMark) -> None:
    """Keep ``mark`` in ``folder`` for the Stop that ends the iteration.

    Raises:
        OSError: it cannot be written.
    """
    data = {"head": mark.head, "entries": mark.entries}
    write_private(folder / TREE_MARK_FILE, json.dumps(data).encode("utf-8", "surrogateescape"))


def read_tree_mark(folder: Path) -> TreeMark:
    """The mark ``write_tree_mark`` kept; an unknown one (no entries) when it is
    missing or damaged, so no path counts as changed by the iteration."""
    try:
        data = json.loads((folder / TREE_MARK_FILE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return TreeMark(None, None)
    head = data.get("head") if isinstance(data, dict) else None
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, dict) or not all(isinstance(v, str) for v in entries.values()):
        return TreeMark(head if isinstance(head, str) else None, None)
    return TreeMark(head if isinstance(head, str) else None, entries)


def mark_now(cwd: Path, warn: Callable[[str], None]) -> TreeMark:
    """Where the work tree ``cwd`` stands now; a git call that failed is a ``warn``."""
    observer = git.GitObserver(cwd)
    mark = observer.mark()
    for warning in observer.take_warnings():
        warn(warning)
    return mark


def changed_since(
    folder: Path, cwd: Path, mark: TreeMark, warn: Callable[[str], None]
) -> list[str]:
    """The paths the iteration of ``folder`` changed, from the work tree as it began
    (``read_tree_mark``) to ``mark`` (none when either is not known); a git call that
    failed is a ``warn``."""
    start = read_tree_mark(folder)
    if start.entries is None or mark.entries is None:
        return []
    observer = git.GitObserver(cwd)
    changed = observer.changed_paths(start, mark) or []
    for warning in observer.take_warnings():
        warn(warning)
    return changed
