"""A hook run's work items, through the driver's own ``loop.backlog.BacklogShell``.

Before an iteration (``begin``): ``tasks.jsonl`` is read afresh, a person's edits are
taken in, the next ready item is marked running and its continuation message
is made — or the backlog is done, needs a person, or cannot be read. After it, at the
session's next Stop (``end``): the reports the agent made with ``autopilot report``
(or a promoted ``.autopilot/consistency-decision.json``) are claimed, what the agent
changed in ``tasks.jsonl`` is undone, an item that changed paths outside its allowed
surface since it started is reopened (``loop.backlog_marks``), a ``continue_next``'s
checks are run by autopilot, and the item's new status is written — the facts
``conclude`` reads, as in a driver run (``loop.backlog_run.with_item_facts``). An item
that goes back to the queue after the run's ``max_item_attempts`` attempts (``arm
--max-item-attempts``, config ``max-item-attempts``, as its ``armed`` event holds it) is
blocked instead, as in a driver run.

Each Stop is a new process, so what autopilot last knew of the items (its copy that
the agent's edits are undone against, and the item the iteration works on) comes
from the run's event log.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopilot.core.attempt import Attempt
from autopilot.core.vocabulary import EventType, RunStatus
from autopilot.core.workitems import ItemStatus
from autopilot.loop.backlog import BacklogShell
from autopilot.loop.backlog_run import backlog_boundary, held_run_limits, with_item_facts
from autopilot.loop.descendants import RUN_ID_ENV
from autopilot.loop.record import RunRecord
from autopilot.store.backlog import Backlog
from autopilot.store.events import read_events
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.workspace import git
from autopilot.workspace.git import TreeMark

Emit = Callable[..., Any]


class HookBacklog:
    """The project's backlog as one hook run works through it.

    Args:
        root: The runs root (the backlog's lock lives in ``<root>/.locks``).
        run_id: The run.
        project: The work tree.
        run_folder: The run's folder (its event log and waiting reports).
        emit: Appends one event: ``emit(EventType, **fields)``.
        state: The run's state (its ``config``).
    """

    def __init__(
        self,
        root: Path,
        run_id: str,
        project: Path,
        run_folder: Path,
        emit: Emit,
        state: RunState,
    ) -> None:
        locks = root / ".locks"
        locks.mkdir(mode=0o700, exist_ok=True)
        self.project = project
        self.run_folder = run_folder
        limits = held_run_limits(RunDir(run_folder).events, run_id, state)
        self.shell = BacklogShell(
            Backlog(project, locks),
            run_id,
            run_folder,
            lambda event_type, **fields: emit(EventType(event_type), **fields),
            log_events=lambda: read_events(RunDir(run_folder).events),
            # The checks carry the run's id: what a Stop cut short left running is
            # found by it (``hook.cut_short``).
            environ={**os.environ, RUN_ID_ENV: run_id},
            check_timeout_seconds=limits.check_timeout_seconds,
            max_item_attempts=limits.max_item_attempts,
            tree=_Tree(project, lambda note: emit(EventType.WARNING, note=note)),
            work_tree=project,
        )

    def boundary(self, record: RunRecord) -> HookBoundary:
        """Before the next iteration: the driver's ``backlog_boundary``, without its
        waits (a Stop cannot wait for a person).

        An answer already given at the gate is taken; a question waiting, or a
        ``tasks.jsonl`` that cannot be used, lets the session stop (``held``).

        Raises:
            BacklogError: the backlog cannot be written.
        """
        gates = _StopGates(record)
        for _ in range(_MAX_PASSES):
            found = backlog_boundary(self.shell, record.refresh(), gates)
            if gates.held is not None:
                return HookBoundary(held=gates.held)
            if found.done is not None:
                return HookBoundary(done=found.done)
            if found.stop is not None:
                return HookBoundary(held=found.stop[1])
            if found.begun is not None and not found.again:
                return HookBoundary(prompt=found.begun.prompt)
        return HookBoundary(held="has no work item that can start")

    def started(self, mark: TreeMark, iteration: int) -> None:
        """Note that the iteration on the item ``boundary`` started begins with the work
        tree at ``mark``, in its marks and the run's log (``loop.backlog_marks.MarkBook``);
        nothing when no item was started.

        Raises:
            OSError: the item's marks cannot be written.
        """
        item = self.shell.running
        if item is not None:
            self.shell.marks.started(item.id, iteration, mark)

    def with_item(self, attempt: Attempt, folder: Path, changed_paths: Sequence[str]) -> Attempt:
        """``attempt`` with what the agent did about the running item (its report,
        autopilot's checks, its edits to ``tasks.jsonl`` undone); unchanged when no
        item is running.

        Raises:
            BacklogError: the backlog cannot be read or written.
        """
        if self.shell.take_up_running() is None:
            return attempt
        folder.mkdir(parents=True, exist_ok=True)
        return with_item_facts(self.shell, attempt, folder, changed_paths, self.project)

    def checks_named(self, most: int = 6) -> str:
        """The check commands of the running and completed items (those a Stop's end
        and the final evidence gate run), as ``a/ac1: `make test`; …``; "" when none."""
        named = [
            f"{item.id}/{c.id}: `{_cut(c.check)}`"
            for item in self.shell.known_items()
            if item.status in (ItemStatus.RUNNING, ItemStatus.COMPLETED)
            for c in item.acceptance_criteria
            if c.check is not None
        ]
        more = f"; and {len(named) - most} more" if len(named) > most else ""
        return "; ".join(named[:most]) + more


def _cut(text: str, most: int = 80) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


_MAX_PASSES = 5
"""Boundary passes per Stop: an answer taken, a question set, an item the final
evidence gate reopened, then the item."""


@dataclass(frozen=True)
class HookBoundary:
    """What the backlog says before the next iteration: exactly one field is set.

    Attributes:
        prompt: The iteration's continuation message.
        done: Every work item is done (the run completes): the note.
        held: The session stops until a person acts: why.
    """

    prompt: str | None = None
    done: str | None = None
    held: str | None = None


class _StopGates:
    """``loop.backlog_run.Gates`` for a Stop: an answer already given is taken, and
    anything to wait for lets the session stop instead (``held``)."""

    def __init__(self, record: RunRecord) -> None:
        self.record = record
        self.held: str | None = None

    def await_answer(self, released: Callable[[], bool] = lambda: False) -> str | None:
        state = self.record.refresh()
        answer = state.gate_answer
        if answer is None and not released():  # released: the gate is cleared, no answer
            self.record.update(lambda s: setattr(s, "status", RunStatus.AWAITING_USER))
            self.held = (
                f"waits for your answer: {state.gate} "
                "(autopilot answer TEXT, then prompt the session again)"
            )
            return None

        taken = [answer]

        def clear(s: RunState) -> None:
            if s.gate_answer is not None:  # an answer that came as the gate was released
                taken[0] = s.gate_answer
            s.gate = s.gate_answer = None
            s.status = RunStatus.RUNNING

        self.record.update(clear)
        return taken[0]

    def hold_until(
        self, why: str, ready: Callable[[], bool], *, status: RunStatus = RunStatus.PAUSED
    ) -> None:
        self.held = f"{why}; then prompt the session again"


class _Tree:
    """``loop.backlog_marks.Tree`` of a hook run's work tree: a git call that failed
    is a ``warn``."""

    def __init__(self, cwd: Path, warn: Callable[[str], None]) -> None:
        self.cwd = cwd
        self.warn = warn

    def mark(self) -> TreeMark:
        observer = git.GitObserver(self.cwd)
        mark = observer.mark()
        self._tell(observer)
        return mark

    def changed_paths(self, before: TreeMark, after: TreeMark) -> list[str] | None:
        observer = git.GitObserver(self.cwd)
        paths = observer.changed_paths(before, after)
        self._tell(observer)
        return paths

    def _tell(self, observer: git.GitObserver) -> None:
        for warning in observer.take_warnings():
            self.warn(warning)
