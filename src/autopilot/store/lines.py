"""Split a byte stream into lines in bounded memory and linear time.

Agent output can hold a line of any length (a tool result with a whole diff, field
report 20) and a saved ``stdout.log`` can reach 4 GiB. A line longer than the cap is
skipped while it streams past — never accumulated, never re-scanned — and counted;
the lines after it are read as usual, so a result line after bulk is never lost.
Every byte is looked at once, and at most ``max_line_bytes`` plus one chunk is held.
"""

from __future__ import annotations

from collections.abc import Iterator

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import IO

DEFAULT_CHUNK_BYTES = 1024 * 1024
READ_LINE_CAP = 1024 * 1024
"""The longest line a reader of a log or of the index takes (``event_format``'s
``MAX_READ_LINE_BYTES``): 64 times what a writer may write."""


class LineSplitter:
    """Turns chunks of bytes into complete lines (without their ``\\n``).

    Args:
        max_line_bytes: A longer line is skipped whole (and counted in
            ``oversized``); the line after it is read as usual.
    """

    def __init__(self, max_line_bytes: int) -> None:
        self._max = max_line_bytes
        self._buffer = bytearray()
        self._skipping = False
        self.oversized = 0

    def feed(self, data: bytes) -> list[bytes]:
        """The lines that ``data`` completes, oldest first."""
        lines = data.split(b"\n")  # in C: a Python loop per line costs more than the parse
        rest = lines.pop()  # after the last newline: the start of the next line
        if lines:
            if self._skipping:  # the first piece ends a line already counted as oversized
                self._skipping = False
                del lines[0]
            elif self._buffer:
                if len(self._buffer) + len(lines[0]) > self._max:
                    self.oversized += 1
                    del lines[0]
                else:
                    self._buffer += lines[0]
                    lines[0] = bytes(self._buffer)
                self._buffer.clear()
            if lines and max(map(len, lines)) > self._max:
                kept = [line for line in lines if len(line) <= self._max]
                self.oversized += len(lines) - len(kept)
                lines = kept
        if not self._skipping and rest:
            self._buffer += rest
            if len(self._buffer) > self._max:
                self._buffer.clear()
                self._skipping = True
                self.oversized += 1
        return lines

    def finish(self) -> bytes | None:
        """The final line if the stream ended without a newline (None if there is
        none, or it was over the cap); the splitter is empty afterwards."""
        line = bytes(self._buffer) if self._buffer and not self._skipping else None
        self._buffer.clear()
        self._skipping = False
        return line


def iter_lines(
    stream: IO[bytes],
    *,
    max_line_bytes: int,
    hold_back_partial: bool = True,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[bytes]:
    """Yield each line of ``stream`` up to ``max_line_bytes`` long, skipping longer ones.

    Args:
        stream: A binary file positioned where reading should start.
        max_line_bytes: Lines longer than this (without the newline) are skipped.
        hold_back_partial: If True a final line with no newline (a torn or
            in-progress write) is not yielded.
        chunk_bytes: How much to read at a time.
    """
    splitter = LineSplitter(max_line_bytes)
    while chunk := stream.read(chunk_bytes):
        yield from splitter.feed(chunk)
    last = splitter.finish()
    if last is not None and not hold_back_partial:
        yield last
