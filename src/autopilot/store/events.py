"""The append-only event log (``events.jsonl``) and its line format.

One JSON object per line, each with ``type``, ``ts`` (epoch milliseconds, an integer)
and ``runId``. The vocabulary starts with the Node tool's names and only ever grows:
``EVENT_TYPES`` is appended to, never reordered. Lines follow the seed system's
writer contract (``docs/formats.md``, "Line format"): compact JSON,
``ensure_ascii=False``, no NaN/Infinity, at most 16 KiB per line, excerpts and notes
cut at 500 UTF-16 code units without splitting a surrogate pair.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeGuard

from autopilot.core.redact import redact_value
from autopilot.core.text import (
    MAX_EXCERPT_UTF16_UNITS,
    cut_units,
    excerpt,
    repair_surrogates,
    utf16_units,
)
from autopilot.core.vocabulary import EventType
from autopilot.store.lines import iter_lines
from autopilot.store.private import open_private

__all__ = ["MAX_EXCERPT_UTF16_UNITS", "EventType", "excerpt", "utf16_units"]

MAX_EVENT_LINE_BYTES = 16 * 1024
"""A serialized event line (without its newline) may be at most this long."""


MAX_READ_LINE_BYTES = 1024 * 1024
"""Readers skip longer lines: 64 times what a writer may write, so something else
appending to a log (or a corrupt file) cannot make a reader hold gigabytes."""

_READ_CHUNK_BYTES = 1024 * 1024


EVENT_TYPES: tuple[str, ...] = tuple(t.value for t in EventType)
"""The closed vocabulary, in its append-only order."""

SEED_EVENT_TYPES: frozenset[str] = frozenset(EVENT_TYPES[:25])
"""The types the seed system's reader accepts; it skips the rest."""

TERMINAL_EVENT_TYPES = frozenset({EventType.COMPLETE.value, EventType.ABORT.value})

_CAPPED_FIELDS = ("excerpt", "note", "reason", "argsSummary", "desc")
_UNREDACTED_FIELDS = frozenset({"type", "ts", "runId"})


JS_NUMBER_LIMIT = 2**1024
"""A JSON number this large or larger is Infinity to JavaScript's ``JSON.parse``."""


def finite_number(value: Any) -> TypeGuard[int | float]:
    """True for a number (not a bool) that the Node tool's reader reads as finite.

    ``json`` reads a 400-digit integer as a Python int; JavaScript reads it as
    Infinity, so it is not finite here either.
    """
    kind = type(value)
    if kind is int:  # the common case first: this runs for every field of every event
        whole: int = value
        return -JS_NUMBER_LIMIT < whole < JS_NUMBER_LIMIT
    if kind is float:
        real: float = value
        return real - real == 0.0  # False for NaN and the infinities
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return -JS_NUMBER_LIMIT < value < JS_NUMBER_LIMIT


def serialize_event(event: Mapping[str, Any]) -> bytes | None:
    """Serialize one event to a line (without newline), or None if it cannot fit.

    Every string is written with well-known secrets redacted (``redact``), then the
    capped text fields are cut to 500 UTF-16 units. If the line is still over
    ``MAX_EVENT_LINE_BYTES``, ``excerpt`` and ``note`` are dropped (as the seed's
    lenient emitter does); if it still does not fit, the event is refused.

    Raises:
        ValueError: the event has no ``type``/``ts``/``runId``, or holds NaN/Infinity
            or a value JSON cannot represent.
    """
    ts = event.get("ts")
    if not isinstance(event.get("type"), str) or not isinstance(ts, int) or isinstance(ts, bool):
        raise ValueError("an event needs a str 'type' and an int 'ts'")
    if not isinstance(event.get("runId"), str) or not event["runId"]:
        raise ValueError("an event needs a non-empty 'runId'")
    record = redact_value(dict(event), skip=_UNREDACTED_FIELDS.__contains__)
    for key in _CAPPED_FIELDS:
        value = record.get(key)
        if isinstance(value, str):
            record[key] = cut_units(value)  # already redacted, above
    line = _dumps(record)
    if len(line) > MAX_EVENT_LINE_BYTES:
        for key in ("excerpt", "note"):
            record.pop(key, None)
        line = _dumps(record)
        if len(line) > MAX_EVENT_LINE_BYTES:
            return None
    return line


def _dumps(record: Mapping[str, Any]) -> bytes:
    try:
        text = json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, RecursionError) as error:
        raise ValueError(f"not JSON-serializable: {error}") from None
    return repair_surrogates(text).encode("utf-8")


def parse_event_line(line: bytes | str) -> dict[str, Any] | None:
    """Parse one log line as the seed reader does, or return None to skip it.

    Accepted only if it is strict JSON (no NaN/Infinity) holding an object whose
    ``type`` is a known event type, ``ts`` is a finite number and ``runId`` a
    non-empty string. Surrounding whitespace (and CRLF) is tolerated. Unknown types
    are skipped, like the seed's.
    """
    text = line.strip()
    if not text:
        return None
    try:
        value = _DECODER.decode(text if isinstance(text, str) else text.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    if not finite_number(value.get("ts")):
        return None
    run_id = value.get("runId")
    if not isinstance(run_id, str) or not run_id:
        return None
    if value.get("type") not in _EVENT_TYPE_SET:
        return None
    return value


_EVENT_TYPE_SET = frozenset(EVENT_TYPES)


def _reject_constant(name: str) -> Any:
    # NaN/Infinity are not JSON: the seed reader's JSON.parse rejects the whole line.
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def iter_event_lines(
    stream: IO[bytes],
    *,
    hold_back_partial: bool = True,
    max_line_bytes: int = MAX_READ_LINE_BYTES,
) -> Iterator[bytes]:
    """Yield each complete line of ``stream``, reading it in 1 MiB chunks, in bounded
    memory and linear time (see ``autopilot.store.lines``).

    Args:
        stream: A binary file positioned where reading should start.
        hold_back_partial: If True a final line with no newline (a torn or
            in-progress write) is not yielded.
        max_line_bytes: Longer lines are skipped as they stream past.
    """
    return iter_lines(
        stream,
        max_line_bytes=max_line_bytes,
        hold_back_partial=hold_back_partial,
        chunk_bytes=_READ_CHUNK_BYTES,
    )


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """Yield the accepted events of an ``events.jsonl``, skipping bad or torn lines.

    A missing file yields nothing. The final line is held back unless it ends with a
    newline, since a writer may be mid-append. Lines over ``MAX_READ_LINE_BYTES`` are
    skipped.
    """
    try:
        stream = path.open("rb")
    except FileNotFoundError:
        return
    from autopilot.store.records import decode_event_line  # msgspec: only where logs are read

    with stream:
        for raw in iter_event_lines(stream):
            event = decode_event_line(raw)
            if event is not None:
                yield event


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
        """fsync the log (used after the terminal event)."""
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError as error:
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
