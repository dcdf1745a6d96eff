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

**First record wins.** An agent can rewrite the file (it is in the run's folder), so
each iteration's start on an item is also logged, in a ``workitem_mark`` event
(``mark_fields``: the item's ``start`` and ``since``, each as its digest and, when it
fits in a log line, its content, or else its content compressed). ``MarkBook`` holds
the file to the process's own copy of the marks and, in a process that has none,
``checked_mark`` holds it to the log (``logged_marks``): the start is the first one
logged since the item was last closed, ``since`` the first logged since its last
conclusion, and ``outside`` takes in every path a ``surface_violation`` of it named
since it was last closed. A file that differs is a ``warning`` and the log's values
are used. When the log holds only a digest that the file does not match, the start is
unknown: ``MarkBook.unverifiable`` names the item, and ``loop.backlog_end`` does not
accept its completion.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from autopilot.core.structs import replace
from autopilot.loop.mark_log import logged_fields, logged_mark, mark_digest
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


_CLOSED = ("completed", "stopped", "not_applicable")


def mark_fields(mark: ItemMark, iteration: int, *, new: bool) -> dict[str, Any]:
    """``workitem_mark``'s fields as an iteration on the item starts: ``itemId``,
    ``iteration``, and ``since`` as ``loop.mark_log.logged_fields`` gives it; ``start``
    alike when the item starts afresh (``new``)."""
    fields: dict[str, Any] = {"itemId": mark.item_id, "iteration": iteration}
    for name, value in (("start", mark.start), ("since", mark.since)):
        if value is None or (name == "start" and not new):
            continue
        fields.update(logged_fields(name, value))
    if new and fields.get("sinceDigest") == fields["startDigest"]:  # once in the line
        fields.update(since=None, sinceZ=None)
    return fields


@dataclass(frozen=True)
class LoggedMarks:
    """An item's marks as the run's log first recorded them (``logged_marks``).

    Attributes:
        start_digest: The item's start since it was last closed (None: none logged).
        start: Its content (None: only the digest was logged).
        since_digest: The first iteration's start since its last conclusion (None:
            none logged since).
        since: Its content.
        outside: Every path a ``surface_violation`` of it named since it was last closed.
    """

    start_digest: str | None = None
    start: TreeMark | None = None
    since_digest: str | None = None
    since: TreeMark | None = None
    outside: frozenset[str] = frozenset()


def logged_marks(events: Iterable[Mapping[str, Any]], item_id: str) -> LoggedMarks:
    """What the run's log first recorded of ``item_id``'s marks (see the module
    docstring): each ``workitem_end`` of it ends what came before (a closing one, the
    start and the paths outside too)."""
    found = LoggedMarks()
    for event in events:
        if event.get("itemId") != item_id:
            continue
        kind = event.get("type")
        if kind == "workitem_end":
            closed = event.get("status") in _CLOSED
            found = LoggedMarks() if closed else replace(found, since_digest=None, since=None)
        elif kind == "surface_violation" and isinstance(event.get("paths"), list):
            paths = {p for p in event["paths"] if isinstance(p, str)}
            found = replace(found, outside=found.outside | paths)
        elif kind == "workitem_mark":
            if found.start_digest is None and isinstance(event.get("startDigest"), str):
                start = logged_mark(event, "start")
                found = replace(found, start_digest=event["startDigest"], start=start)
            if found.since_digest is None and isinstance(event.get("sinceDigest"), str):
                since = logged_mark(event, "since")
                found = replace(found, since_digest=event["sinceDigest"], since=since)
    return found


def _held(on_file: TreeMark | None, digest: str | None, logged: TreeMark | None) -> TreeMark | None:
    """The mark to use: the file's if it matches the log's ``digest``, else the log's
    content (None: only its digest is known, or it does not match it either)."""
    if on_file is not None and mark_digest(on_file) == digest:
        return on_file
    if logged is not None and mark_digest(logged) == digest:
        return logged
    return None


def checked_mark(
    on_file: ItemMark | None, logged: LoggedMarks, item_id: str
) -> tuple[ItemMark | None, list[str]]:
    """The item's marks held to what the log first recorded of them (see the module
    docstring), and a warning line for each thing the file did not hold."""
    if logged.start_digest is None:
        return on_file, []
    where = f"item-marks/{item_id}.json in the run's folder"
    notes: list[str] = []
    file_start = on_file.start if on_file is not None else None
    start = _held(file_start, logged.start_digest, logged.start)
    if start is None or start.entries is None:
        notes.append(
            f"{where} does not hold the start of work item {item_id} the run logged, and the "
            "log holds only its digest: what the item changed outside its allowed surface "
            "cannot be checked, so its completion is not accepted"
        )
        return None, notes
    if file_start is None or mark_digest(file_start) != logged.start_digest:
        notes.append(
            f"{where} does not hold the start of work item {item_id} the run logged first; "
            "the logged one is used"
        )
    since: TreeMark | None = None
    if logged.since_digest is not None:
        file_since = on_file.since if on_file is not None else None
        since = _held(file_since, logged.since_digest, logged.since)
        if since is None or file_since is None or mark_digest(file_since) != logged.since_digest:
            notes.append(
                f"{where} does not hold the start of the iteration on work item {item_id} the "
                "run logged; the logged one is used"
            )
    outside = tuple(on_file.outside) if on_file is not None else ()
    outside = (*outside, *sorted(logged.outside.difference(outside)))
    return ItemMark(item_id, start, since, outside[:MAX_OUTSIDE_PATHS]), notes


def _same(one: ItemMark | None, other: ItemMark | None) -> bool:
    """The two marks are written alike (a mark read back has no branch tips)."""
    if one is None or other is None:
        return one is other
    return one.to_json() == other.to_json()


@dataclass
class MarkBook:
    """The items' marks as one process of the run keeps them, held to the run's log.

    Args:
        run_folder: The run's folder (``item-marks/`` is in it).
        log_events: The run's events, oldest first.
        emit: Appends one event to the run's log (``emit(event_type, **fields)``).
    """

    run_folder: Path
    log_events: Callable[[], Iterable[Mapping[str, Any]]]
    emit: Callable[..., Any]
    _seen: dict[str, ItemMark | None] = field(default_factory=dict)
    unverifiable: set[str] = field(default_factory=set)
    """Items whose logged start neither the file nor the log can give back (``read``):
    their surface cannot be checked, and their completion is not accepted."""

    def read(self, item_id: str, iteration: int) -> ItemMark | None:
        """The item's marks: as this process last wrote or read them (its own copy), else
        the file held to the log (``checked_mark``); a file that differs is a
        ``warning``, and is put right."""
        on_file = read_item_mark(self.run_folder, item_id)
        if item_id in self._seen:
            mark, notes = self._seen[item_id], []
            if not _same(mark, on_file):
                notes = [
                    f"item-marks/{item_id}.json in the run's folder is not as the run wrote "
                    f"it; the run's own copy of work item {item_id}'s marks is used"
                ]
        else:
            logged = logged_marks(self.log_events(), item_id)
            mark, notes = checked_mark(on_file, logged, item_id)
            if mark is None and logged.start_digest is not None:
                self.unverifiable.add(item_id)
        for note in notes:
            self.emit("warning", iteration=iteration, itemId=item_id, note=note)
        if notes and mark is not None:
            with contextlib.suppress(OSError):
                write_item_mark(self.run_folder, mark)
        self._seen[item_id] = mark
        return mark

    def started(self, item_id: str, iteration: int, mark: TreeMark) -> None:
        """Note that iteration ``iteration`` on ``item_id`` starts with the work tree at
        ``mark`` (``started``), in the file and in a ``workitem_mark`` event.

        Raises:
            OSError: the file cannot be written.
        """
        known = self.read(item_id, iteration)
        noted = started(known, item_id, mark)
        if noted is None:
            return
        if noted != known:
            write_item_mark(self.run_folder, noted)
        self._seen[item_id] = noted
        self.emit("workitem_mark", **mark_fields(noted, iteration, new=known is None))

    def keep(self, item_id: str, mark: ItemMark | None) -> None:
        """Write ``mark`` as the item's marks, or drop them (None).

        Raises:
            OSError: they cannot be written.
        """
        if mark is None:
            forget_item_mark(self.run_folder, item_id)
        else:
            write_item_mark(self.run_folder, mark)
        self._seen[item_id] = mark
