"""``<runs-root>/index.jsonl``: one row per run, so ``list`` and ``stats`` read one file.

A row is the run's ``armed`` event (``docs/formats.md``), with ``ts`` (the seed's writer omits
it; ours does not). Rows are appended whole; readers skip malformed lines and take
any row whose ``type`` is ``armed`` with a non-empty string ``runId``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping

from autopilot.store.lines import READ_LINE_CAP, iter_lines

# What writing a row takes (the event format and its vocabulary, the lock) is loaded
# by the functions that write: ``list`` and ``stats`` only read the index.

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

INDEX_FILE = "index.jsonl"
INDEX_LOCK = INDEX_FILE + ".lock"
_LOCK_TIMEOUT_SECONDS = 30.0


class index_lock:  # noqa: N801 - used as a function: ``with index_lock(root):``
    """Hold ``<root>/index.jsonl.lock`` (an fcntl lock the OS drops on death).

    Appends and ``prune``'s rewrite both take it, so no row is lost between them.
    (A class rather than ``contextlib.contextmanager``: ``list`` and ``stats``, which
    only read the index, do not load contextlib.)

    Raises:
        EnvironmentProblem: the lock stayed taken for 30 seconds (on entering).
    """

    def __init__(self, root: Path) -> None:
        from autopilot.store.flock import FileLock

        self._where = root / INDEX_LOCK
        self._lock = FileLock(self._where, timeout_seconds=_LOCK_TIMEOUT_SECONDS)

    def __enter__(self) -> None:
        from autopilot.errors import EnvironmentProblem

        if not self._lock.acquire():
            raise EnvironmentProblem(f"{self._where} stayed locked for 30 s") from None

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()


def append_index_row(root: Path, armed_event: Mapping[str, Any]) -> None:
    """Append the run's ``armed`` event as its index row.

    Raises:
        OSError: the index cannot be written.
        EnvironmentProblem: the index lock stayed taken for 30 seconds.
    """
    from autopilot.store.event_format import serialize_event
    from autopilot.store.private import open_private

    line = serialize_event(armed_event)
    if line is None:
        return
    with index_lock(root):
        fd = open_private(root / INDEX_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line + b"\n")
        finally:
            os.close(fd)


PLAIN_INDEX_BYTES = 256 * 1024
"""An index up to this size (about a thousand runs) is decoded a line at a time;
a longer one in one pass over its text (``_decode_all``)."""


def _decode_all(lines: list[bytes]) -> list[Any]:
    """Each line decoded as ``json.loads`` decodes it alone (None where it refuses),
    by ``json``'s scanner over the lines' text: a value that starts where its line
    starts and ends where it ends is that line's, any other line is decoded by itself.
    When every line's value is scanned without an error, the scanner is driven by
    ``map`` (no Python loop a line); about twice as fast as a ``json.loads`` a line for
    thousands of runs, and no msgspec to load.
    """
    if not lines:
        return []
    try:
        text = b"\n".join(lines).decode()
    except UnicodeDecodeError:  # each line is decided by itself (a BOM, surrogates)
        return [_decode_one(raw) for raw in lines]
    from itertools import accumulate, repeat
    from operator import add, itemgetter

    lengths = list(map(len, text.split("\n")))  # one a line: a line holds no newline
    starts = list(accumulate(map((1).__add__, lengths[:-1]), initial=0))
    stops = list(map(add, starts, lengths))
    scan = _scanner()
    try:
        scanned = list(map(scan, repeat(text), starts))
    except (StopIteration, ValueError, RecursionError):  # a line that is not one value
        return _decode_each(text, lines, starts, stops, scan)
    if list(map(itemgetter(1), scanned)) != stops:  # a value over two lines, or two on one
        return _decode_each(text, lines, starts, stops, scan)
    return list(map(itemgetter(0), scanned))


def _decode_each(
    text: str,
    lines: list[bytes],
    starts: list[int],
    stops: list[int],
    scan: Callable[[str, int], tuple[Any, int]],
) -> list[Any]:
    """``_decode_all`` a line at a time: the scanned value where it is exactly the
    line's (``starts`` and ``stops`` in ``text``), else ``json.loads`` of the line."""
    values: list[Any] = []
    for raw, start, stop in zip(lines, starts, stops, strict=True):
        try:
            value, end = scan(text, start)
        except (StopIteration, ValueError, RecursionError):
            end = -1
        values.append(value if end == stop else _decode_one(raw))
    return values


def _scanner() -> Callable[[str, int], tuple[Any, int]]:
    """The scanner ``json.loads`` decodes with: a value from a given offset of a
    string, and the offset after it."""
    from json.scanner import make_scanner

    decoder = json.JSONDecoder()
    scan: Callable[[str, int], tuple[Any, int]] = make_scanner(decoder)  # type: ignore[arg-type]
    return scan


def _decode_one(raw: bytes) -> Any:
    """One line decoded by ``json``, or None."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def read_index(root: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield index rows oldest first, skipping anything that is not an ``armed`` row.

    Args:
        root: The runs root (a string where pathlib is not loaded: ``list``).
    """
    try:
        stream = open(os.path.join(root, INDEX_FILE), "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        return
    with stream:
        if os.fstat(stream.fileno()).st_size > PLAIN_INDEX_BYTES:
            lines = iter_lines(stream, max_line_bytes=READ_LINE_CAP)
            yield from _armed_rows(_decode_all(list(filter(bytes.strip, lines))))
            return
        for row in map(_decode_one, iter_lines(stream, max_line_bytes=READ_LINE_CAP)):
            if _is_armed(row):
                yield row


def _is_armed(row: Any) -> bool:
    """Is ``row`` an index row: an object whose ``type`` is ``armed``, with a
    non-empty string ``runId``?"""
    return (
        isinstance(row, dict)
        and row.get("type") == "armed"
        and isinstance(row.get("runId"), str)
        and bool(row["runId"])
    )


def _armed_rows(values: list[Any]) -> list[Any]:
    """The index rows of ``values`` (``_is_armed``): all of them, found in C (``map``
    of ``dict.get``) when every value is one, as in an index autopilot wrote; else
    checked one by one."""
    from itertools import repeat

    try:
        kinds = list(map(dict.get, values, repeat("type")))
        run_ids = list(map(dict.get, values, repeat("runId")))
    except TypeError:  # a value that is not an object
        return [row for row in values if _is_armed(row)]
    every_one = kinds.count("armed") == len(kinds) and set(map(type, run_ids)) == {str}
    if every_one and "" not in run_ids:
        return values
    return [row for row in values if _is_armed(row)]
