"""Queueing a message for a run's agent: ``autopilot send``, gate answers and the
driver's own notices all enter the run's inbox here (``docs/architecture.md``,
"Messages to the agent").

Each queued message gets one ``message_queued`` event (``messageId``, ``source``,
``kind``, ``excerpt``, ``chars``, ``autopilotOn``); its delivery is the driver's
(``core.delivery``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from autopilot.core.delivery import Message, MessageKind, MessageSource
from autopilot.errors import UsageError
from autopilot.loop.clock import Clock
from autopilot.store.events import EventLog, EventType, read_events
from autopilot.store.inbox import (
    Inbox,
    check_text,
    new_message_id,
    queue_message_json,
    queued_fields,
)
from autopilot.store.project_files import run_off_switch
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any


def queued_event_fields(message: Message, *, autopilot_on: bool) -> dict[str, Any]:
    """The fields of a ``message_queued`` event for ``message`` (``queued_fields``)."""
    return queued_fields(message.to_json(), autopilot_on=autopilot_on)


def ids_in_log(run_folder: Path, event_type: EventType) -> set[str]:
    """The ``messageId`` of every ``event_type`` event in the run's log."""
    return {
        str(event["messageId"])
        for event in read_events(RunDir(run_folder).events)
        if event.get("type") == event_type.value and isinstance(event.get("messageId"), str)
    }


def queue_message(
    run_folder: Path,
    text: str,
    clock: Clock,
    *,
    source: MessageSource = MessageSource.USER,
    kind: MessageKind = MessageKind.MESSAGE,
    log: EventLog | None = None,
    autopilot_on: bool | None = None,
) -> Message:
    """Queue ``text`` for the run's agent; durable when this returns.

    Works whatever the run's state (running, paused, waiting, its daemon dead); the
    driver hands it to the next attempt. A run that has ended takes no messages.

    Args:
        run_folder: The run's folder.
        text: The message (at most ``MAX_MESSAGE_CHARS`` characters).
        clock: For the message's ``queuedAt`` and the event's ``ts``.
        source: Who it is from.
        kind: What it is.
        log: The run's event log, if the caller has one open (the driver).
        autopilot_on: Whether no OFF switch holds the run, if the caller knows;
            else read from the run ``state.json`` describes (``run_off_switch``).

    Returns:
        The queued message.

    Raises:
        UsageError: the text is empty or too long, or the run has ended.
        StateFileError: the run's state or inbox cannot be read or written.
    """
    check_text(text)
    if autopilot_on is None:
        state = read_state(RunDir(run_folder).state)
        if state.terminated:
            raise UsageError(
                f"run {run_folder.name} has already ended "
                f"({state.termination_reason or state.status}); "
                "it takes no more messages"
            )
        autopilot_on = run_off_switch(state) is None
    now = clock.now_ms()
    message = Message(new_message_id(now), source, kind, text, now)
    if log is None:
        queue_message_json(run_folder, message.to_json(), clock.now_ms, autopilot_on=autopilot_on)
        return message
    event_log = log

    def record(queued: Message) -> None:
        fields = queued_event_fields(queued, autopilot_on=autopilot_on)
        event_log.emit(EventType.MESSAGE_QUEUED, **fields)
        event_log.sync()

    Inbox(run_folder).put(message, record)
    return message


def pending_messages(run_folder: Path) -> tuple[Message, ...]:
    """Messages not yet delivered to the agent, oldest first (for ``status``): those
    queued, and those taken for an iteration with no ``message_delivered`` logged
    (a taken message is retired only when its iteration ends)."""
    inbox = Inbox(run_folder)
    taken = inbox.taken()
    delivered = ids_in_log(run_folder, EventType.MESSAGE_DELIVERED) if taken else set()
    seen: dict[str, Message] = {}
    for message in (*taken, *inbox.pending()):
        if message.id not in delivered:
            seen.setdefault(message.id, message)
    return tuple(sorted(seen.values(), key=lambda m: m.id))


def describe(messages: Iterable[Message]) -> list[str]:
    """One line per message, for people."""
    return [
        f"{m.id}  {m.source.value}/{m.kind.value}  {' '.join(m.text.split())[:80]}"
        for m in messages
    ]


def message_sender(run_folder: Path, clock: Clock) -> Callable[[str], str]:
    """A function that queues a user's message for the run and returns a line for them
    (the live view's ``m`` key).

    The function raises ``UsageError`` for an empty or too long text or an ended run,
    and ``StateFileError`` when the inbox cannot be written.
    """

    def send(text: str) -> str:
        message = queue_message(run_folder, text, clock)
        return f"message {message.id} queued; the agent gets it at its next iteration"

    return send
