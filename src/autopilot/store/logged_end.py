"""A run's ending as its event log tells it, over a ``state.json`` that could not say so.

A driver writes a run's terminal event first (fsynced), then ``terminated`` into
``state.json``. When the second write fails (a full disk) or the driver dies between
the two, the log holds the truth. ``status``, ``list``, ``stop``, ``start``, bare
``autopilot`` and the supervisor read it here (``manage.activity.settled_state``), so
none of them calls such a run running or offers to relaunch it; a command that may
write makes ``state.json`` agree (``loop.recovery.reconcile_terminal``).

The same holds for one step: its ``decision_applied`` is logged before ``state.json``
is written, so an attempt left open there may have its decision on record
(``logged_decision``).

An agent can append to the log too. A ``complete`` counts only when ``state.json``
records the driver's intent to complete with that reason (``ending``, written before
the event, ``loop.record.RunRecord.intend_completion``); one without it is not the
driver's and is passed over. An ``abort`` counts as it stands: a run an agent ends
that way is ended (as ``autopilot stop``, open to the agent too, would end it), never
called completed and never given more budget.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from autopilot.core.vocabulary import EventType
from autopilot.store.events import read_events
from autopilot.store.run_state import RunState

# The change records (``core.change``) and the ending's vocabulary (``core.ending``)
# are loaded where a decision or an ending is read from the log: ``status``, ``list``
# and ``send`` of a run whose state is settled need neither.
TYPE_CHECKING = False  # as typing's
if TYPE_CHECKING:
    from typing import Any

    from autopilot.core.change import StateChange

TAIL_BYTES = 64 * 1024
"""How much of a log's end is searched for its terminal event: the terminal event is
the last a driver writes; at most a warning or two follow it."""

_TERMINAL_TYPES = (EventType.COMPLETE.value, EventType.ABORT.value)


def logged_ending(events: Path, state: RunState) -> dict[str, Any] | None:
    """The terminal event (``complete`` or ``abort``) among the last ``TAIL_BYTES`` of
    the log ``events`` of the run whose ``state.json`` is ``state``, or None (none
    there, or the log cannot be read).

    Only whole lines count, decided as every reader decides them
    (``store.records.decode_event_line``), and a ``complete`` only as the driver's
    (``is_drivers``).
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
        if event is not None and event.get("type") in _TERMINAL_TYPES and is_drivers(event, state):
            return event
    return None


def is_drivers(event: dict[str, Any], state: RunState) -> bool:
    """Whether the terminal ``event`` can be the driver's: an ``abort``, or a
    ``complete`` whose reason ``state.json``'s ``ending`` (the driver's intent,
    written before the event) names."""
    if event.get("type") != EventType.COMPLETE:
        return True
    return state.ending is not None and state.ending == event.get("reason")


def ended_as_logged(state: RunState, event: dict[str, Any]) -> RunState:
    """A copy of ``state`` ended as the terminal ``event`` says (``terminated``, its
    reason and note, the status it leaves); ``state`` itself is not changed."""
    from autopilot.core.ending import status_for

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


def logged_decision(events: Path, attempt: str) -> StateChange | None:
    """The change of the last ``decision_applied`` event the log ``events`` holds for
    ``attempt`` (an iteration folder's name, ``iter-0003``), or None (none, or none
    that reads as a change)."""
    from autopilot.core.change import StateChange

    found: StateChange | None = None
    for event in read_events(events):
        if event.get("type") == EventType.DECISION_APPLIED and event.get("attempt") == attempt:
            change = event.get("change")
            try:
                found = StateChange.from_json(change if isinstance(change, dict) else {})
            except ValueError:
                continue
    return found
