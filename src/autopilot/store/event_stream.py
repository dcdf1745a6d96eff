"""A log's lines as they are read: bytes to lines in bounded memory, lines to events.

``read_events`` decodes each line to a dict by the rules of
``event_format.parse_event_line`` (through msgspec, ``store.records``, except in a short
log); the typed fold of a whole log is ``store.reader``'s.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from autopilot.store.event_format import MAX_READ_LINE_BYTES, parse_event_line
from autopilot.store.lines import iter_lines

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import IO, Any

_READ_CHUNK_BYTES = 1024 * 1024

PLAIN_LOG_BYTES = 64 * 1024
"""A log up to this size (a new run's, a few iterations') is decoded with ``json``
alone: loading msgspec (about 10 ms) would cost more than it saves."""


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
    skipped. Each line is decoded by ``parse_event_line``'s rules either way: with
    ``json`` in a log of up to ``PLAIN_LOG_BYTES`` when opened, else through msgspec.
    """
    try:
        stream = path.open("rb")
    except FileNotFoundError:
        return
    decode: Callable[[bytes], dict[str, Any] | None] = parse_event_line
    if os.fstat(stream.fileno()).st_size > PLAIN_LOG_BYTES:
        from autopilot.store.records import decode_event_line  # msgspec: only for a long log

        decode = decode_event_line

    with stream:
        for raw in iter_event_lines(stream):
            event = decode(raw)
            if event is not None:
                yield event
