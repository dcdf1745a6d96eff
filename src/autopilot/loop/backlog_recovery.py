"""A backlog attempt cut short by a crash, concluded with its work item on relaunch.

Before the agent starts, the driver records in the attempt's folder which work item
it is on and where the work tree stood (``workitem.json``, ``record_started``). A
relaunch that finds the attempt open (``recovery.attempt_left``) concludes the item
as the dead driver would have (``concluded_after_crash``): the agent's reports (those
claimed before the crash are put back to wait and claimed again), the surface check
against the saved mark, and autopilot's own run of the criteria's checks for
``continue_next``. An item whose ``workitem_end`` for that iteration is already in
the log, and which ``tasks.jsonl`` no longer has running, was concluded before the
crash: that conclusion stands and is not made twice. A logged end that
``tasks.jsonl`` does not agree with (the item is still running there: an agent can
append to the log) is a ``warning``, and the item is concluded again, its checks
run. An attempt whose item cannot be found concludes none, and so cannot complete
the run (``core.backlog_rule``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopilot.core.attempt import Attempt
from autopilot.core.item_report import ItemDecision
from autopilot.core.workitems import ItemStatus, WorkItem
from autopilot.errors import AutopilotError
from autopilot.loop.backlog import BacklogShell
from autopilot.loop.backlog_end import Ended
from autopilot.loop.backlog_marks import note_started
from autopilot.loop.backlog_run import attempt_with
from autopilot.store.private import write_private
from autopilot.store.reports import put_back_claimed
from autopilot.store.rundir import WORK_ITEM_FILE
from autopilot.workspace.git import TreeMark
from autopilot.workspace.marks import Workspace

_MAX_RECORD_BYTES = 16 * 1024 * 1024
WORK_ITEM_ENV = "AUTOPILOT_WORK_ITEM"
ATTEMPT_ENV = "AUTOPILOT_ATTEMPT"


@dataclass(frozen=True)
class StartedItem:
    """The work item an attempt started on.

    Attributes:
        item_id: The item's id.
        iteration: The iteration's number.
        mark: The work tree just before the agent started (None: not recorded).
        attempt: The item's attempt number (None: not recorded).
    """

    item_id: str
    iteration: int
    mark: TreeMark | None = None
    attempt: int | None = None

    def agent_env(self) -> dict[str, str]:
        """What the agent's environment says of its item: ``AUTOPILOT_WORK_ITEM`` (the
        item's id) and ``AUTOPILOT_ATTEMPT`` (its attempt number, when recorded)."""
        env = {WORK_ITEM_ENV: self.item_id}
        if self.attempt is not None:
            env[ATTEMPT_ENV] = str(self.attempt)
        return env


def record_started(
    folder: Path, item: WorkItem, iteration: int, mark: TreeMark, shell: BacklogShell | None = None
) -> None:
    """Write ``workitem.json`` into the attempt's ``folder`` (before the agent starts),
    and note the iteration's start in the item's marks in the run's folder, the
    attempt folder's parent (``loop.backlog_marks``), and in the run's log through
    ``shell`` (``MarkBook.started``; None: the file alone).

    Raises:
        OSError: they cannot be written.
    """
    data = {
        "itemId": item.id,
        "iteration": iteration,
        "attempt": item.attempt,
        "mark": mark.to_json(),
    }
    write_private(folder / WORK_ITEM_FILE, json.dumps(data).encode("utf-8"))
    if shell is not None:
        shell.marks.started(item.id, iteration, mark)
    else:
        note_started(folder.parent, item.id, mark)


def read_started(folder: Path) -> StartedItem | None:
    """The attempt's ``workitem.json``, or None (absent, torn or not ours)."""
    try:
        with (folder / WORK_ITEM_FILE).open("rb") as handle:
            raw = handle.read(_MAX_RECORD_BYTES + 1)
        data = json.loads(raw) if len(raw) <= _MAX_RECORD_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    item_id, iteration = data.get("itemId"), data.get("iteration")
    if not isinstance(item_id, str) or not isinstance(iteration, int):
        return None
    attempt = data.get("attempt")
    attempt = attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else None
    return StartedItem(item_id, iteration, TreeMark.from_json(data.get("mark")), attempt)


