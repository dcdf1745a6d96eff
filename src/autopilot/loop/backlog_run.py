"""A backlog run's part of the driver's boundary and of the attempt's facts.

``backlog_boundary`` (before an iteration): wait at a gate for a person's answer,
hold while ``tasks.jsonl`` cannot be read, start the next item — or find the backlog
done, or needing a person (a gate is set). ``with_item_facts`` (after the agent):
end the item (``BacklogShell.end``) and hand ``conclude`` what it did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from autopilot.config import RunConfig
from autopilot.core.attempt import Attempt, BacklogFacts
from autopilot.core.backlog_step import Begun
from autopilot.core.continuation import reopened_notice
from autopilot.core.digest import sha256_hex
from autopilot.core.structs import replace
from autopilot.core.vocabulary import EventType, Progress, RunStatus
from autopilot.core.workitems import ItemStatus
from autopilot.loop.approved import ApprovedRun
from autopilot.loop.armed_limits import held_config, logged_limits, on_disk_limits
from autopilot.loop.backlog import BacklogShell
from autopilot.loop.backlog_end import Ended
from autopilot.loop.backlog_verify import verify_completed
from autopilot.loop.claims import Lanes
from autopilot.store.backlog import Backlog
from autopilot.store.events import read_events
from autopilot.store.lane_ledger import LEDGER_FILE, LaneLedger
from autopilot.store.lanes import LaneOf
from autopilot.store.paths import run_dir
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
from autopilot.workspace.worktrees import RunWorktree, project_home


@dataclass(frozen=True)
class Boundary:
    """What the boundary of a backlog run found.

    Attributes:
        again: Go through the boundary once more (a gate was answered, a hold ended,
            a gate was just set).
        done: The note of a backlog that is done (the run completes), else None.
        stop: ``(reason, note)`` when the approved run boundary is over (the run ends).
        begun: The item started, when the iteration can go on.
    """

    again: bool = False
    done: str | None = None
    begun: Begun | None = None
    stop: tuple[str, str] | None = None


class Gates(Protocol):
    """What the boundary needs of the driver's waits (``loop.waits.Waits``)."""

    record: Any

    def await_answer(self, released: Callable[[], bool] = ...) -> str | None:
        """Wait for an answer at the gate (None: stopped, or ``released()``)."""
        ...

    def hold_until(
        self, why: str, ready: Callable[[], bool], *, status: RunStatus = RunStatus.PAUSED
    ) -> None:
        """Hold (``status``) until ``ready()``."""
        ...


def backlog_boundary(shell: BacklogShell, state: Any, waits: Gates) -> Boundary:
    """Before a backlog iteration: wait at a gate, hold on a broken file, start the
    next item, or find the backlog done or needing a person (a gate is set).

    Args:
        shell: The run's backlog.
        state: The run's ``RunState`` (its ``gate``, ``iteration``).
        waits: The driver's waits (and its record, for the gate's writes).
    """
    record = waits.record
    if state.gate is not None:
        question = state.gate
        answer = waits.await_answer(lambda: shell.gate_released(question))
        if answer is None and record.state.gate is None:  # not stopped: released
            shell.emit(
                "gate",
                state="released",
                question=question,
                note="the gate was released by the backlog change: tasks.jsonl now "
                "lets the run go on",
            )
        if answer is not None:
            items = shell.answer(answer, question)
            shell.emit(
                "gate",
                state="answered",
                answer=answer,
                itemId=items[0].id if items else None,
                itemIds=[item.id for item in items],
            )
        return Boundary(again=True)
    approved = shell.approved
    if approved is not None:
        fence = approved.check()
        if fence.stop is not None:
            return Boundary(stop=fence.stop)
        if fence.hold is not None:
            waits.hold_until(fence.hold, lambda: approved.check().hold is None)
            return Boundary(again=True)
        taken = approved.take()  # the step, before the item: lanes share the file
        if taken.stop is not None:
            return Boundary(stop=taken.stop)
        if taken.hold is not None:
            return Boundary(again=True)
        shell.run_surface = taken.surfaces or fence.surfaces
    begun = shell.begin(state.iteration + (0 if state.iteration_open else 1))
    if begun.item is None and approved is not None:
        approved.give_back()
    if begun.hold is not None:
        waits.hold_until(begun.hold, lambda: shell.problem() is None)
        return Boundary(again=True)
    if begun.wait is not None:
        seen = shell.waiting_on()
        waits.hold_until(begun.wait, lambda: shell.waiting_on() != seen, status=RunStatus.WAITING)
        return Boundary(again=True)
    if begun.done:  # never on the records alone: the completed items' checks run again
        number = state.iteration + (0 if state.iteration_open else 1)
        folder = shell.run_folder / "verified" / f"before-{number:04d}"
        cwd = shell.work_tree if shell.work_tree is not None else Path(state.cwd)
        if verify_completed(shell, number, folder, cwd).passed:
            return Boundary(done="every work item is done and its checks pass")
        return Boundary(again=True)  # the item a failing check reopened starts next
    if begun.question is not None:
        question = begun.question

        def gate(s: Any) -> None:
            s.gate, s.status = question, RunStatus.AWAITING_USER

        record.update(gate)
        shell.emit("gate", state="waiting", question=question)
        return Boundary(again=True)
    return Boundary(begun=begun)


