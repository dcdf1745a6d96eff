"""``<runs-root>/index.jsonl``: one row per run, so ``list`` and ``stats`` read one file.

A row is the run's ``armed`` event (``docs/formats.md``), with ``ts`` (the seed's writer omits
it; ours does not). Rows are appended whole; readers skip malformed lines and take
any row whose ``type`` is ``armed`` with a non-empty string ``runId``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from autopilot.errors import EnvironmentProblem
from autopilot.store.event_format import serialize_event
from autopilot.store.event_stream import iter_event_lines
from autopilot.store.flock import FileLock
from autopilot.store.private import open_private

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

INDEX_FILE = "index.jsonl"
INDEX_LOCK = INDEX_FILE + ".lock"
_LOCK_TIMEOUT_SECONDS = 30.0


@contextlib.contextmanager
def index_lock(root: Path) -> Iterator[None]:
    """Hold ``<root>/index.jsonl.lock`` (an fcntl lock the OS drops on death).

    Appends and ``prune``'s rewrite both take it, so no row is lost between them.

    Raises:
        EnvironmentProblem: the lock stayed taken for 30 seconds.
    """
    lock = FileLock(root / INDEX_LOCK, timeout_seconds=_LOCK_TIMEOUT_SECONDS)
    if not lock.acquire():
        raise EnvironmentProblem(f"{root / INDEX_LOCK} stayed locked for 30 s") from None
    try:
        yield
    finally:
        lock.release()


def append_index_row(root: Path, armed_event: Mapping[str, Any]) -> None:
    """Append the run's ``armed`` event as its index row.

    Raises:
        OSError: the index cannot be written.
        EnvironmentProblem: the index lock stayed taken for 30 seconds.
    """
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
"""An index up to this size (about a thousand runs) is read with ``json`` alone: for
a short one, loading msgspec costs more than its faster decoding saves."""


def _decoder(size: int) -> Callable[[bytes], Any] | None:
    """``json.loads`` for an index of ``size`` bytes, or None where msgspec decodes it
    (several times faster, for thousands of runs: ``_decode_all``)."""
    return json.loads if size <= PLAIN_INDEX_BYTES else None


def _decode_all(lines: list[bytes]) -> list[Any] | None:
    """Every line of a long index decoded by msgspec in one call, one value a line;
    None when a line is not one object alone (then each is decoded by itself).

    A line that starts with ``{`` and ends with ``}`` cannot continue a value begun on
    another line (a ``{`` cannot follow a complete value inside one), so when every
    line does and msgspec finds as many values as lines, each line is exactly one.
    """
    import msgspec

    if not all(line[:1] == b"{" and line[-1:] == b"}" for line in lines):
        return None
    try:
        values: list[Any] = msgspec.json.Decoder().decode_lines(b"\n".join(lines))
    except (ValueError, RecursionError):  # a line msgspec refuses (NaN, a huge int,
        return None  # nesting too deep): each line is decided by itself
    return values if len(values) == len(lines) else None


def _decode_one(raw: bytes, decode: Callable[[bytes], Any]) -> Any:
    """One line decoded (msgspec's refusal decided by ``json``), or None."""
    try:
        return decode(raw)
    except ValueError:  # json decides what msgspec refuses (NaN, a huge int)
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            return None
    except RecursionError:
        return None


def read_index(root: Path) -> Iterator[dict[str, Any]]:
    """Yield index rows oldest first, skipping anything that is not an ``armed`` row."""
    try:
        stream = (root / INDEX_FILE).open("rb")
    except FileNotFoundError:
        return
    with stream:
        decode = _decoder(os.fstat(stream.fileno()).st_size)
        values: Iterable[Any] | None
        if decode is None:
            lines = [line for line in iter_event_lines(stream) if line.strip()]
            values = _decode_all(lines)
            if values is None:
                import msgspec

                values = (_decode_one(raw, msgspec.json.decode) for raw in lines)
        else:
            values = (_decode_one(raw, decode) for raw in iter_event_lines(stream))
        for row in values:
            if (
                isinstance(row, dict)
                and row.get("type") == "armed"
                and isinstance(row.get("runId"), str)
                and row["runId"]
            ):
                yield row
