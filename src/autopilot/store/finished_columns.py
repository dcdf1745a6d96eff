"""How ``finished.json`` holds one command's runs: a column a field (``store.finished``).

A part's runs are three JSON members: ``ids`` (the run ids, in the order the command
last looked them up: the index's), ``keys`` (four integers a run: the inode, size and
mtime in ns of its ``events.jsonl`` then -1, or of its ``state.json`` then 0) and
``columns`` (what the command shows of each run, a list of values a field, each as
long as ``ids``). Ten thousand runs decode in a third of the time the same entries
take as one object a run, and a command whose every run is unchanged compares all
their keys with one list comparison (``FinishedRuns.lookup``).
"""

from __future__ import annotations

import json
import os
import stat
from itertools import repeat

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

VERSION = 5
"""The version of ``finished.json``'s lines; a line of another is no cache."""
_EVENTS = -1
"""A key's fourth integer when it is of the run's ``events.jsonl``."""
_NO_KEY = (-2, -2, -2, -2)
"""The key of a run with neither file (never kept: ``FinishedRuns.put`` needs a key)."""


def flat_keys(where: str, root_fd: int | None, run_ids: list[str]) -> list[int]:
    """Each run's key now (four integers, see the module), one after the other: its
    ``events.jsonl``'s, else its ``state.json``'s, else four -2; relative to
    ``root_fd`` (the runs root ``where``, opened) when it is open."""
    keys: list[int] = []
    add = keys.extend
    stat = os.stat
    for run_id in run_ids:
        if root_fd is None or run_id[:1] == "/":
            folder, fd = f"{where}/{run_id}", None
        else:
            folder, fd = run_id, root_fd
        try:  # this runs for every run listed
            found = stat(folder + "/events.jsonl", dir_fd=fd)
        except (OSError, ValueError):
            add(_key_of(folder, fd))
            continue
        add((found.st_ino, found.st_size, found.st_mtime_ns, _EVENTS))
    return keys


def keys_of(where: str, first: list[str], then: list[str]) -> tuple[list[int], list[int]]:
    """``flat_keys`` of the runs ``first`` and of the runs ``then``, relative to the runs
    root ``where`` opened once."""
    try:
        root_fd: int | None = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        root_fd = None
    try:
        return flat_keys(where, root_fd, first), flat_keys(where, root_fd, then)
    finally:
        if root_fd is not None:
            os.close(root_fd)


def file_key(run_folder: str) -> list[int] | None:
    """Inode, size and mtime (ns) of the run's ``events.jsonl``, or of its
    ``state.json`` (with a fourth item, 0) when it has no log; None when neither can
    be looked at.

    Args:
        run_folder: The run's folder (a string: this runs for every run listed).
    """
    return key_at(list(_key_of(run_folder, None)), 0)


def _key_of(folder: str, fd: int | None) -> tuple[int, int, int, int]:
    """A run's key (see the module), relative to ``fd`` when it is given."""
    try:
        found = os.stat(folder + "/events.jsonl", dir_fd=fd)
    except FileNotFoundError:
        try:
            found = os.stat(folder + "/state.json", dir_fd=fd)
        except (OSError, ValueError):  # ValueError: a NUL in the run id
            return _NO_KEY
        return (found.st_ino, found.st_size, found.st_mtime_ns, 0)
    except (OSError, ValueError):
        return _NO_KEY
    return (found.st_ino, found.st_size, found.st_mtime_ns, _EVENTS)


def key_at(flat: list[int], index: int) -> list[int] | None:
    """The key of the ``index``-th run of ``flat`` as ``store.finished.file_key`` gives
    it (three integers for a log, four ending in 0 for a state file; None: neither)."""
    four = flat[index * 4 : index * 4 + 4]
    if four[3] == _EVENTS:
        return four[:3]
    return None if four[3] != 0 else four


def flattened(key: list[int]) -> list[int]:
    """A ``file_key`` as four integers (see the module)."""
    return [*key, _EVENTS] if len(key) == 3 else list(key)


