"""A person's change to a work item, refused while a backlog run's agent works on it
(``autopilot tasks block``/``unblock``/``reopen``/``edit``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autopilot.core.vocabulary import HOOK_MODE
from autopilot.errors import BacklogError
from autopilot.runtime.liveness import driver_running
from autopilot.store.backlog_turn import turn_of
from autopilot.store.hook_registry import load_armings
from autopilot.store.lanes import LaneOf
from autopilot.store.paths import list_run_ids, runs_root
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state_quietly
from autopilot.workspace.worktrees import RunWorktree, project_home


def refuse_during_an_iteration(project: Path) -> None:
    """Refuse to change a work item while a backlog run of ``project`` (its own, a
    ``--worktree`` run's or a parallel run's lanes': they use its ``tasks.jsonl``) is in
    an iteration: at its end the run takes every change to an item made meanwhile for the
    agent's and undoes it (``core.backlog_step.reconcile``), so the change would not
    hold. Between iterations the run takes a person's change in.

    Called under the backlog's lock: the run marks its turn (``store.backlog_turn``)
    under the same lock as it takes its copy of the items, so a change either comes
    before the copy (and is taken in) or sees the mark (and is refused). A driver run
    whose driver died is not waited for (the next driver takes the change in); a hook
    run counts while it is armed (its turn lasts from the Stop that continues the
    session to the next one).

    Raises:
        BacklogError: a backlog run of this project is in an iteration.
    """
    root = runs_root(create=False)
    if not root.is_dir():
        return
    hooked: set[str] | None = None
    for run_id in list_run_ids(root):
        folder = root / run_id
        state = read_state_quietly(RunDir(folder).state)
        if state is None or state.terminated or state.mode not in ("backlog", HOOK_MODE):
            continue
        if state.cwd is None or _home(state.cwd, state.extra) != _resolved(project):
            continue  # a --worktree run and a lane share the user's checkout's file
        turn = turn_of(folder)
        # A hook run's iteration over a prompt has no items: only a marked turn counts.
        if turn is None and (state.mode == HOOK_MODE or not state.iteration_open):
            continue
        if hooked is None:
            hooked = {a.run_id for a in load_armings(root)[0]}
        if run_id in hooked:
            raise BacklogError(
                f"run {run_id} is in iteration {state.iteration} of its session, and a work "
                f"item changed now would be undone at the session's next stop: change it "
                f"once the session has stopped (autopilot pause {run_id} lets it stop there)"
            )
        if driver_running(folder, state) is False:
            continue  # its driver died: the next one takes a person's change in
        number = turn[0] if turn is not None else state.iteration
        lane = LaneOf.from_json(state.extra.get("lane"))
        held = lane.parent if lane is not None else run_id  # pausing it reaches every lane
        raise BacklogError(
            f"run {run_id} is in iteration {number}, and a work item changed now "
            f"would be undone at its end: change it between iterations (autopilot pause "
            f"{held} holds the run at the next one)"
        )


def _home(cwd: str, extra: Mapping[str, Any]) -> Path:
    """Where a run's ``tasks.jsonl`` is (``project_home``), resolved."""
    return _resolved(project_home(Path(cwd), RunWorktree.from_json(extra.get("worktree"))))


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


def runs_waiting_at_a_backlog_gate(project: Path) -> list[str]:
    """The backlog runs of ``project`` (driver runs, not hook runs) waiting at a gate
    autopilot derived from the backlog (``core.backlog_step.backlog_gate``): a change
    that lets an item start releases it, and the run goes on by itself."""
    from autopilot.core.backlog_step import backlog_gate
    from autopilot.core.vocabulary import RunStatus

    root = runs_root(create=False)
    if not root.is_dir():
        return []
    waiting = []
    for run_id in list_run_ids(root):
        state = read_state_quietly(RunDir(root / run_id).state)
        if state is None or state.terminated or state.mode != "backlog" or state.cwd is None:
            continue
        if Path(state.cwd) != project or state.status is not RunStatus.AWAITING_USER:
            continue
        if state.gate is not None and backlog_gate(state.gate):
            waiting.append(run_id)
    return waiting


def a_run_holds_items(project: Path) -> bool:
    """Is a backlog or hook run of ``project`` (its backlog's project: the checkout of
    a ``--worktree`` run) not ended? Without one, an item ``running`` in ``tasks.jsonl``
    was interrupted (``stop --now``, a crash): the next run resumes it
    (``pending-decision: missing``), and a person may reopen or remove it. A run whose
    driver died counts: a relaunch goes on with its item."""
    from autopilot.workspace.worktrees import RunWorktree, project_home

    root = runs_root(create=False)
    if not root.is_dir():
        return False
    for run_id in list_run_ids(root):
        state = read_state_quietly(RunDir(root / run_id).state)
        if state is None or state.terminated or state.mode not in ("backlog", HOOK_MODE):
            continue
        if state.cwd is None:
            continue
        worktree = RunWorktree.from_json(state.extra.get("worktree"))
        if project in (Path(state.cwd), project_home(Path(state.cwd), worktree)):
            return True
    return False