def with_item_facts(
    shell: BacklogShell, attempt: Attempt, folder: Path, changed_paths: Sequence[str], cwd: Path
) -> Attempt:
    """``end`` the attempt's item and add what it did to the attempt's facts."""
    if shell.approved is not None:
        shell.approved.end()
    ended = shell.end(attempt.number, folder, changed_paths, cwd)
    return attempt_with(shell, attempt, ended, folder, cwd)


def attempt_with(
    shell: BacklogShell, attempt: Attempt, ended: Ended | None, folder: Path, cwd: Path
) -> Attempt:
    """``attempt`` with what ``ended`` did to its item as the facts ``conclude`` reads
    (a work item that moved on is progress, whatever the work tree shows); unchanged
    when no item was concluded. When no item is left open, the backlog is done only if
    the final evidence gate passes (``loop.backlog_verify``: the checks of every
    completed item run again in ``cwd``, their output saved in ``folder``)."""
    if ended is None:
        return attempt
    done = shell.done() and verify_completed(shell, attempt.number, folder, cwd).passed
    facts = BacklogFacts(
        item_id=ended.item.id,
        decision=ended.decision.value if ended.decision else None,
        stop=ended.stop,
        question=ended.question,
        done=done,
        open_items=shell.open_count(),
        # Blocked (its attempts spent, say) is the backlog's verdict on the item, and
        # the run moves on to the next one: never the run's stagnation.
        item_closed=not ended.item.is_open
        or ended.question is not None
        or ended.item.status is ItemStatus.BLOCKED,
        reopened_notice=reopened_notice(ended.item),
    )
    if facts.item_closed:
        return replace(attempt, backlog=facts, progress=Progress.MADE)
    return replace(attempt, backlog=facts)


def backlog_shell(
    record: Any,
    root: Path,
    run_id: str,
    environ: Mapping[str, str],
    lanes: Lanes | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    limits: RunConfig | None = None,
) -> BacklogShell | None:
    """The backlog shell of a run armed with ``mode: "backlog"``, else None.

    Its ``tasks.jsonl`` and approved run boundary are the project's
    (``workspace.worktrees.project_home``: the user's checkout for a ``--worktree``
    run); the checks run in the run's own work tree, each for at most the run's
    ``check_timeout_seconds``; an item is blocked after the run's
    ``max_item_attempts`` (both ``held_run_limits``).

    Args:
        record: The driver's ``RunRecord`` (its state and its event writes).
        root: The runs root (the backlog's lock lives in its ``.locks``).
        run_id: The run.
        environ: The environment check commands run with.
        lanes: For a lane of a parallel run, its siblings and run branch.
        should_stop: Polled while checks run (``stop --now`` ends them).
        limits: The run's limits as held (``held_run_limits``, read when None).
    """
    state = record.state
    if state.mode != "backlog" or state.cwd is None:
        return None
    folder = root / run_id
    lane = LaneOf.from_json(state.extra.get("lane"))  # the lanes share one copy
    home = project_home(Path(state.cwd), RunWorktree.from_json(state.extra.get("worktree")))

    def warn(note: str) -> None:
        record.emit(EventType.WARNING, note=note)

    if limits is None:
        limits = held_run_limits(RunDir(folder).events, run_id, state)
    return BacklogShell(
        Backlog(home, root / ".locks"),
        run_id,
        folder,
        lambda event_type, **fields: record.emit(EventType(event_type), **fields),
        log_events=lambda: read_events(RunDir(folder).events),
        environ=environ,
        approved=ApprovedRun(
            home,
            RunDir(root / lane.parent if lane else folder).approved_run,
            warn,
            root / ".locks" / f"approved-{sha256_hex(str(home.resolve()).encode())[:16]}.lock",
        ),
        lanes=lanes,
        should_stop=should_stop,
        work_tree=Path(state.cwd),
        ledger=LaneLedger(run_dir(root, lane.parent) / LEDGER_FILE) if lanes and lane else None,
        merged_tree=_merged_tree(root, lane) if lanes and lane else None,
        check_timeout_seconds=limits.check_timeout_seconds,
        max_item_attempts=limits.max_item_attempts,
    )


def held_run_limits(events: Path, run_id: str, state: RunState) -> RunConfig:
    """The run's config, each limit the stricter of ``state.json``'s and its ``armed``
    event's (``loop.armed_limits``: never ``state.json``'s alone, which an agent can
    write); ``state.json``'s when the log cannot tell them (a driver then ends the
    run, tampered)."""
    return held_config(state, logged_limits(read_events(events), run_id, on_disk_limits(state)))


def _merged_tree(root: Path, lane: LaneOf) -> Path | None:
    """The worktree of a lane's parallel run (where the lanes' items are merged)."""
    parent = read_state_quietly(RunDir(run_dir(root, lane.parent)).state)
    place = RunWorktree.from_json(parent.extra.get("worktree")) if parent else None
    return place.path if place else None
