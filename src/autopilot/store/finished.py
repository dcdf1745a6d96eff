"""What ``list`` and ``stats`` show of runs that have ended or whose driver is gone,
kept in one file so that thousands of runs cost one read, not a ``state.json`` and a
log each.

``<runs-root>/finished.json`` (0600) is derived data: ``{"version": 3, "runs": {runId:
{"files": [...], "driver": [...], <part>: {...}}}}``, where a part is what one command
shows of the run (``list``, ``stats``). A run gets an entry once its ``state.json``
says it ended, or once its driver is gone (no process with the recorded pid and
identity, no ``driver.lock`` held): either way its files no longer change by
themselves. Each entry holds the inode, size and modification time (ns) of the run's
``events.jsonl`` (of its ``state.json`` when it has no log), taken **before** the run
was read; an entry is used only while that file still matches, so a run whose log was
appended to, edited, replaced or removed is read afresh and never shown from the
cache. One ``stat`` per run (``lookup`` takes them all in one loop, relative to the
runs root opened once) is what keeps ``list`` of 10,000 runs quick; ``state.json``
is not looked at: every change autopilot makes to an ended run's state that ``list``
or ``stats`` shows comes with an event (a ``stop``, a relaunch's ``armed``), while a
hand edit of ``state.json`` alone shows once the log changes (or once
``finished.json`` is removed). The entry of a run whose
driver was gone also holds that driver's record (``driver``: pid, start time, command,
host) and is used only while the caller finds it still gone (a driver started again
holds the lock before it writes a file). A missing, unreadable, corrupt or older cache
file counts as empty, and the file is rewritten (temp file, fsync, rename) only when
an entry was added or dropped; a cache that cannot be written is simply not kept.
A cache of up to ``PLAIN_BYTES`` (or ``PLAIN_RUNS`` runs) is read (written) with
``json``, a larger one with msgspec (the same bytes): msgspec is loaded only where
thousands of runs repay its import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from autopilot.store.atomic import write_atomically

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

FINISHED_FILE = "finished.json"
PLAIN_BYTES = 256 * 1024
"""The largest cache read with ``json`` rather than msgspec (about a thousand runs,
whose index is decoded by msgspec too: ``store.index``)."""
PLAIN_RUNS = 1000
"""The most runs whose cache is written with ``json`` rather than msgspec."""
_VERSION = 3
_Files = list[int]


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


class FinishedRuns:
    """The cache of ended runs under one runs root.

    Args:
        root: The runs root.
    """

    def __init__(self, root: Path) -> None:
        self.path = root / FINISHED_FILE
        self._runs: dict[str, dict[str, Any]] = _load(self.path)
        self._changed = False

    def get(
        self,
        run_id: str,
        part: str,
        key: _Files | None,
        still_gone: Callable[[list[Any]], bool] | None = None,
    ) -> Any:
        """The run's ``part`` as it was put, if the run's files are still ``key``
        (from ``file_key``, taken now) and, for a run put with its driver gone,
        ``still_gone(driver)`` says so; else None (a stale entry is dropped)."""
        entry = self._runs.get(run_id)
        if entry is None:
            return None
        if key is None or entry.get("files") != key:
            del self._runs[run_id]
            self._changed = True
            return None
        driver = entry.get("driver")
        gone = isinstance(driver, list) and still_gone is not None and still_gone(driver)
        if driver is not None and not gone:
            return None  # its driver may be back: read afresh (``put`` replaces the entry)
        return entry.get(part)

    def lookup(
        self,
        root: Path,
        run_ids: Iterable[str],
        part: str,
        still_gone: Callable[[str, list[Any]], bool],
    ) -> tuple[dict[str, Any], dict[str, _Files | None]]:
        """``get`` for many runs of ``root`` at once (one loop, each run's files looked
        at relative to the runs root, opened once).

        Args:
            root: The runs root.
            run_ids: The runs, as the index names them.
            part: What is wanted (``list``, ``stats``).
            still_gone: Whether the driver of the run folder (a string), put with
                its driver gone, is still gone (``runtime.liveness.still_gone``).

        Returns:
            The current ``part`` of each run that has one, by run id; and for every
            other run its ``file_key``, taken now (for ``put``).
        """
        found: dict[str, Any] = {}
        keys: dict[str, _Files | None] = {}
        runs = self._runs
        where = str(root)
        try:
            root_fd: int | None = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            root_fd = None
        stat = os.stat
        try:
            for run_id in run_ids:
                key: _Files | None
                if root_fd is None or run_id[:1] == "/":  # as ``file_key`` has it
                    key = _file_key(f"{where}/{run_id}", None)
                else:
                    try:  # ``_file_key`` inlined: this runs for every run listed
                        found_at = stat(run_id + "/events.jsonl", dir_fd=root_fd)
                        key = [found_at.st_ino, found_at.st_size, found_at.st_mtime_ns]
                    except (OSError, ValueError):
                        key = _file_key(run_id, root_fd)
                entry = runs.get(run_id)
                if entry is not None:
                    if key is None or entry.get("files") != key:
                        del runs[run_id]
                        self._changed = True
                    else:
                        driver = entry.get("driver")
                        if driver is None or (
                            isinstance(driver, list) and still_gone(f"{where}/{run_id}", driver)
                        ):
                            value = entry.get(part)
                            if value is not None:
                                found[run_id] = value
                                continue
                keys[run_id] = key
        finally:
            if root_fd is not None:
                os.close(root_fd)
        return found, keys

    def put(
        self,
        run_id: str,
        part: str,
        key: _Files | None,
        value: Any,
        driver: list[Any] | None = None,
    ) -> None:
        """Keep ``value`` as the run's ``part``; ``key`` must have been taken before
        the files were read (``file_key``). Nothing is kept without a key.

        Args:
            run_id: The run.
            part: What is kept (``list``, ``stats``).
            key: The run's files before they were read (``file_key``).
            value: What to keep (JSON).
            driver: For a run not ended: the record of its driver, found gone.
        """
        if key is None:
            return
        entry = self._runs.get(run_id)
        if entry is None or entry.get("files") != key or entry.get("driver") != driver:
            entry = self._runs[run_id] = {"files": key}
            if driver is not None:
                entry["driver"] = driver
        entry[part] = value
        self._changed = True

    def keep_only(self, run_ids: set[str]) -> None:
        """Drop the entries of runs not in ``run_ids`` (removed from the index)."""
        for run_id in [r for r in self._runs if r not in run_ids]:
            del self._runs[run_id]
            self._changed = True

    def save(self) -> None:
        """Write the cache if it changed; a failure to write is ignored."""
        if not self._changed or not self.path.parent.is_dir():
            return
        cache = {"version": _VERSION, "runs": self._runs}
        try:
            if len(self._runs) <= PLAIN_RUNS:
                data = json.dumps(
                    cache, ensure_ascii=False, allow_nan=False, separators=(",", ":")
                ).encode()
            else:
                import msgspec

                data = msgspec.json.encode(cache)
            write_atomically(self.path, data)
        except (OSError, ValueError, UnicodeError):  # a NaN or lone surrogate: not kept
            return
        self._changed = False


def _load(path: Path) -> dict[str, dict[str, Any]]:
    try:
        raw = path.read_bytes()
        if len(raw) <= PLAIN_BYTES:
            data = json.loads(raw, parse_constant=_not_json)
        else:
            import msgspec  # loaded already by the index of as many runs

            data = msgspec.json.decode(raw)
    except (OSError, ValueError, RecursionError):  # msgspec's errors are ValueErrors
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}
    runs = data.get("runs")
    if not isinstance(runs, dict):
        return {}
    return {k: v for k, v in runs.items() if isinstance(v, dict)}


def _not_json(name: str) -> Any:
    """NaN and Infinity are not JSON: a cache holding one is corrupt (as to msgspec)."""
    raise ValueError(f"{name} is not JSON")
