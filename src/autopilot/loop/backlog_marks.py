"""Where the work tree stood when a work item started: what its surface is checked against.

An item's ``allowed_surface`` bounds what the item changes, not what one iteration
changes. So the surface check compares the work tree with the mark taken when the item
started (its first iteration since it was last completed or stopped), not with the
start of the iteration that just ended: an attempt that undoes what an earlier one
changed outside the surface has changed nothing outside it, and a change an earlier
attempt left there is still outside it (the item cannot complete with it).

Only paths the item's own iterations touched count — changed in an iteration (``since``:
the start of the first iteration not yet concluded, so an iteration a usage limit cut
short counts too) or outside the surface at the item's last conclusion (``outside``) —
so another item's work, or a person's edit between the item's attempts, is never
blamed on it.

The marks are kept in the run's folder (``item-marks/<item id>.json``), where a
relaunch after a crash and a hook run, whose every Stop is a new process, find them::

    {"itemId": "unit-1", "start": {<mark>}, "since": {<mark>} | null,
     "outside": ["secrets.txt"]}

``<mark>`` is ``workspace.git.TreeMark.to_json`` (``docs/formats.md``, "A work item's
marks"). The file goes once a conclusion leaves the item completed or stopped; a person
who reopens it then starts it afresh. An item a person unblocks keeps its start: a
change it left outside its surface still counts.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from autopilot.store.private import make_private_dir, write_private
from autopilot.store.rundir import RunDir
from autopilot.workspace.git import TreeMark

MAX_OUTSIDE_PATHS = 10_000
"""Paths outside the surface a mark file keeps (the violations of an item's last
conclusion); beyond it, the rest are found again only when an iteration touches them."""

_MAX_FILE_BYTES = 64 * 1024 * 1024


class Tree(Protocol):
    """What the surface check needs of the work tree (``workspace.marks.Workspace``,
    or ``workspace.git.GitObserver`` in a hook run)."""

    def mark(self) -> TreeMark:
        """Where the work tree stands now."""
        ...

    def changed_paths(self, before: TreeMark, after: TreeMark) -> list[str] | None:
        """The paths that differ between two marks (None outside a repository)."""
        ...


@dataclass(frozen=True)
class ItemMark:
    """An item's marks (see the module docstring).

    Attributes:
        item_id: The work item.
        start: The work tree when the item started.
        since: The work tree when its first iteration not yet concluded started, or
            None (every iteration of it so far is concluded).
        outside: The paths outside its allowed surface when it was last concluded.
    """

    item_id: str
    start: TreeMark
    since: TreeMark | None = None
    outside: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The file's JSON object."""
        return {
            "itemId": self.item_id,
            "start": self.start.to_json(),
            "since": self.since.to_json() if self.since is not None else None,
            "outside": list(self.outside[:MAX_OUTSIDE_PATHS]),
        }

    @classmethod
    def from_json(cls, data: object, item_id: str) -> ItemMark | None:
        """The marks ``to_json`` wrote for ``item_id``, or None (not ours, damaged)."""
        if not isinstance(data, dict) or data.get("itemId") != item_id:
            return None
        start = TreeMark.from_json(data.get("start"))
        since = TreeMark.from_json(data.get("since"))
        outside = data.get("outside")
        if start is None or start.entries is None:
            return None
        if not isinstance(outside, list) or not all(isinstance(p, str) for p in outside):
            outside = []
        return cls(item_id, start, since, tuple(outside))


def _path(run_folder: Path, item_id: str) -> Path:
    return RunDir(run_folder).item_marks / f"{item_id}.json"


def read_item_mark(run_folder: Path, item_id: str) -> ItemMark | None:
    """The item's marks as the run's folder keeps them, or None (none, or damaged)."""
    try:
        with _path(run_folder, item_id).open("rb") as handle:
            raw = handle.read(_MAX_FILE_BYTES + 1)
        data = json.loads(raw) if len(raw) <= _MAX_FILE_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    return ItemMark.from_json(data, item_id)


def write_item_mark(run_folder: Path, mark: ItemMark) -> None:
    """Keep ``mark`` in the run's folder.

    Raises:
        OSError: it cannot be written.
    """
    folder = RunDir(run_folder).item_marks
    make_private_dir(folder, exist_ok=True)
    data = json.dumps(mark.to_json()).encode("utf-8", "surrogateescape")
    write_private(_path(run_folder, mark.item_id), data)


def forget_item_mark(run_folder: Path, item_id: str) -> None:
    """Drop the item's marks (it is completed, stopped or not applicable)."""
    with contextlib.suppress(OSError):
        _path(run_folder, item_id).unlink()


def note_started(run_folder: Path, item_id: str, mark: TreeMark) -> None:
    """Keep the marks of an iteration on ``item_id`` that starts with the work tree at
    ``mark`` (``started``).

    Raises:
        OSError: they cannot be written.
    """
    known = read_item_mark(run_folder, item_id)
    noted = started(known, item_id, mark)
    if noted is not None and noted != known:
        write_item_mark(run_folder, noted)


def started(known: ItemMark | None, item_id: str, mark: TreeMark) -> ItemMark | None:
    """The item's marks as an iteration on it starts with the work tree at ``mark``:
    ``known`` with ``since`` set if it had none, else new ones starting at ``mark``.
    None when ``mark`` is not known (outside a repository, or git failed)."""
    if known is not None:
        return known if known.since is not None else replace(known, since=mark)
    if mark.entries is None:
        return None
    return ItemMark(item_id, mark, mark)


def touched_paths(
    known: ItemMark | None, iteration_paths: Sequence[str], tree: Tree | None
) -> tuple[list[str], TreeMark | None]:
    """The paths the item's iterations changed that still differ from the work tree
    when the item started, sorted; with the mark of the work tree now.

    Args:
        known: The item's marks (None: not kept, as for a run from before they were).
        iteration_paths: The paths the iteration that just ended changed.
        tree: The work tree (None: not known here).

    Returns:
        ``iteration_paths`` as they are (and no mark) when the item's start or the work
        tree now is not known.
    """
    if known is None or tree is None:
        return sorted(iteration_paths), None
    now = tree.mark()
    net = tree.changed_paths(known.start, now)
    if net is None or now.entries is None:
        return sorted(iteration_paths), None
    touched = {*iteration_paths, *known.outside}
    if known.since is not None:
        touched.update(tree.changed_paths(known.since, now) or ())
    return sorted(touched.intersection(net)), now


def concluded(known: ItemMark, outside: Sequence[str]) -> ItemMark:
    """The item's marks after an iteration of it was concluded with ``outside`` the
    paths outside its surface."""
    return replace(known, since=None, outside=tuple(outside[:MAX_OUTSIDE_PATHS]))