def started_in_log(events: Iterable[Mapping[str, Any]], iteration: int) -> StartedItem | None:
    """The item the log says iteration ``iteration`` started (its last
    ``workitem_start``), for an attempt whose ``workitem.json`` is missing."""
    found: StartedItem | None = None
    for event in events:
        if event.get("type") == "workitem_start" and event.get("iteration") == iteration:
            item_id = event.get("itemId")
            if isinstance(item_id, str):
                found = StartedItem(item_id, iteration)
    return found


def ended_in_log(
    events: Iterable[Mapping[str, Any]], iteration: int, item_id: str
) -> Mapping[str, Any] | None:
    """The ``workitem_end`` of ``item_id`` in iteration ``iteration``, if logged."""
    found: Mapping[str, Any] | None = None
    for event in events:
        if (
            event.get("type") == "workitem_end"
            and event.get("iteration") == iteration
            and event.get("itemId") == item_id
        ):
            found = event
    return found


def concluded_after_crash(
    shell: BacklogShell,
    attempt: Attempt,
    run_folder: Path,
    workspace: Workspace,
    cwd: Path,
) -> Attempt:
    """The attempt a dead driver left, with its work item concluded (see the module
    docstring); unchanged when its item cannot be found, or when a usage limit cut
    it short (the item is resumed, as after any such attempt).

    Args:
        shell: The run's backlog.
        attempt: The attempt as its saved output tells it (``recovery``).
        run_folder: The run's folder (the attempt's folder is in it).
        workspace: The work tree now (its agent has been ended).
        cwd: The work tree (the checks run there).

    Raises:
        BacklogError: ``tasks.jsonl`` could not be written.
    """
    if attempt.usage_limited or not attempt.folder:
        return attempt
    folder = run_folder / attempt.folder
    started = read_started(folder)
    if started is None or started.iteration != attempt.number:
        started = started_in_log(shell.log_events(), attempt.number)
    if started is None:
        shell.emit(
            "warning",
            iteration=attempt.number,
            note="the work item of the attempt a crash cut short is not on record; "
            "it is resumed at the next iteration",
        )
        return attempt
    item = next((i for i in shell.known_items() if i.id == started.item_id), None)
    if item is None:
        return attempt
    logged_end = ended_in_log(shell.log_events(), attempt.number, item.id)
    if logged_end is not None:
        items = _on_file(shell)
        on_file = next((i for i in items or () if i.id == item.id), None)
        if items is None or on_file is None or on_file.status is not ItemStatus.RUNNING:
            return attempt_with(shell, attempt, _ended_before(item, logged_end), folder, cwd)
        shell.emit(
            "warning",
            iteration=attempt.number,
            itemId=item.id,
            note=f"the logged end of work item {item.id} is not the driver's: tasks.jsonl "
            "still has it running; it is concluded again, its checks run",
        )
        # Not the items the log's forged lines rebuild; no attempt count lower than them.
        shell.ours = shell.at_least_known(items)
        item = next(i for i in shell.ours if i.id == item.id)
    if item.status is not ItemStatus.RUNNING:
        return attempt  # a person changed it while no driver ran; taken in at the boundary
    approved = shell.approved
    if approved is not None:
        approved.end()
        shell.run_surface = approved.check().surfaces
    paths: list[str] = []
    if started.mark is not None:
        paths = workspace.changed_paths(started.mark, workspace.mark()) or []
    else:
        shell.emit(
            "warning",
            iteration=attempt.number,
            itemId=item.id,
            note=f"the changes of work item {item.id} before the crash are not on record; "
            "its allowed surface was not checked",
        )
    shell.running = item
    # The reports claimed before the crash wait again, and are claimed with the rest.
    put_back_claimed(run_folder, attempt.number)
    ended = shell.end(attempt.number, folder, paths, cwd, relaunch=True)
    return attempt_with(shell, attempt, ended, folder, cwd)


def _on_file(shell: BacklogShell) -> tuple[WorkItem, ...] | None:
    """The items as ``tasks.jsonl`` holds them now, or None (unreadable)."""
    try:
        return tuple(shell.backlog.read().items)
    except AutopilotError:
        return None


def _ended_before(item: WorkItem, logged: Mapping[str, Any]) -> Ended:
    """The conclusion a dead driver logged for ``item`` (as ``tasks.jsonl`` holds it)."""
    try:
        decision: ItemDecision | None = ItemDecision(str(logged.get("decision")))
    except ValueError:
        decision = None
    question = item.blocked_reason if item.status is ItemStatus.BLOCKED else None
    return Ended(item, decision, question, decision is ItemDecision.STOP)
