"""The append-only event log (``events.jsonl``): ``EventLog``, its one writer.

The line format is ``store.event_format``'s (``serialize_event``, ``parse_event_line``,
the vocabulary's order), and reading a log ``store.event_stream``'s (``read_events``);
their names are importable from here too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from autopilot.core.text import MAX_EXCERPT_UTF16_UNITS, excerpt, utf16_units
from autopilot.core.vocabulary import EventType
from autopilot.store.event_format import (
    EVENT_TYPES,
    JS_NUMBER_LIMIT,
    MAX_EVENT_LINE_BYTES,
    MAX_READ_LINE_BYTES,
    SEED_EVENT_TYPES,
    TERMINAL_EVENT_TYPES,
    finite_number,
    parse_event_line,
    serialize_event,
)
from autopilot.store.event_stream import iter_event_lines, read_events
from autopilot.store.private import open_private

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "EVENT_TYPES",
    "JS_NUMBER_LIMIT",
    "MAX_EVENT_LINE_BYTES",
    "MAX_EXCERPT_UTF16_UNITS",
    "MAX_READ_LINE_BYTES",
    "SEED_EVENT_TYPES",
    "TERMINAL_EVENT_TYPES",
    "EventLog",
    "EventType",
    "excerpt",
    "finite_number",
    "iter_event_lines",
    "parse_event_line",
    "read_events",
    "serialize_event",
    "utf16_units",
]


class EventLog:
    """Appends events to one run's ``events.jsonl``; never raises on disk errors.

    Each event is one ``write`` of a whole line to a file opened with ``O_APPEND``,
    so concurrent writers never interleave inside a line. Every append starts on a
    line boundary: when the file's size is not the one this log left it at (someone
    else wrote to it, e.g. an agent appending half a line), its last byte is checked
    and a missing newline is written first, so a fragment never swallows the events
    after it (a blank line at worst, which readers skip). A write that fails (disk
    full, file removed) is reported once on stderr and the loop goes on. A log that
    was deleted, replaced by another file or cut shorter than this log left it since
    its last write (``changed_since_written``) is said so in a ``warning`` event
    written first, in the same append.

    Args:
        path: The log file; created if missing.
        run_id: Stamped on every event as ``runId``.
        clock_ms: Returns the current epoch time in milliseconds.
    """

    def __init__(self, path: Path, run_id: str, clock_ms: Any) -> None:
        self.path = path
        self.run_id = run_id
        self._clock_ms = clock_ms
        self._fd: int | None = None
        self._size_after_write: int | None = None
        # (device, inode, size) of the file after this log's last append; kept
        # across close(), to tell a log deleted or replaced behind its back.
        self._last_written: tuple[int, int, int] | None = None
        self._reported_error = False
        self.refused = 0

    @property
    def last_written(self) -> tuple[int, int, int] | None:
        """(device, inode, size) of the file after this log's last append (None
        before it appended): it changes with every append."""
        return self._last_written

    def emit(self, event_type: EventType | str, **fields: Any) -> dict[str, Any] | None:
        """Append one event and return it as written (None if it was refused)."""
        return self.emit_all([(event_type, fields)])[0]

    def emit_all(
        self, events: Sequence[tuple[EventType | str, Mapping[str, Any]]]
    ) -> list[dict[str, Any] | None]:
        """Append several events in one ``write``, so a crash leaves all of them or
        none (a step's events and its ``decision_applied`` record stand together).

        Args:
            events: Each event's type and fields.

        Returns:
            Each event as written, in order; None for one that was refused (it is not
            serialisable or is over ``MAX_EVENT_LINE_BYTES``; the others are written),
            and None for all when the write failed.
        """
        now_ms = int(self._clock_ms())
        written: list[dict[str, Any] | None] = []
        lines: list[bytes] = []
        for event_type, fields in events:
            event: dict[str, Any] = {"type": str(event_type), "ts": now_ms, "runId": self.run_id}
            event.update({k: v for k, v in fields.items() if v is not None})
            try:
                line = serialize_event(event)
            except ValueError as error:
                self._report(f"event {event_type} not written: {error}")
                line = None
            else:
                if line is None:
                    self.refused += 1
                    self._report(
                        f"event {event_type} not written: over {MAX_EVENT_LINE_BYTES} bytes"
                    )
            written.append(None if line is None else event)
            if line is not None:
                lines.append(line + b"\n")
        changed = self.changed_since_written() if lines else None
        if changed is not None:
            note = {"type": str(EventType.WARNING), "ts": now_ms, "runId": self.run_id}
            warning = serialize_event({**note, "note": changed})
            lines.insert(0, b"" if warning is None else warning + b"\n")
        if lines and not self._append(b"".join(lines)):
            return [None] * len(written)
        return written

    def changed_since_written(self) -> str | None:
        """How the file at ``path`` differs from what this log's last append left
        (deleted, another file in its place, or shorter), or None (also before this
        log has written). Growth is not a change: other commands append too."""
        seen = self._last_written
        if seen is None:
            return None
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            how = "was deleted"
        except OSError:
            return None
        else:
            if (found.st_dev, found.st_ino) != seen[:2]:
                how = "was replaced by another file"
            elif found.st_size < seen[2]:
                how = f"was cut short ({found.st_size} bytes, {seen[2]} written)"
            else:
                return None
        return (
            f"the event log {how} since this driver last wrote to it: what it held "
            "before this line may be missing or not the driver's"
        )

    def _append(self, data: bytes) -> bool:
        """Write ``data`` at the start of a line; True if all of it reached the file.

        All or nothing: when the disk fills up part-way (a short write, then
        ``ENOSPC``), the part that was written is cut off again, so a step's events
        never stand without their ``decision_applied`` record.
        """
        written = 0
        try:
            size = None if self._fd is None else os.fstat(self._fd)
            if size is not None and size.st_nlink == 0:
                self.close()  # the log was deleted under us: recreate it
                size = None
            if self._fd is None:
                self._fd = open_private(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
                size = os.fstat(self._fd)
            assert size is not None
            # Only a size this log did not leave behind needs its last byte read.
            if size.st_size not in (0, self._size_after_write) and (
                os.pread(self._fd, 1, size.st_size - 1) != b"\n"
            ):
                data = b"\n" + data
            written = os.write(self._fd, data)
            while written < len(data):
                written += os.write(self._fd, data[written:])
            self._size_after_write = size.st_size + len(data)
            self._last_written = (size.st_dev, size.st_ino, self._size_after_write)
        except OSError as error:
            if written and not self._take_back(data[:written]):
                self._terminate_fragment()
            self.close()
            self._report(f"cannot append to {self.path}: {error.strerror or error}")
            return False
        return True

    def _take_back(self, part: bytes) -> bool:
        """Cut ``part`` (what a failed append wrote) off the end of the log, if it is
        still the log's end (nobody appended after it). True if it was cut."""
        if self._fd is None:
            return False
        try:
            end = os.fstat(self._fd).st_size
            start = end - len(part)
            if start < 0 or os.pread(self._fd, len(part), start) != part:
                return False
            os.ftruncate(self._fd, start)
        except OSError:
            return False
        return True

    def _terminate_fragment(self) -> None:
        # A partial line that could not be cut off must not glue itself to the next
        # event.
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.write(self._fd, b"\n")

    def end_torn_line(self) -> bool:
        """End a torn last line (a writer died mid-line) with a newline now, rather than
        before the next event. Returns True if the log had a torn line."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(0, os.SEEK_END)
                if handle.tell() == 0:
                    return False
                handle.seek(-1, os.SEEK_END)
                if handle.read(1) == b"\n":
                    return False
        except OSError:
            return False
        self._append(b"")
        return True

    def sync(self) -> None:
        """fsync the log (after the terminal event; on a thread while an agent starts).

        The descriptor is read once: the driver's thread may close the log meanwhile
        (a write error, a log removed and reopened), and a descriptor closed under the
        fsync (``EBADF``) leaves nothing of this log to sync."""
        fd = self._fd
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError as error:
                if error.errno != errno.EBADF:
                    self._report(f"cannot sync {self.path}: {error.strerror or error}")

    def close(self) -> None:
        """Close the file; a later ``emit`` reopens it."""
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
            self._size_after_write = None

    def _report(self, message: str) -> None:
        if not self._reported_error:
            self._reported_error = True
            # stderr may be a file on the very disk that is full.
            with contextlib.suppress(OSError, ValueError):
                print(f"autopilot: warning: {message}", file=sys.stderr, flush=True)
