"""What ``list`` and ``stats`` show of runs that have ended or whose driver is gone,
kept in one file so that thousands of runs cost one read, not a ``state.json`` and a
log each.

``<runs-root>/finished.json`` (0600) is derived data: one line per command, each a JSON
object ``{"version": 4, "part": <part>, "runs": {runId: [value, inode, size, mtime_ns]},
"drivers": {runId: driver}}``, where a part is what one command shows of a run
(``list``, ``stats``); a part may also hold ``"index": [[inode, size, mtime_ns],
view]``, what the command keeps of ``index.jsonl`` (``list``: its columns), used only
while the index's inode, size and mtime are those taken before it was read. Each command
decodes its own line alone (``list`` over 10,000 runs reads half the bytes and objects
it would read of both) and rewrites the file with the other command's line kept as it
was; each part's entries are checked by themselves. A run gets an entry once its
``state.json`` says it ended, or once its driver is gone (no process with the recorded
pid and identity, no ``driver.lock`` held): either way its files no longer change by
themselves. Each entry holds the inode, size and modification time (ns) of the run's
``events.jsonl`` (of its ``state.json`` when it has no log), taken **before** the run
was read; an entry is used only while that file still matches, so a run whose log was
appended to, edited, replaced or removed is read afresh and never shown from the cache.
One ``stat`` per run (``lookup`` takes them all in one loop, relative to the runs root
opened once) is what keeps ``list`` of 10,000 runs quick; ``state.json`` is not looked
at: every change autopilot makes to an ended run's state that ``list`` or ``stats``
shows comes with an event (a ``stop``, a relaunch's ``armed``), while a hand edit of
``state.json`` alone shows once the log changes (or once ``finished.json`` is removed).
A run put with its driver gone has that driver's record in ``drivers`` (pid, start time,
command, host) and is used only while the caller finds it still gone (a driver started
again holds the lock before it writes a file). A missing, unreadable, corrupt or older
line counts as empty, and the file is rewritten (temp file, fsync, rename) only when an
entry (or the view of the index) was added or dropped; a cache that cannot be written is
simply not kept (nor is a part whose line another command rewrote at the same moment: it
is built again).
The file is read and written with ``json`` alone: loading msgspec would cost more than
its faster decoding saves, even for 10,000 runs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from itertools import compress, repeat
from operator import and_, eq, is_not, itemgetter, not_

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    Root = str | os.PathLike[str]

FINISHED_FILE = "finished.json"
_VERSION = 4
_Files = list[int]


def _line_start(part: str) -> bytes:
    """How the line of ``part`` begins (as ``save`` writes it)."""
    return b'{"version":%d,"part":%s,' % (_VERSION, json.dumps(part).encode())


def _index_key(root: Root) -> _Files | None:
    """Inode, size and mtime (ns) of the runs root's ``index.jsonl`` (None when it
    cannot be looked at)."""
    from autopilot.store.index import INDEX_FILE

    try:
        found = os.stat(os.path.join(root, INDEX_FILE))
    except (OSError, ValueError):
        return None
    return [found.st_ino, found.st_size, found.st_mtime_ns]


def _are_columns(kept: Any) -> bool:
    """Is ``kept`` lists of one length, the first of non-empty strings?"""
    if kept.__class__ is not list or not kept or {type(column) for column in kept} != {list}:
        return False
    return len(set(map(len, kept))) == 1 and set(map(type, kept[0])) <= {str} and "" not in kept[0]


def file_key(run_folder: str) -> _Files | None:
    """Inode, size and mtime (ns) of the run's ``events.jsonl``, or of its
    ``state.json`` (with a fourth item, 0) when it has no log; None when neither can
    be looked at.

    Args:
        run_folder: The run's folder (a string: this runs for every run listed).
    """
    return _file_key(run_folder, None)


def _file_key(run_folder: str, dir_fd: int | None) -> _Files | None:
    """``file_key`` of ``run_folder``, relative to ``dir_fd`` when it is given."""
    try:
        found = os.stat(run_folder + "/events.jsonl", dir_fd=dir_fd)
    except FileNotFoundError:
        try:
            found = os.stat(run_folder + "/state.json", dir_fd=dir_fd)
        except (OSError, ValueError):  # ValueError: a NUL in the run id
            return None
        return [found.st_ino, found.st_size, found.st_mtime_ns, 0]
    except (OSError, ValueError):
        return None
    return [found.st_ino, found.st_size, found.st_mtime_ns]


def _keys_now(where: str, root_fd: int | None, run_ids: list[str]) -> list[_Files | None]:
    """``file_key`` of each run, relative to ``root_fd`` (the runs root ``where``,
    opened) when it is open."""
    keys: list[_Files | None] = []
    add = keys.append
    stat = os.stat
    for run_id in run_ids:
        if root_fd is None or run_id[:1] == "/":  # as ``file_key`` has it
            add(_file_key(f"{where}/{run_id}", None))
            continue
        try:  # ``_file_key`` inlined: this runs for every run listed
            found = stat(run_id + "/events.jsonl", dir_fd=root_fd)
        except (OSError, ValueError):
            add(_file_key(run_id, root_fd))
            continue
        add([found.st_ino, found.st_size, found.st_mtime_ns])
    return keys


_NO_ENTRY: list[Any] = [None]
"""A run without an entry, to ``_bulk_lookup``: no value, no files (never a key)."""
_AFTER_VALUE = itemgetter(slice(1, None))
_VALUE = itemgetter(0)


class FinishedRuns:
    """One command's part of the cache of ended runs under one runs root.

    Args:
        root: The runs root (a string where pathlib is not loaded: ``list``).
        part: What the command shows of a run (``list``, ``stats``).
    """

    def __init__(self, root: Root, part: str) -> None:
        self.path = os.path.join(root, FINISHED_FILE)
        self.part = part
        self._runs: dict[str, Any]
        self._drivers: dict[str, Any]
        self._index: Any
        self._others: list[bytes]
        self._runs, self._drivers, self._index, self._others = _load(self.path, part)
        self._changed = False

    def index_columns(
        self,
        root: Root,
        make: Callable[[Iterator[dict[str, Any]]], list[list[Any]]],
        fits: Callable[[list[list[Any]]], bool],
    ) -> list[list[Any]]:
        """What the command takes of ``index.jsonl``, a column a field, the run ids
        first: ``make`` of its rows (``store.index.read_index``), kept with the index's
        inode, size and mtime taken before it was read; decoded again only once the
        index changed, or when what is kept is not columns of one length, of non-empty
        string run ids first, that ``fits`` (a hand edit may leave anything)."""
        key = _index_key(root)
        kept = self._index
        unchanged = key is not None and kept.__class__ is list and len(kept) == 2 and kept[0] == key
        if unchanged and _are_columns(kept[1]) and fits(kept[1]):
            columns: list[list[Any]] = kept[1]
            return columns
        from autopilot.store.index import read_index

        columns = make(read_index(root))
        self._changed = self._changed or key is not None or kept is not None
        self._index = None if key is None else [key, columns]
        return columns

    def lookup(
        self,
        root: Root,
        run_ids: Iterable[str],
        still_gone: Callable[[str, list[Any]], bool],
    ) -> tuple[dict[str, Any], dict[str, _Files | None]]:
        """The kept value of each run in ``run_ids`` whose files are still as they were
        when it was put and, for a run put with its driver gone, whose driver is still
        gone; a stale entry is dropped (one loop, each run's files looked at relative
        to the runs root, opened once).

        Args:
            root: The runs root.
            run_ids: The runs, as the index names them.
            still_gone: Whether the driver of the run folder (a string), put with
                its driver gone, is still gone (``runtime.liveness.still_gone``).

        Returns:
            The current value of each run that has one, by run id; and for every
            other run its ``file_key``, taken now (for ``put``).
        """
        ids = list(run_ids)
        where = os.fspath(root)
        try:
            root_fd: int | None = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            root_fd = None
        try:
            now = _keys_now(where, root_fd, ids)
        finally:
            if root_fd is not None:
                os.close(root_fd)
        try:
            return self._bulk_lookup(where, ids, now, still_gone)
        except (TypeError, IndexError):  # an entry edited by hand: not a list, or empty
            return self._lookup_each(where, ids, now, still_gone)

    def _bulk_lookup(
        self,
        where: str,
        ids: list[str],
        now: list[_Files | None],
        still_gone: Callable[[str, list[Any]], bool],
    ) -> tuple[dict[str, Any], dict[str, _Files | None]]:
        """``lookup`` of runs whose every entry is a list or missing: compared in C
        (``map``) a field of every run at a time, then the few runs whose entry is
        stale, empty, missing or put with its driver gone looked at one by one.

        Raises:
            TypeError, IndexError: an entry is not a list, or is an empty one
                (``_lookup_each`` decides then).
        """
        runs = self._runs
        entries = list(map(runs.get, ids, repeat(_NO_ENTRY)))
        same = list(map(eq, map(_AFTER_VALUE, entries), now))
        values = list(map(_VALUE, entries))
        found = dict(zip(ids, values, strict=True))
        keys: dict[str, _Files | None] = {}
        kept = list(map(and_, same, map(is_not, values, repeat(None))))
        if False in kept:  # a run stale, without an entry, or kept without a value
            for index in compress(range(len(ids)), map(not_, kept)):
                run_id = ids[index]
                found.pop(run_id, None)
                keys[run_id] = now[index]
                if not same[index] and runs.pop(run_id, None) is not None:
                    self._drivers.pop(run_id, None)
                    self._changed = True
        drivers = self._drivers
        if drivers:
            key_of = None
            for run_id in [r for r in drivers if r in found]:
                driver = drivers[run_id]
                if driver is None:  # as no driver (``null`` in the file)
                    continue
                if not (isinstance(driver, list) and still_gone(f"{where}/{run_id}", driver)):
                    del found[run_id]
                    key_of = key_of or dict(zip(ids, now, strict=True))
                    keys[run_id] = key_of[run_id]
        return found, keys

    def _lookup_each(
        self,
        where: str,
        ids: list[str],
        now: list[_Files | None],
        still_gone: Callable[[str, list[Any]], bool],
    ) -> tuple[dict[str, Any], dict[str, _Files | None]]:
        """``lookup`` a run at a time (any entry, as a hand edit may leave it)."""
        found: dict[str, Any] = {}
        keys: dict[str, _Files | None] = {}
        runs = self._runs
        drivers = self._drivers
        for run_id, key in zip(ids, now, strict=True):
            entry = runs.get(run_id)
            if entry is not None:
                # An entry as ``put`` makes it (not one edited by hand), files unchanged:
                if key is None or entry.__class__ is not list or entry[1:] != key:
                    del runs[run_id]
                    drivers.pop(run_id, None)
                    self._changed = True
                else:
                    driver = drivers.get(run_id)
                    if driver is None or (
                        isinstance(driver, list) and still_gone(f"{where}/{run_id}", driver)
                    ):
                        value = entry[0]
                        if value is not None:
                            found[run_id] = value
                            continue
            keys[run_id] = key
        return found, keys

    def put(
        self,
        run_id: str,
        key: _Files | None,
        value: Any,
        driver: list[Any] | None = None,
    ) -> None:
        """Keep ``value`` as what the command shows of the run; ``key`` must have been
        taken before the files were read (``file_key``). Nothing is kept without a key.

        Args:
            run_id: The run.
            key: The run's files before they were read (``file_key``).
            value: What to keep (JSON).
            driver: For a run not ended: the record of its driver, found gone.
        """
        if key is None:
            return
        self._runs[run_id] = [value, *key]
        if driver is not None:
            self._drivers[run_id] = driver
        else:
            self._drivers.pop(run_id, None)
        self._changed = True

    def keep_only(self, run_ids: set[str]) -> None:
        """Drop the entries of runs not in ``run_ids`` (removed from the index)."""
        for run_id in [r for r in self._runs if r not in run_ids]:
            del self._runs[run_id]
            self._drivers.pop(run_id, None)
            self._changed = True

    def save(self) -> None:
        """Write the cache if this part changed (the other parts' lines as they were
        read); a failure to write is ignored."""
        if not self._changed or not os.path.isdir(os.path.dirname(self.path)):
            return
        drivers = {
            run_id: self._drivers[run_id] for run_id in self._drivers if run_id in self._runs
        }
        cache = {"version": _VERSION, "part": self.part, "runs": self._runs, "drivers": drivers}
        if self._index is not None:
            cache["index"] = self._index
        try:
            line = json.dumps(cache, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            data = b"".join(raw + b"\n" for raw in [line.encode(), *self._others])
            from pathlib import Path

            from autopilot.store.atomic import write_atomically  # only when it changed

            write_atomically(Path(self.path), data)
        except (OSError, ValueError, UnicodeError):  # a NaN or lone surrogate: not kept
            return
        self._changed = False


def _load(path: str, part: str) -> tuple[dict[str, Any], dict[str, Any], Any, list[bytes]]:
    """The entries, the drivers and the index view of ``part`` in the cache (none
    when its line is missing or corrupt), and the lines of the other parts,
    undecoded."""
    try:
        with open(path, "rb") as stream:
            raw = stream.read()
    except OSError:
        return {}, {}, None, []
    found, others = _lines_of(raw, _line_start(part))
    if found is None:
        return {}, {}, None, others
    try:
        data = json.loads(found, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return {}, {}, None, others
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}, {}, None, others
    runs, drivers = data.get("runs"), data.get("drivers")
    if not isinstance(runs, dict) or not isinstance(drivers, dict):
        return {}, {}, None, others
    # Each entry is checked where it is used (``lookup``), the view by its user.
    return runs, drivers, data.get("index"), others


def _lines_of(raw: bytes, mine: bytes) -> tuple[bytes | None, list[bytes]]:
    """The last line of ``raw`` that starts with ``mine`` (None when none does), and
    the lines of the other parts of this version. The cache's few lines are found by
    ``find`` rather than by splitting it: each line is a copy of up to megabytes."""
    found: bytes | None = None
    others: list[bytes] = []
    start = 0
    version_start = b'{"version":%d,"part":' % _VERSION
    while start < len(raw):
        end = raw.find(b"\n", start)
        if end < 0:
            end = len(raw)
        if raw.startswith(mine, start):
            found = raw[start:end]
        elif raw.startswith(version_start, start):
            others.append(raw[start:end])
        start = end + 1
    return found, others


def _not_json(name: str) -> Any:
    """NaN and Infinity are not JSON: a cache holding one is corrupt."""
    raise ValueError(f"{name} is not JSON")
