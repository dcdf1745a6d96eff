"""What the driver tells the agent beyond its base prompt, and keeps for it: the
messages of the run's inbox (``loop.delivery``), the memory file (``store.memory``)
and the budget warnings it queues itself.

The driver calls it at fixed points of every attempt::

    start()                      before the first attempt: a crash's half-done
                                 deliveries repaired, the memory file made
    prompt(base, iteration)      before the spawn: the messages claimed, the prompt composed
    hand_off(state) / handed()   in the write that opens the attempt, and after it
    keep_memory()                after the attempt: the memory file kept (and put back)
    after(spend_before, ended)   after the step's write: retired messages' files moved,
                                 budget warnings queued for the next attempt
    undelivered()                before the run ends: messages that never reached it
"""

from __future__ import annotations

from pathlib import Path

from autopilot.core.attempt import Attempt
from autopilot.core.delivery import Handoff, MessageKind, budget_warnings
from autopilot.core.policy import PolicyConfig
from autopilot.core.state import Spend
from autopilot.core.vocabulary import EventType
from autopilot.errors import StateFileError, UsageError
from autopilot.loop.clock import Clock
from autopilot.loop.delivery import Delivery
from autopilot.loop.record import RunRecord
from autopilot.store import memory
from autopilot.store.project_files import memory_path, run_projects
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.workspace.records import hide_records


class Briefing:
    """The driver's delivery of messages, memory and budget warnings for one run.

    Args:
        folder: The run's folder.
        record: The driver's record (events; the ledger lives in its state).
        cwd: The work tree.
        clock: For the messages' times.
        policy: The run's budgets (for the warnings).
    """

    def __init__(
        self, folder: RunDir, record: RunRecord, cwd: Path, clock: Clock, policy: PolicyConfig
    ) -> None:
        self.folder = folder
        self.record = record
        self.cwd = cwd
        self.policy = policy
        worktree = record.state.extra.get("worktree")
        self.in_worktree = isinstance(worktree, dict)
        self.delivery = Delivery(
            folder.path,
            record.log,
            cwd,
            clock,
            memory=True,
            off_folders=run_projects(str(cwd), worktree if isinstance(worktree, dict) else None),
        )
        self._handoff: Handoff | None = None
        self.tree_writes = 0  # files put back into the work tree by ``keep_memory``

    def _warn(self, note: str, **fields: object) -> None:
        self.record.emit(EventType.WARNING, note=note, **fields)

    def start(self) -> None:
        """Repair what a crash cut short in the inbox, and keep the memory file."""
        try:
            ledger = self.delivery.repair(self.record.state.delivery)
        except StateFileError as error:
            self._warn(f"inbox: {error}")
        else:
            if ledger != self.record.state.delivery:
                self.record.update(lambda s: setattr(s, "delivery", ledger))
        self.keep_memory(start=True)

    def prompt(self, base_prompt: str, iteration: int) -> str:
        """The prompt of the next attempt of ``iteration``: ``base_prompt``, the memory
        file's paragraph, then the messages (the user's first)."""
        try:
            prompt, self._handoff = self.delivery.deliver(
                base_prompt, self.record.state.delivery, iteration
            )
        except StateFileError as error:
            # Messages stay queued on disk; this attempt goes without them.
            self._warn(f"inbox: {error}", iteration=iteration)
            self._handoff = None
            return base_prompt
        return prompt

    def hand_off(self, state: RunState) -> None:
        """In the write that opens the attempt: the hand-off's ledger."""
        if self._handoff is not None:
            state.delivery = self._handoff.ledger

    def handed(self, iteration: int) -> None:
        """Once the attempt is open: ``message_delivered`` for each first hand-off."""
        handoff, self._handoff = self._handoff, None
        if handoff is not None:
            self.delivery.handed(handoff, iteration)

    def keep_memory(self, *, start: bool = False) -> None:
        """The memory file: put back if the agent deleted it, made empty at the run's
        start if there is none, and copied into the run folder. In a ``--worktree``
        run's worktree, ``.autopilot/.gitignore`` keeps it and autopilot's other records
        out of the agent's commits (``workspace.records.hide_records``; put back too)."""
        try:
            if self.in_worktree and hide_records(self.cwd):
                self.tree_writes += 1
            if memory.restore_if_missing(self.cwd, self.folder.path):
                self.tree_writes += 1
                self.record.emit(
                    EventType.MEMORY_RESTORED,
                    note=f"{memory_path(self.cwd)} was gone; restored from the run's copy",
                )
            if start and memory.ensure_memory(self.cwd):
                self.tree_writes += 1
            memory.keep_copy(self.cwd, self.folder.path)
        except OSError as error:
            self._warn(f"memory file: {error.strerror or error}")

    def notice(self, kind: MessageKind, text: str) -> None:
        """Queue a notice of ``kind`` for the next attempt (a warning if the inbox
        cannot take it: the run goes on without it)."""
        try:
            self.delivery.notice(kind, text)
        except (StateFileError, UsageError) as error:
            self._warn(f"inbox: {error}")

    def reopened(self, attempt: Attempt) -> None:
        """Queue the notice of the work item ``attempt`` reopened (its backlog facts),
        if any, for the item's next attempt."""
        if attempt.backlog is not None and attempt.backlog.reopened_notice:
            self.notice(MessageKind.REOPENED, attempt.backlog.reopened_notice)

    def after(self, spend_before: Spend, *, ended: bool) -> None:
        """After a step's write: move the retired messages' files to ``done/``; unless
        the run ``ended``, queue a budget warning when the step took the cost or token
        budget past 80%."""
        ledger = self.record.state.delivery
        if ledger.retired:
            try:
                left = self.delivery.retire(ledger)
            except StateFileError as error:
                self._warn(f"inbox: {error}")
            else:
                self.record.update(lambda s: setattr(s, "delivery", left))
        if ended:
            return
        limits = {"cost_usd": self.policy.max_cost_usd, "tokens": self.policy.max_tokens}
        after = self.record.state.spend
        for notice in budget_warnings(_amounts(spend_before), _amounts(after), limits):
            self.notice(MessageKind.BUDGET_WARNING, notice)

    def undelivered(self) -> None:
        """Before the run ends: a warning naming the messages that never reached the
        agent (queued, or taken and never handed to an attempt)."""
        handed = set(self.record.state.delivery.handed) | set(self.record.state.delivery.retired)
        inbox = self.delivery.inbox
        try:
            left = [*inbox.pending(), *(m for m in inbox.taken() if m.id not in handed)]
        except StateFileError:
            return
        if left:
            ids = ", ".join(m.id for m in left[:5]) + (", …" if len(left) > 5 else "")
            self._warn(
                f"{len(left)} message(s) never reached the agent: the run ended first ({ids})"
            )


def _amounts(spend: Spend) -> dict[str, float]:
    return {"cost_usd": spend.cost_usd, "tokens": float(spend.tokens.total)}
