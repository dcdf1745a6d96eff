"""What ``list`` and ``stats`` show of runs that have ended or whose driver is gone,
kept in one file so that thousands of runs cost one read, not a ``state.json`` and a
log each.

``<runs-root>/finished.json`` (0600) is derived data: one line per command, each a JSON
object ``{"version": 5, "part": <part>, "ids": [...], "keys": [...], "columns": [...],
"drivers": {runId: driver}}``, where a part is what one command shows of a run
(``list``, ``stats``) and ``ids``, ``keys`` and ``columns`` hold each run's entry a
column a field (``store.finished_columns``); a part may also hold ``"index": [[inode,
size, mtime_ns], view]``, what the command keeps of ``index.jsonl`` (``list``: its
columns), used only while the index's inode, size and mtime are those taken before it
was read. Each command decodes its own line alone and rewrites the file with the other
command's line kept as it was. A run gets an entry once its
``state.json`` says it ended, or once its driver is gone (no process with the recorded
pid and identity, no ``driver.lock`` held): either way its files no longer change by
themselves. Each entry holds the inode, size and modification time (ns) of the run's
``events.jsonl`` (of its ``state.json`` when it has no log), taken **before** the run
was read; an entry is used only while that file still matches, so a run whose log was
appended to, edited, replaced or removed is read afresh and never shown from the cache.
One ``stat`` per run (``lookup`` takes them all in one loop, relative to the runs root
opened once, and compares them with the kept keys in one list comparison) is what keeps
``list`` of 10,000 runs quick; ``state.json`` is not looked
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

from autopilot.store.finished_columns import (
    VERSION,
    encoded,
    entries,
    file_key,
    key_at,
    keys_of,
    load_part,
)

__all__ = ["FINISHED_FILE", "FinishedRuns", "file_key"]

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    Root = str | os.PathLike[str]

FINISHED_FILE = "finished.json"
_NO_RUNS: dict[str, list[Any]] = {"ids": [], "keys": [], "columns": []}
_Files = list[int]


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
        self._drivers: dict[str, Any]
        self._index: Any
        self._others: list[bytes]
        self._columns, self._drivers, self._index, self._others = load_part(self.path, part)
        self._entries: dict[str, list[Any]] | None = None  # made from the columns at need
        self._order: list[str] = []  # the run ids of the last lookup
        self._keyed: tuple[list[str] | None, list[int]] = (None, [])  # kept_columns' keys
        self._changed = False

    @property
    def _runs(self) -> dict[str, list[Any]]:
        """Run id → ``[value, *key]``, made from the columns the first time an entry
        is looked at one by one (``store.finished_columns.entries``)."""
        if self._entries is None:
            loaded, self._columns = self._columns, None
            self._entries = entries(*loaded) if loaded is not None else {}
        return self._entries

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
        self._order = ids
        where = os.fspath(root)
        loaded = self._columns
        kept_ids, others, whole = ids, [], False  # whole: the columns' runs, keyed in order
        if loaded is not None and loaded[0] == ids:
            kept_ids, whole = loaded[0], True
        elif loaded is not None:  # another order, or runs without an entry (running)
            kept = set(loaded[0])
            if kept.issubset(ids):  # else an entry of a run not asked about: one by one
                kept_ids, whole = loaded[0], True
                others = [run_id for run_id in ids if run_id not in kept]
        keyed = self._keyed
        flat, flat_others = keys_of(where, [] if keyed[0] == kept_ids else kept_ids, others)
        flat = keyed[1] if keyed[0] == kept_ids else flat
        if whole and loaded is not None and flat == loaded[1]:
            kept_now = (kept_ids, flat, loaded[2])
            return self._all_kept(where, kept_now, others, flat_others, still_gone)
        order = kept_ids + others
        flat += flat_others
        now = [key_at(flat, index) for index in range(len(order))]
        try:
            return self._bulk_lookup(where, order, now, still_gone)
        except (TypeError, IndexError):  # an entry edited by hand: not a list, or empty
            return self._lookup_each(where, order, now, still_gone)

    def kept_columns(
        self,
        root: Root,
        run_ids: list[str],
        still_gone: Callable[[str, list[Any]], bool],
    ) -> list[list[Any]] | None:
        """The kept values of ``run_ids``, a column a field, when each of them has an
        entry, kept in this order, whose files are as they were and whose driver, if
        it was put gone, is still gone; else None (then ``lookup``, which takes the
        keys taken here again).

        Args:
            root: The runs root.
            run_ids: The runs, as the index names them.
            still_gone: As ``lookup``'s.
        """
        loaded = self._columns
        if loaded is None or loaded[0] != run_ids:
            return None
        where = os.fspath(root)
        self._keyed = (loaded[0], keys_of(where, loaded[0], [])[0])
        if self._keyed[1] != loaded[1]:
            return None
        drivers = self._drivers
        for run_id, driver in drivers.items() if drivers else ():
            if driver is not None and not (
                isinstance(driver, list) and still_gone(f"{where}/{run_id}", driver)
            ):
                return None
        columns: list[list[Any]] = loaded[2]
        return columns

    def _all_kept(
        self,
        where: str,
        kept: tuple[list[str], list[int], list[list[Any]]],
        others: list[str],
        flat_others: list[int],
        still_gone: Callable[[str, list[Any]], bool],
    ) -> tuple[dict[str, Any], dict[str, _Files | None]]:
        """``lookup`` when every run with an entry has its files as they were (``kept``:
        their ids, keys now and columns): their values from the columns at once (in
        C), the other runs keyed now, and a run put with its driver gone whose driver
        is not gone any more keyed to be read afresh."""
        kept_ids, flat, columns = kept
        found = dict(zip(kept_ids, map(list, zip(*columns, strict=True)), strict=True))
        keys = {run_id: key_at(flat_others, index) for index, run_id in enumerate(others)}
        drivers = self._drivers
        for run_id in [r for r in drivers if r in found] if drivers else ():
            driver = drivers[run_id]
            if driver is None:  # as no driver (``null`` in the file)
                continue
            if not (isinstance(driver, list) and still_gone(f"{where}/{run_id}", driver)):
                del found[run_id]
                keys[run_id] = key_at(flat, kept_ids.index(run_id))  # a few runs at most
        return found, keys

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
        if self._columns is not None and run_ids.issuperset(self._columns[0]):
            return  # nothing to drop: the columns stay as they are
        for run_id in [r for r in self._runs if r not in run_ids]:
            del self._runs[run_id]
            self._drivers.pop(run_id, None)
            self._changed = True

    def save(self) -> None:
        """Write the cache if this part changed (the other parts' lines as they were
        read); a failure to write is ignored."""
        if not self._changed or not os.path.isdir(os.path.dirname(self.path)):
            return
        if self._columns is not None:  # no entry looked at one by one: as read
            ids, flat, columns = self._columns
            runs: dict[str, Any] | None = {"ids": ids, "keys": flat, "columns": columns}
        else:
            runs = encoded(self._runs, self._order)
        kept = set(runs["ids"]) if runs is not None else set()
        drivers = {run_id: self._drivers[run_id] for run_id in self._drivers if run_id in kept}
        cache = {"version": VERSION, "part": self.part, **(runs or _NO_RUNS), "drivers": drivers}
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
