"""Reading a growing ``events.jsonl``: from the end, in one streaming fold, and as it grows.

``watch`` starts fast on a very large log by reading only its end for the timeline
(``read_last_events``), folding the whole log once in a stream
(``fold_log``: bounded memory, a few MiB at a time) and then following what is
appended (``LogFollower``). Every reader stops at the end of the last complete line:
a final line without its newline is a write in progress (or torn by a crash) and
is held back until it is whole, as the Node tool's ``watch`` does (``docs/formats.md``,
"Line format"). A log that does not exist yet reads as empty.

Lines are decided and decoded as everywhere else (``store.reader``, whose ``fold_log``
this module passes on): ``fold_log`` gives exactly ``fold(read_events(path))``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autopilot.store.events import MAX_READ_LINE_BYTES
from autopilot.store.reader import fold_log
from autopilot.store.records import decode_event_line

__all__ = [
    "LogEnd",
    "LogFollower",
    "fold_log",
    "log_end",
    "parse_event_block",
    "read_last_events",
    "read_lines_backward",
]

BACKWARD_BLOCK_BYTES = 64 * 1024
"""Block size when reading a log from its end."""


def parse_event_block(block: bytes) -> list[dict[str, Any]]:
    """Parse newline-separated complete lines, keeping the accepted events in order.

    Args:
        block: Whole lines joined by ``\\n`` (no trailing partial line).

    Returns:
        The events ``read_events`` would give for these lines (lines over
        ``MAX_READ_LINE_BYTES`` skipped).
    """
    if not block:
        return []
    events = []
    for line in block.split(b"\n"):
        if len(line) <= MAX_READ_LINE_BYTES and (event := decode_event_line(line)) is not None:
            events.append(event)
    return events


@dataclass(frozen=True)
class LogEnd:
    """Where the complete lines of a log end.

    Attributes:
        offset: Byte offset just after the last ``\\n`` (0 for an empty log).
        inode: The file's inode (None when the file does not exist).
    """

    offset: int
    inode: int | None


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size


def read_lines_backward(
    path: Path, end: int | None = None, *, block_bytes: int = BACKWARD_BLOCK_BYTES
) -> Iterator[bytes]:
    """Yield the complete lines of ``path`` that end before ``end``, newest first.

    Args:
        path: The log; a missing file yields nothing.
        end: Stop at this byte offset (default: the file's size). Bytes after the
            last newline before ``end`` are a partial line and are not yielded.
        block_bytes: How much to read at a time.
    """
    try:
        stream = path.open("rb")
    except OSError:
        return
    with stream:
        position = os.fstat(stream.fileno()).st_size if end is None else end
        carry = b""
        seen_newline = False
        while position > 0:
            start = max(0, position - block_bytes)
            stream.seek(start)
            data = stream.read(position - start) + carry
            position = start
            parts = data.split(b"\n")
            carry = parts[0]
            tail = parts[1:]
            if not seen_newline:
                if not tail:
                    continue
                seen_newline = True
                tail = tail[:-1]  # after the last newline: a partial line
            yield from reversed(tail)
        if seen_newline and carry:
            yield carry


def log_end(path: Path) -> LogEnd:
    """Find where the complete lines of ``path`` end (a partial last line excluded)."""
    identity = _file_identity(path)
    if identity is None:
        return LogEnd(0, None)
    inode, size = identity
    try:
        with path.open("rb") as stream:
            position = size
            while position > 0:
                start = max(0, position - BACKWARD_BLOCK_BYTES)
                stream.seek(start)
                data = stream.read(position - start)
                cut = data.rfind(b"\n")
                if cut >= 0:
                    return LogEnd(start + cut + 1, inode)
                position = start
    except OSError:
        return LogEnd(0, inode)
    return LogEnd(0, inode)


def read_last_events(path: Path, limit: int, end: int | None = None) -> list[dict[str, Any]]:
    """The last ``limit`` accepted events before ``end``, oldest first.

    Reads only as much of the file's end as it needs, so it is fast on a
    million-event log. Malformed lines are skipped and do not count.
    """
    found: list[dict[str, Any]] = []
    if limit <= 0:
        return found
    for raw in read_lines_backward(path, end):
        if len(raw) > MAX_READ_LINE_BYTES:
            continue
        event = decode_event_line(raw)
        if event is not None:
            found.append(event)
            if len(found) >= limit:
                break
    found.reverse()
    return found


@dataclass
class FollowResult:
    """What ``LogFollower.read_new`` found.

    Attributes:
        events: Newly completed, accepted events, oldest first.
        reset: The file was replaced or truncated since the last read: the caller
            must start over (fold from scratch); ``events`` is then empty.
    """

    events: list[dict[str, Any]] = field(default_factory=list)
    reset: bool = False


class LogFollower:
    """Reads the complete lines appended to a log since the last read.

    It keeps a byte offset at a line boundary; a partial last line is read again
    next time, once its newline has arrived. A log that is absent reads as empty
    until it appears. A log whose inode changes or that shrinks is reported as
    reset.

    Args:
        path: The log file.
        offset: Where to start (a line boundary, e.g. from ``fold_log``).
        inode: The inode that ``offset`` belongs to (None: take the file's).
    """

    def __init__(self, path: Path, offset: int = 0, inode: int | None = None) -> None:
        self.path = path
        self.offset = offset
        self.inode = inode

    def read_new(self, max_bytes: int | None = None) -> FollowResult:
        """Read what was appended, up to ``max_bytes`` (default: all of it).

        Returns:
            The new events, or ``reset`` when the file was replaced or truncated.
        """
        identity = _file_identity(self.path)
        if identity is None:
            if self.offset > 0:
                self.offset, self.inode = 0, None
                return FollowResult(reset=True)
            return FollowResult()
        inode, size = identity
        if self.inode is None:
            self.inode = inode
        elif inode != self.inode or size < self.offset:
            self.offset, self.inode = 0, inode
            return FollowResult(reset=True)
        if size == self.offset:
            return FollowResult()
        want = size - self.offset if max_bytes is None else min(max_bytes, size - self.offset)
        try:
            with self.path.open("rb") as stream:
                stream.seek(self.offset)
                data = stream.read(want)
        except OSError:
            return FollowResult()
        cut = data.rfind(b"\n")
        if cut < 0:
            return FollowResult()
        self.offset += cut + 1
        return FollowResult(parse_event_block(data[:cut]))

    def has_more(self) -> bool:
        """True when complete or partial bytes past the offset exist."""
        identity = _file_identity(self.path)
        return identity is not None and identity[1] > self.offset
