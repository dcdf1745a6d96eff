"""A backlog run's work at the iteration boundary: the thin shell over ``core.backlog_step``.

``begin`` (before the agent): read ``tasks.jsonl`` afresh, take in a person's edits,
choose and start the item, mark the run's turn (``store.backlog_turn``), write the
file, and hand back the prompt — or say that
the backlog is done, that a person is needed, or that the file cannot be read (the
run holds, nothing is rewritten). ``end`` (after the agent): claim the agent's
reports and decision file, undo what the agent changed in ``tasks.jsonl``, reopen the
item on a surface violation, run the criteria's checks for ``continue_next``, apply
the decision and write the file. Every change is also an event (``emit``), so the
file can be written again from the run's log.

A lane of a parallel run (``lanes`` given) shares the file with its sibling lanes:
it claims its item under the file's lock (skipping items another live lane holds),
writes back only its own item, and lands a completed item in the run branch
(``Lanes.land``) before it counts; a conflict reopens it with the files named.
``end``'s work is in ``loop.backlog_end``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autopilot.core.backlog_step import (
    Begun,
    backlog_gate,
    plan_iteration,
    reconcile,
)
from autopilot.core.backlog_verify import items_from_log, lowered_note, raise_attempts
from autopilot.core.decisions import (
    DEFAULT_MAX_ITEM_ATTEMPTS,
    answer_item,
    note_answer,
)
from autopilot.core.gate_answer import answer_fallback, answer_targets
from autopilot.core.ready_queue import backlog_problems, open_items
from autopilot.core.workitem_events import (
    backlog_snapshot_fields,
    workitem_recorded_fields,
)
from autopilot.core.workitems import ItemStatus, Verdict, WorkItem
from autopilot.errors import BacklogError
from autopilot.loop.approved import ApprovedRun
from autopilot.loop.backlog_end import Ended, end_item
from autopilot.loop.backlog_marks import MarkBook, Tree
from autopilot.loop.checks import DEFAULT_CHECK_TIMEOUT_SECONDS
from autopilot.loop.claims import Lanes, claim_next, held_elsewhere
from autopilot.store.backlog import Backlog, BacklogFile
from autopilot.store.backlog_turn import clear_turn, mark_turn
from autopilot.store.lane_ledger import LaneLedger

Emit = Callable[..., Any]
"""``emit(event_type, **fields)``: append one event to the run's log."""


