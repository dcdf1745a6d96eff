"""A driver's delivery steps, run as a separate process that can SIGKILL itself at any
point: ``python -m tests.runtime.delivery_sim FOLDER PROJECT CRASH_AT``.

It keeps the delivery ledger in a real ``state.json`` and writes what "the agent"
received to ``received/`` (at spawn) and what was concluded to ``concluded.jsonl``
(right after the conclusion's state write), so a test can check the contract.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from autopilot.core.delivery import conclude
from autopilot.loop.clock import SystemClock
from autopilot.loop.delivery import Delivery
from autopilot.store.events import EventLog
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore

POINTS = (
    "after_repair",
    "before_spawn",
    "after_spawn",
    "after_ledger",
    "after_delivered",
    "after_conclude",
    "after_retire",
)


def attempt(folder: Path, project: Path, crash_at: str) -> None:
    """One attempt of the delivery protocol, killed at ``crash_at`` ("" = never)."""

    def point(name: str) -> None:
        if name == crash_at:
            os.kill(os.getpid(), signal.SIGKILL)

    store = StateStore(folder / "state.json")
    clock = SystemClock()
    log = EventLog(folder / "events.jsonl", folder.name, clock.now_ms)
    delivery = Delivery(folder, log, project, clock)
    state = store.read()
    ledger = delivery.repair(state.delivery)
    state = store.update(lambda s: setattr(s, "delivery", ledger))
    point("after_repair")
    iteration = state.iteration + (0 if state.iteration_open else 1)
    _prompt, handoff = delivery.deliver("base prompt", ledger, iteration)
    point("before_spawn")
    received = folder / "received"
    received.mkdir(exist_ok=True)
    n = len(list(received.iterdir()))
    (received / f"{n:03d}.json").write_text(
        json.dumps({"iteration": iteration, "ids": [m.id for m in handoff.messages]})
    )
    point("after_spawn")

    def start(s: RunState) -> None:
        s.delivery, s.iteration, s.iteration_open = handoff.ledger, iteration, True

    store.update(start)
    point("after_ledger")
    delivery.handed(handoff, iteration)
    point("after_delivered")
    concluded = conclude(handoff.ledger, outcome_stands=True)

    def close(s: RunState) -> None:
        s.delivery, s.iteration_open = concluded, False

    store.update(close)
    with (folder / "concluded.jsonl").open("a") as out:
        out.write(json.dumps({"iteration": iteration, "ids": sorted(handoff.ledger.handed)}))
        out.write("\n")
    point("after_conclude")
    left = delivery.retire(concluded)
    store.update(lambda s: setattr(s, "delivery", left))
    point("after_retire")
    log.close()


def send(folder: Path, text: str, crash_at: str) -> None:
    """``Inbox.put`` of one message, killed ``before_record`` or ``after_record``."""
    from autopilot.core.delivery import Message, MessageKind, MessageSource
    from autopilot.loop.messages import queued_event_fields
    from autopilot.store.events import EventType
    from autopilot.store.inbox import Inbox, new_message_id

    clock = SystemClock()
    log = EventLog(folder / "events.jsonl", folder.name, clock.now_ms)
    now = clock.now_ms()
    message = Message(new_message_id(now), MessageSource.USER, MessageKind.MESSAGE, text, now)

    def record(queued: Message) -> None:
        if crash_at == "before_record":
            os.kill(os.getpid(), signal.SIGKILL)
        log.emit(EventType.MESSAGE_QUEUED, **queued_event_fields(queued, autopilot_on=True))
        if crash_at == "after_record":
            os.kill(os.getpid(), signal.SIGKILL)

    Inbox(folder).put(message, record)


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        attempt(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3])
