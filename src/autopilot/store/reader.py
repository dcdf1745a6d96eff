"""The one reader of ``events.jsonl`` behind ``fold``, ``status``, ``replay``, ``watch``
and crash recovery.

A log is read in blocks of a few MiB and split into lines in bounded memory
(``store.lines``: a line over ``MAX_READ_LINE_BYTES`` is skipped as it streams past).
Each line is decided by the seed reader's rules (``events.parse_event_line``) and
decoded by msgspec: straight into a typed record (``store.records``) when only the
picture of the run is wanted, into a dict when each event is wanted too. A span of
at most ``PLAIN_READ_BYTES`` in a process that has not loaded msgspec yet is read by
``parse_event_line`` itself (the same events, the same snapshot): loading msgspec
costs more than it saves on a few hundred lines, and ``status`` of a short run
starts faster. A final line without its newline is a write in progress (or torn by
a crash) and is left for later, as the seed's ``watch`` does. A log that does not
exist reads as empty.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from autopilot.store.event_format import MAX_READ_LINE_BYTES, parse_event_line
from autopilot.store.fold import Snapshot, fold_event, fold_lines
from autopilot.store.lines import LineSplitter

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

FOLD_CHUNK_BYTES = 64 * 1024
"""Block size of the streaming fold. Larger blocks are slower (they leave the CPU's
cache) and cost their size twice in memory (the block and its lines)."""

PLAIN_READ_BYTES = 256 * 1024
"""The longest span read without msgspec (about a thousand events) when the process
has not loaded it: past it, msgspec's decoding repays its import."""


def fold_log(
    path: Path,
    *,
    start: int = 0,
    end: int | None = None,
    snapshot: Snapshot | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    chunk_bytes: int = FOLD_CHUNK_BYTES,
) -> tuple[Snapshot, int]:
    """Fold a log in one streaming pass; the same snapshot as ``fold(read_events(path))``.

    Args:
        path: The log; a missing file folds to an empty snapshot.
        start: Byte offset to start at (a line boundary).
        end: Byte offset to stop at (default: the end of the file); a partial
            line before it is left for later.
        snapshot: A snapshot to continue, changed in place (default: a new one).
        on_event: Called with each accepted event (a dict) after it is folded.
        cancelled: Polled between blocks; returning True stops the fold early.
        chunk_bytes: Block size.

    Returns:
        The snapshot and the offset just after the last complete line read.
    """
    snap = snapshot if snapshot is not None else Snapshot()
    try:
        stream = path.open("rb")
    except OSError:
        return snap, start
    splitter = LineSplitter(MAX_READ_LINE_BYTES)
    with stream:
        stream.seek(start)
        limit = os.fstat(stream.fileno()).st_size if end is None else end
        plain = limit - start <= PLAIN_READ_BYTES and not _msgspec_loaded()
        decode: Callable[[bytes], dict[str, Any] | None] = parse_event_line
        if not plain:
            from autopilot.store.records import decode_event_line

            decode = decode_event_line
        position = start
        folded_to = start
        while position < limit:
            if cancelled is not None and cancelled():
                break
            data = stream.read(min(chunk_bytes, limit - position))
            if not data:
                break
            cut = data.rfind(b"\n")
            if cut >= 0:
                folded_to = position + cut + 1
            position += len(data)
            lines = splitter.feed(data)
            if on_event is None and not plain:
                fold_lines(snap, lines)
                continue
            for line in lines:
                event = decode(line)
                if event is not None:
                    fold_event(snap, event)
                    if on_event is not None:
                        on_event(event)
    return snap, folded_to


def _msgspec_loaded() -> bool:
    return "autopilot.store.records" in sys.modules


def read_snapshot(path: Path) -> Snapshot:
    """The picture of a run from its whole log (``fold_log`` without the offset)."""
    return fold_log(path)[0]
