"""What ``autopilot status`` shows from a run's log and inbox, read as plain JSON
without the snapshot fold (``store.fold``, msgspec Structs) or the delivery model
(``core.delivery``): when the last terminal event was logged, the last restore, the
last excerpt, and how many messages (and of those, the user's) wait for the agent.

Each is what the typed readers give (``read_snapshot``'s ``terminal``,
``terminalAt``, ``lastRestore`` and ``lastExcerpt``; ``loop.messages.pending_messages``),
held to them by ``tests/store/test_status_figures.py``. Where that would take more than
a short read (a log longer than ``PLAIN_READ_BYTES``) or the typed reader would change
a file (a malformed message is put aside), these return None and ``status`` reads the
run the typed way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from autopilot.core.message_ids import MAX_MESSAGE_CHARS, MessageKind, MessageSource, is_message_id
from autopilot.store.event_format import MAX_READ_LINE_BYTES, finite_number, parse_event_line
from autopilot.store.lines import LineSplitter

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

PLAIN_READ_BYTES = 256 * 1024
"""The longest log read here (``store.reader.PLAIN_READ_BYTES``: about a thousand
events); a longer one is folded the typed way."""

_SOURCES = frozenset(member.value for member in MessageSource)
_KINDS = frozenset(member.value for member in MessageKind)


class LogFigures:
    """The figures of a log ``status`` prints, as ``read_snapshot`` folds them.

    Attributes:
        terminal: The last of the events that set the seed status is a ``complete``
            or ``abort`` (``Snapshot.terminal``).
        terminal_at: That event's ``ts`` (``terminalAt``), or None.
        last_restore: ``lastRestore`` (``checkpoint``, ``sha``, ``safetyCheckpoint``,
            ``filesChanged``, ``ts``), or None.
        last_excerpt: ``lastExcerpt``, or None.
        delivered: The ``messageId`` of every ``message_delivered`` event.
    """

    __slots__ = ("delivered", "last_excerpt", "last_restore", "terminal", "terminal_at")

    def __init__(self) -> None:
        self.terminal = False
        self.terminal_at: int | float | None = None
        self.last_restore: dict[str, Any] | None = None
        self.last_excerpt: str | None = None
        self.delivered: set[str] = set()


def log_figures(events: Path) -> LogFigures | None:
    """The ``LogFigures`` of the log ``events`` (a missing log has none), or None when
    it is longer than ``PLAIN_READ_BYTES`` or cannot be read."""
    figures = LogFigures()
    try:
        with events.open("rb") as stream:
            if os.fstat(stream.fileno()).st_size > PLAIN_READ_BYTES:
                return None
            data = stream.read(PLAIN_READ_BYTES + 1)
    except FileNotFoundError:
        return figures
    except OSError:
        return None
    if len(data) > PLAIN_READ_BYTES:
        return None
    # The last open iteration: [its number, whether it ended].
    last: list[Any] | None = None
    for line in LineSplitter(MAX_READ_LINE_BYTES).feed(data):
        event = parse_event_line(line)
        if event is None:
            continue
        kind = event["type"]
        if kind == "armed":  # a new run's snapshot: the fold starts afresh
            figures.terminal, figures.terminal_at = False, None
            figures.last_restore = figures.last_excerpt = None
            last = None
        elif kind == "iteration_start":
            number = event.get("iteration")
            if finite_number(number):
                last = [number, False]
            figures.terminal = False
        elif kind == "iteration_end":
            number, text = event.get("iteration"), event.get("excerpt")
            if last is not None and (not finite_number(number) or number == last[0]):
                last[1] = True
            if isinstance(text, str):
                figures.last_excerpt = text
        elif kind == "usage_update":
            number, text = event.get("iteration"), event.get("excerpt")
            same = last is not None and (not finite_number(number) or number == last[0])
            if isinstance(text, str) and text and same and last is not None and not last[1]:
                figures.last_excerpt = text
        elif kind in ("pause", "resume"):
            figures.terminal = False
        elif kind in ("complete", "abort"):
            figures.terminal, figures.terminal_at = True, event["ts"]
        elif kind == "restored":
            _restored(figures, event)
        elif kind == "message_delivered" and isinstance(event.get("messageId"), str):
            figures.delivered.add(event["messageId"])
    return figures


def _restored(figures: LogFigures, event: dict[str, Any]) -> None:
    checkpoint, safety = event.get("checkpoint"), event.get("safetyCheckpoint")
    if not isinstance(checkpoint, str) or not checkpoint:
        return
    if not isinstance(safety, str) or not safety:
        return
    sha, files = event.get("sha"), event.get("filesChanged")
    figures.last_restore = {
        "checkpoint": checkpoint,
        "sha": sha if isinstance(sha, str) and sha else None,
        "safetyCheckpoint": safety,
        "filesChanged": files if finite_number(files) else None,
        "ts": event["ts"],
    }


def pending_counts(run_folder: Path, delivered: set[str]) -> tuple[int, int] | None:
    """How many messages wait for the agent and how many of them are the user's, as
    ``pending_messages`` counts them (``delivered``: the ids the log says were
    delivered); None when a message file is malformed (the inbox puts it aside)."""
    inbox = run_folder / "inbox"  # store.inbox.INBOX_DIR
    found: list[tuple[str, str]] = []  # (id, source), those taken first
    taken = False
    for name in ("cur", "new"):
        folder = inbox / name
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            ident = path.name[: -len(".json")]
            if not is_message_id(ident):
                continue
            try:
                data = json.loads(path.read_bytes())
            except OSError:
                continue  # the inbox's reader passes over it too
            except (ValueError, RecursionError):
                return None
            source = _checked_source(data, ident)
            if source is None:
                return None
            found.append((ident, source))
            taken = taken or name == "cur"
    seen: dict[str, str] = {}
    for ident, source in found:
        if not (taken and ident in delivered):  # the log is read only when one is taken
            seen.setdefault(ident, source)
    users = sum(1 for source in seen.values() if source == MessageSource.USER.value)
    return len(seen), users


def _checked_source(data: object, ident: str) -> str | None:
    """The ``source`` of a message file's JSON ``Message.from_json`` would accept
    under the name ``ident``, or None."""
    if not isinstance(data, dict) or data.get("id") != ident:
        return None
    text, queued = data.get("text"), data.get("queuedAt")
    if not isinstance(text, str) or len(text) > MAX_MESSAGE_CHARS:
        return None
    if isinstance(queued, bool) or not isinstance(queued, int) or queued < 0:
        return None
    source, kind = str(data.get("source")), str(data.get("kind"))
    return source if source in _SOURCES and kind in _KINDS else None
