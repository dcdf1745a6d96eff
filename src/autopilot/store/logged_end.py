"""A run's ending as its event log tells it, over a ``state.json`` that could not say so.

A driver writes a run's terminal event first (fsynced), then ``terminated`` into
``state.json``. When the second write fails (a full disk) or the driver dies between
the two, the log holds the truth. ``status``, ``list``, ``stop``, ``start``, bare
``autopilot`` and the supervisor read it here (``manage.activity.settled_state``), so
none of them calls such a run running or offers to relaunch it; a command that may
write makes ``state.json`` agree (``loop.recovery.reconcile_terminal``).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from autopilot.core.ending import status_for
from autopilot.core.vocabulary import EventType
from autopilot.store.run_state import RunState

TAIL_BYTES = 64 * 1024
"""How much of a log's end is searched for its terminal event: the terminal event is
the last a driver writes; at most a warning or two follow it."""

_TERMINAL_TYPES = (EventType.COMPLETE.value, EventType.ABORT.value)


def logged_ending(events: Path) -> dict[str, Any] | None:
    """The terminal event (``complete`` or ``abort``) among the last ``TAIL_BYTES`` of
    the log ``events``, or None (none there, or the log cannot be read).

    Only whole lines count, decided as every reader decides them
    (``store.records.decode_event_line``).
    """
    from autopilot.store.records import decode_event_line

    try:
        with events.open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            start = max(0, size - TAIL_BYTES)
            stream.seek(start)
            block = stream.read(size - start)
    except OSError:
        return None
    lines = block.split(b"\n")[:-1]  # after the last newline: a partial line
    if start > 0 and lines:
        lines = lines[1:]  # the first line began before the block
    for line in reversed(lines):
        if b'"type"' not in line:
            continue
        event = decode_event_line(line)
        if event is not None and event.get("type") in _TERMINAL_TYPES:
            return event
    return None


def ended_as_logged(state: RunState, event: dict[str, Any]) -> RunState:
    """A copy of ``state`` ended as the terminal ``event`` says (``terminated``, its
    reason and note, the status it leaves); ``state`` itself is not changed."""
    reason = event.get("reason")
    note = event.get("note")
    ended = copy.deepcopy(state)
    ended.terminated = True
    ended.termination_reason = reason if isinstance(reason, str) else None
    ended.termination_note = note if isinstance(note, str) else None
    ended.status = status_for(str(event.get("type")), ended.termination_reason or "")
    ended.iteration_open, ended.waiting_until_ms = False, None
    ended.pid = ended.agent_pid = None
    return ended