@dataclass
class BacklogShell:
    """One run's backlog.

    Args:
        backlog: The project's ``tasks.jsonl``.
        run_id: The run's id.
        run_folder: The run's folder (reports wait in it).
        emit: Appends an event to the run's log.
        log_events: The run's events so far, for writing ``tasks.jsonl`` again after
            a restart found it deleted.
        run_surface: The approved boundary's allowed surfaces (empty: any path).
        check_timeout_seconds: Per check command.
        max_item_attempts: Attempts at one item before it is blocked (0: no limit).
        environ: The environment check commands run with (default ``os.environ``).
        approved: The project's approved run boundary (``loop.approved``).
        lanes: For a lane of a parallel run, its siblings and its landing.
        should_stop: Polled while the checks run: ``stop --now`` (or a second
            Ctrl-C) ends them, and the item stays running, undecided.
        tree: The work tree, whose marks the surface check compares
            (``loop.backlog_marks``); None: each iteration's changed paths alone.
        work_tree: Where the checks run at a boundary (the final evidence gate,
            ``loop.backlog_verify``); None: the run's ``cwd``.
        ledger: For a lane, what the lanes last wrote of each item
            (``store.lane_ledger``): what its agent changed of other items is undone.
        merged_tree: For a lane, the parallel run's worktree, where the lanes' items
            are merged: the final evidence gate runs there (None: a lane skips it).
    """

    backlog: Backlog
    run_id: str
    run_folder: Path
    emit: Emit
    log_events: Callable[[], Iterable[Mapping[str, Any]]] = lambda: ()
    run_surface: Sequence[str] = ()
    check_timeout_seconds: float = DEFAULT_CHECK_TIMEOUT_SECONDS
    max_item_attempts: int = DEFAULT_MAX_ITEM_ATTEMPTS
    environ: Mapping[str, str] | None = None
    approved: ApprovedRun | None = None
    lanes: Lanes | None = None
    should_stop: Callable[[], bool] = lambda: False
    tree: Tree | None = None
    work_tree: Path | None = None
    ledger: LaneLedger | None = None
    merged_tree: Path | None = None
    claimed_at: int = field(default=0, init=False)
    ours: tuple[WorkItem, ...] | None = field(default=None, init=False)
    running: WorkItem | None = field(default=None, init=False)
    unwritten: str | None = field(default=None, init=False)
    _problems_told: tuple[str, ...] = field(default=(), init=False)
    _gate_seen: str | None = field(default=None, init=False)
    _lowered_told: set[tuple[tuple[str, int, int], str]] = field(default_factory=set, init=False)
    marks: MarkBook = field(init=False)

    def __post_init__(self) -> None:
        self.marks = MarkBook(self.run_folder, self.log_events, self.emit)

    def emit_all(self, events: Iterable[Mapping[str, Any]], iteration: int | None) -> None:
        for event in events:
            fields = {k: v for k, v in event.items() if k != "type"}
            if iteration is not None and event["type"] == "workitem_recorded":
                fields["iteration"] = iteration
            self.emit(str(event["type"]), **fields)

    def known_items(self) -> tuple[WorkItem, ...]:
        """What autopilot last knew: its own copy, else the run's log — each item's
        attempt count the highest any line of the log holds (``core.backlog_verify``:
        a lower one appended last is a ``warning``, and never taken)."""
        if self.ours is not None:
            return self.ours
        raised = items_from_log(list(self.log_events()))
        self._tell_lowered(raised.lowered, "the run's log")
        return raised.items

    def _tell_lowered(self, lowered: Iterable[tuple[str, int, int]], where: str) -> None:
        """Warn once per process of each attempt count lower than the run's record."""
        for low in lowered:
            if (low, where) not in self._lowered_told:
                self._lowered_told.add((low, where))
                self.emit("warning", itemId=low[0], note=lowered_note(low, where))

    def at_least_known(self, found: Sequence[WorkItem]) -> tuple[WorkItem, ...]:
        """``found`` (the items of ``tasks.jsonl``) with no attempt count lower than the
        one autopilot knows of the item (``known_items``); a lower one is a warning."""
        floor = {item.id: item.attempt for item in self.known_items()}
        raised = raise_attempts(found, floor)
        self._tell_lowered(raised.lowered, "tasks.jsonl")
        return raised.items

    def _write(self, items: Sequence[WorkItem], item: WorkItem | None = None) -> None:
        """Write ``items`` in place of the file's items of their ids; every other line
        (malformed, a repeated id, an item added meanwhile) is kept as it is. A lane
        writes only its own ``item`` into the file as it is now. The caller holds the
        backlog's lock.

        Raises:
            BacklogError: the file could not be written (or, for a lane, read).
        """
        if self.lanes is not None and item is not None:
            found = self.backlog.read()
            mine = found.append([item]) if found.item(item.id) is None else found.replace_item(item)
            self.backlog.write_locked(mine)
            if self.ledger is not None:
                self.ledger.wrote([item])
            self.ours = tuple(mine.items)
            self.unwritten = None
            return
        try:
            current = self.backlog.read()
        except BacklogError:
            current = BacklogFile((), exists=False)  # not a file we can read: replaced
        self.backlog.write_locked(current.with_items(items))
        self.ours = tuple(items)
        self.unwritten = None

    def write_or_warn(
        self, items: Sequence[WorkItem], iteration: int, item: WorkItem | None = None
    ) -> None:
        """``_write`` at an iteration's end: a file the agent made unwritable (a
        folder in its place) is a warning, not the run's end; the items stand in the
        run's log and the boundary holds until the file can be used. Until a write
        succeeds (``unwritten``), the backlog is never done (``done``) and ``begin``
        writes the file before it concludes anything from it."""
        try:
            self._write(items, item)
        except BacklogError as error:
            self.ours = tuple(items)
            self.unwritten = str(error)
            self.emit(
                "warning",
                iteration=iteration,
                note=f"{error}; the work items' state is in the run's log, and the run holds "
                "until .autopilot/tasks.jsonl can be written",
            )

    def read(self) -> tuple[BacklogFile | None, str | None]:
        try:
            found = self.backlog.read()
        except BacklogError as error:
            return None, str(error)
        held = found.hold()
        if held:
            return found, f"fix .autopilot/tasks.jsonl first: {'; '.join(held[:5])}"
        return found, None

    def problem(self) -> str | None:
        """Why ``tasks.jsonl`` cannot be used as it is now, or None."""
        return self.read()[1]

    def begin(self, iteration: int) -> Begun:
        """Prepare iteration ``iteration`` (see the module docstring).

        Raises:
            BacklogError: the file could not be written.
        """
        if self.lanes is not None:
            return self._claim(iteration)
        # Read, planned and written under the lock: an item another terminal adds
        # meanwhile is never written over.
        with self.backlog.locked():
            return self._begin(iteration)

    def _begin(self, iteration: int) -> Begun:
        found, problem = self.read()
        if problem is not None or found is None:
            return Begun(hold=problem)
        known = self.known_items()
        if self.unwritten is not None and known:
            # The file holds what the run failed to write over, not a person's edit.
            items: Sequence[WorkItem] = known
        elif not found.exists and known:
            reconciled = reconcile(known, None, agent_worked=False)
            for note in reconciled.notes:
                self.emit("warning", iteration=iteration, note=note)
            items = reconciled.items
        else:
            items = self.at_least_known(found.items)
            reconciled = reconcile(known, items, agent_worked=False)
            self.emit_all(reconciled.events, iteration)
        problems = tuple(p.message for p in backlog_problems(items))
        if problems and problems != self._problems_told:
            # Said once per change: the items they hold back never start.
            for problem in problems:
                self.emit("warning", iteration=iteration, note=f"tasks.jsonl: {problem}")
        self._problems_told = problems
        plan = plan_iteration(self.run_id, items, iteration, run_surface=self.run_surface)
        if plan.item is None:
            if (not found.exists and known) or self.unwritten is not None:
                self._write(plan.items)  # never "done" from a view the run could not write
            self.ours = tuple(plan.items)
            return Begun(done=plan.done, question=plan.question)
        # Marked in the same hold of the lock as the copy is taken: a person's change
        # made from now on is refused, not undone at the iteration's end.
        mark_turn(self.run_folder, iteration, plan.item.id)
        self._write(plan.items)
        self.emit_all(plan.events, iteration)
        self.running = plan.item
        return Begun(item=plan.item, prompt=plan.prompt)

    def gate_released(self, question: str) -> bool:
        """While the run waits at gate ``question``: True when it was derived from the
        backlog (``core.backlog_step.backlog_gate``) and ``tasks.jsonl``, changed since
        last asked, now plans something else (an item can start, the backlog is done,
        or another question). Never for an item's question, nor for a lane. Reads the
        file; plans only when its digest changed."""
        if self.lanes is not None or not backlog_gate(question):
            return False
        try:
            found = self.backlog.read()
        except BacklogError:
            return False
        if found.digest == self._gate_seen or not found.exists or found.hold():
            return False
        self._gate_seen = found.digest
        plan = plan_iteration(self.run_id, found.items, 0, run_surface=self.run_surface)
        return plan.question != question

    def take_up_running(self) -> WorkItem | None:
        """Take up the item another process started (a hook run's Stop begins an
        iteration and the next Stop ends it): the running item as autopilot last
        knew it, from the run's log. Returns it (None: no item is running)."""
        running = [item for item in self.known_items() if item.status is ItemStatus.RUNNING]
        self.running = running[0] if running else None
        return self.running

    def _claim(self, iteration: int) -> Begun:
        """A lane's ``begin``: choose and claim an item under the file's lock."""
        assert self.lanes is not None
        problem = self.read()[1]
        if problem is not None:
            return Begun(hold=problem)

        def claimed(item: WorkItem) -> None:
            # Under the lock, as in ``_begin``: a person's change is refused from now
            # on, and a sibling's write to another item is told from the agent's.
            mark_turn(self.run_folder, iteration, item.id)
            if self.ledger is not None:
                self.claimed_at = self.ledger.wrote([item])

        plan = claim_next(
            self.backlog,
            self.run_id,
            iteration,
            self.lanes,
            run_surface=self.run_surface,
            on_claim=claimed,
        )
        self.ours = tuple(plan.items)
        if plan.item is None:
            return Begun(done=plan.done, question=plan.question, wait=plan.wait)
        self.emit_all(plan.events, iteration)
        self.running = plan.item
        return Begun(item=plan.item, prompt=plan.prompt)

    def waiting_on(self) -> tuple[str | None, frozenset[str]]:
        """The file's digest and the items other lanes hold, to notice a change."""
        try:
            found = self.backlog.read()
        except BacklogError:
            return None, frozenset()
        held = held_elsewhere(found.items, self.run_id, self.lanes) if self.lanes else frozenset()
        return found.digest, held

    def end(
        self,
        iteration: int,
        iteration_folder: Path,
        changed_paths: Sequence[str],
        cwd: Path,
        *,
        relaunch: bool = False,
    ) -> Ended | None:
        """Conclude the item of iteration ``iteration``; None if none was running.

        Args:
            iteration: The iteration that just ended.
            iteration_folder: Where the checks' output is saved.
            changed_paths: Paths the iteration changed (relative to the work tree).
            cwd: The work tree (checks run there).
            relaunch: A relaunch concludes the attempt a crash cut short (the
                reports that iteration claimed before the crash were put back to wait:
                ``store.reports.put_back_claimed``).

        Raises:
            BacklogError: the file's lock could not be taken.
        """
        item = self.running
        if item is None:
            return None
        self.running = None
        ended = end_item(self, item, iteration, iteration_folder, changed_paths, cwd, relaunch)
        clear_turn(self.run_folder)  # the file holds the conclusion: a person may change it
        return ended

    def done(self) -> bool:
        """No item is open and every completed item passed its checks — never while
        the last write of ``tasks.jsonl`` failed (``unwritten``)."""
        if self.unwritten is not None:
            return False
        items = self.known_items()
        return not open_items(items) and all(
            i.completion.verdict is Verdict.PASS for i in items if i.status is ItemStatus.COMPLETED
        )

    def open_count(self) -> int:
        """How many items are still open."""
        return len(open_items(self.known_items()))

    def snapshot(self) -> dict[str, Any]:
        """``backlog_snapshot`` fields for the items autopilot knows now."""
        return backlog_snapshot_fields(self.known_items())

    def answer(self, text: str, question: str | None = None) -> list[WorkItem]:
        """Deliver a person's answer to ``question`` (the run's gate) to the blocked
        items it is for (``core.gate_answer.answer_targets``: the item it asked about,
        or at a gate where no item can start every item blocked for its attempts);
        returns them as answered (empty: no item was blocked with a reason)."""
        answered: list[WorkItem] = []

        def change(found: BacklogFile) -> BacklogFile:
            answered.clear()
            targets = answer_targets(found.items, question)
            if targets:
                answered.extend(answer_item(item, text) for item in targets)
            else:  # released as the answer came: it goes to an open item all the same
                fallback = answer_fallback(found.items, question)
                answered.extend(note_answer(item, question, text) for item in fallback)
            if not answered:
                return found
            return found.with_items(answered)

        self.backlog.update(change)
        for item in answered:
            self.emit("workitem_recorded", **workitem_recorded_fields(item))
        return answered