def decoded(data: dict[str, Any]) -> tuple[list[str], list[int], list[list[Any]]] | None:
    """A part's ``ids``, ``keys`` and ``columns`` when they have the module's shapes
    (a hand edit may leave anything; then None: every run is read afresh)."""
    ids, flat, columns = data.get("ids"), data.get("keys"), data.get("columns")
    if ids.__class__ is not list or flat.__class__ is not list or columns.__class__ is not list:
        return None
    count = len(ids)
    if set(map(type, ids)) - {str} or len(set(ids)) != count or len(flat) != 4 * count:
        return None
    if set(map(type, flat)) - {int} or set(flat[3::4]) - {_EVENTS, 0}:
        return None  # not integers, or a key of no file (never kept)
    if set(map(type, columns)) - {list} or set(map(len, columns)) - {count}:
        return None
    if count and not columns:
        return None
    return ids, flat, columns


def entries(ids: list[str], flat: list[int], columns: list[list[Any]]) -> dict[str, list[Any]]:
    """The runs as ``store.finished`` handles them one at a time: run id →
    ``[value, *key]``."""
    values = map(list, zip(*columns, strict=True)) if columns else repeat([], len(ids))
    return {
        run_id: [value, *(key_at(flat, index) or ())]
        for index, (run_id, value) in enumerate(zip(ids, values, strict=True))
    }


def encoded(runs: dict[str, list[Any]], order: list[str]) -> dict[str, Any] | None:
    """``ids``, ``keys`` and ``columns`` of ``runs`` (run id → ``[value, *key]``), in
    the order of ``order`` (then any others); None when their values are not all
    lists of one length (then nothing is kept)."""
    known = set(runs)
    ids = [run_id for run_id in dict.fromkeys(order) if run_id in known]  # each id once
    if len(ids) != len(known):
        listed = set(ids)
        ids += [run_id for run_id in runs if run_id not in listed]
    values = [runs[run_id][0] for run_id in ids]
    if set(map(type, values)) - {list} or len(set(map(len, values))) > 1:
        return None
    flat: list[int] = []
    for run_id in ids:
        flat += flattened(runs[run_id][1:])
    columns = [list(column) for column in zip(*values, strict=True)] if values else []
    return {"ids": ids, "keys": flat, "columns": columns}


def lines_of(raw: bytes, mine: bytes, version_start: bytes) -> tuple[bytes | None, list[bytes]]:
    """The last line of ``raw`` that starts with ``mine`` (None when none does), and
    the other lines that start with ``version_start`` (the other parts of this
    version). The cache's few lines are found by
    ``find`` rather than by splitting it: each line is a copy of up to megabytes."""
    found: bytes | None = None
    others: list[bytes] = []
    start = 0
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


def not_json(name: str) -> Any:
    """NaN and Infinity are not JSON: a cache holding one is corrupt."""
    raise ValueError(f"{name} is not JSON")


def _line_start(part: str) -> bytes:
    """How the line of ``part`` begins (as ``FinishedRuns.save`` writes it)."""
    return b'{"version":%d,"part":%s,' % (VERSION, json.dumps(part).encode())


def load_part(path: str, part: str) -> tuple[Any, dict[str, Any], Any, list[bytes]]:
    """The runs (``store.finished_columns.decoded``), the drivers and the index view of
    ``part`` in the cache (none when its line is missing or corrupt), and the lines of
    the other parts, undecoded."""
    try:  # a FIFO or a device there is no cache (nor waited on, nor read forever)
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                return None, {}, None, []
            raw = stream.read()
    except OSError:
        return None, {}, None, []
    found, others = lines_of(raw, _line_start(part), b'{"version":%d,"part":' % VERSION)
    if found is None:
        return None, {}, None, others
    try:
        data = json.loads(found, parse_constant=not_json)
    except (ValueError, RecursionError):
        return None, {}, None, others
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None, {}, None, others
    runs, drivers = decoded(data), data.get("drivers")
    if runs is None or not isinstance(drivers, dict):
        return None, {}, None, others
    # Each value is checked where it is used (``lookup``'s callers), the view by its user.
    return runs, drivers, data.get("index"), others
