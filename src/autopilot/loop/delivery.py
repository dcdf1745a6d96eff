"""The driver's one ``deliver()``: everything it tells the agent beyond the base prompt.

A thin shell over ``core.delivery`` (the decisions) and ``store.inbox`` (the files).
The driver uses it at four points of an attempt, and writes the ledger it returns into
``state.json`` (its ``delivery`` object) in the same write as the attempt's own record::

    repair(ledger)                      driver start: finish what a crash interrupted
    deliver(prompt, ledger, iteration)  before the spawn: claim, order, compose (the
                                        memory file's paragraph, then the messages)
    handed(handoff, autopilot_on)       after the spawn and the ledger write:
                                        message_delivered for each first hand-off
    retire(ledger)                      after the conclusion's write: move files to done/

Driver notices (a budget warning, a reopened item, a supervisor notice) are queued
with ``notice`` and so take the same path as a user's message, after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autopilot.core.delivery import (
    DeliveryLedger,
    Handoff,
    Message,
    MessageKind,
    MessageSource,
    compose_prompt,
    forget_retired,
    plan_handoff,
    plan_repair,
)
from autopilot.loop.clock import Clock
from autopilot.loop.messages import ids_in_log, queue_message, queued_event_fields
from autopilot.store.events import EventLog, EventType
from autopilot.store.inbox import Inbox
from autopilot.store.memory import memory_paragraph
from autopilot.store.project_files import is_off


class Delivery:
    """Delivery of messages to one run's agent.

    Args:
        run_folder: The run's folder.
        log: The run's event log (the driver's).
        project: The run's work tree (for the memory file and the OFF switch).
        clock: For the messages' times.
        memory: Every prompt carries the memory file's paragraph (``store.memory``).
        off_folders: The folders whose OFF switch holds the run (``run_projects``);
            ``project`` alone when not given.
    """

    def __init__(
        self,
        run_folder: Path,
        log: EventLog,
        project: Path,
        clock: Clock,
        *,
        memory: bool = False,
        off_folders: Sequence[Path] = (),
    ) -> None:
        self.run_folder = run_folder
        self.off_folders = tuple(off_folders) or (project,)
        self.memory = memory
        self.log = log
        self.project = project
        self.clock = clock
        self.inbox = Inbox(run_folder)

    def _autopilot_on(self) -> bool:
        return not any(is_off(folder) for folder in self.off_folders)

    def notice(self, kind: MessageKind, text: str) -> Message:
        """Queue a driver notice for the next attempt (after the user's messages).

        Raises:
            StateFileError: the inbox cannot be written.
        """
        return queue_message(
            self.run_folder,
            text,
            self.clock,
            source=MessageSource.DRIVER,
            kind=kind,
            log=self.log,
            autopilot_on=self._autopilot_on(),
        )

    def repair(self, ledger: DeliveryLedger) -> DeliveryLedger:
        """At driver start: retire files a crash left in ``cur/`` and write the
        ``message_delivered`` a crash cut off; returns the ledger to store.

        Raises:
            StateFileError: the inbox cannot be changed.
        """
        plan = plan_repair(
            ledger,
            self.inbox.taken_ids(),
            ids_in_log(self.run_folder, EventType.MESSAGE_DELIVERED) if ledger.handed else (),
        )
        if plan.record:
            by_id = {m.id: m for m in self.inbox.taken()}
            for ident, iteration in plan.record:
                message = by_id.get(ident)
                self.log.emit(
                    EventType.MESSAGE_DELIVERED,
                    messageId=ident,
                    source=message.source.value if message else None,
                    kind=message.kind.value if message else None,
                    iteration=iteration,
                    autopilotOn=self._autopilot_on(),
                    repaired=True,
                )
        moved = self.inbox.retire(plan.retire)
        return forget_retired(ledger, moved)

    def deliver(
        self, base_prompt: str, ledger: DeliveryLedger, iteration: int
    ) -> tuple[str, Handoff]:
        """The prompt for the next attempt of ``iteration`` and what it hands off.

        Claims every queued message (adopting any a dead sender left), then gives the
        attempt every taken message that is not retired, the user's first.

        Returns:
            The prompt (``base_prompt`` plus the messages section) and the hand-off,
            whose ``ledger`` goes into ``state.json`` once the agent has started.

        Raises:
            StateFileError: the inbox cannot be read or changed.
        """
        autopilot_on = self._autopilot_on()

        def record_orphan(message: Message) -> None:
            self.log.emit(
                EventType.MESSAGE_QUEUED,
                **queued_event_fields(message, autopilot_on=autopilot_on),
                recovered=True,
            )

        taken = self.inbox.claim(
            record_orphan, lambda: ids_in_log(self.run_folder, EventType.MESSAGE_QUEUED)
        )
        handoff = plan_handoff(taken, ledger, iteration)
        standing = (memory_paragraph(self.project),) if self.memory else ()
        return compose_prompt(base_prompt, handoff.messages, standing), handoff

    def handed(self, handoff: Handoff, iteration: int) -> None:
        """Write ``message_delivered`` for each first hand-off of ``handoff``.

        Call after the agent process started and the hand-off's ledger is written.
        """
        if not handoff.to_record:
            return  # nothing handed for the first time: no OFF switch to look at
        by_id = {m.id: m for m in handoff.messages}
        autopilot_on = self._autopilot_on()
        for ident in handoff.to_record:
            message = by_id[ident]
            self.log.emit(
                EventType.MESSAGE_DELIVERED,
                messageId=ident,
                source=message.source.value,
                kind=message.kind.value,
                iteration=iteration,
                autopilotOn=autopilot_on,
            )

    def retire(self, ledger: DeliveryLedger) -> DeliveryLedger:
        """Move the retired messages' files to ``done/``; returns the ledger without
        them (to store at the next write; a crash before that only repeats the move).

        Raises:
            StateFileError: a file cannot be moved.
        """
        if not ledger.retired:
            return ledger
        return forget_retired(ledger, self.inbox.retire(ledger.retired))
