"""A parallel backlog run (``autopilot run --backlog --parallel N``): armed, its lanes
started, followed, and ended once every lane has.

The parallel run (``mode: "parallel"``) is armed as a worktree run: its branch
``autopilot/<runId>`` is the run branch, and its worktree is where the lanes' items
are merged, one at a time. Each of the N lanes is an ordinary worktree backlog run
(``loop.lanes``) started from the run branch and driven by its own daemon under its own
supervisor, so a crash of one lane is restarted and never loses another's work. The
parallel run's own log gets a ``lane`` event for each lane's start, each item it
takes, and its end; it ends when every lane has: ``complete``/``backlog_done`` when the
backlog is done, else with the lanes' reason. ``autopilot merge RUN`` then brings the
run branch into the user's branch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from autopilot.config import RunConfig
from autopilot.core.ending import RunResult
from autopilot.core.spend import shared
from autopilot.core.structs import replace
from autopilot.core.vocabulary import PARALLEL_MODE, EventType, Reason
from autopilot.errors import AutopilotError, BacklogError
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import Clock
from autopilot.loop.record import RunRecord
from autopilot.runtime.run_result import result_of
from autopilot.store.backlog import Backlog
from autopilot.store.events import EventLog
from autopilot.store.flock import FileLock
from autopilot.store.lanes import LaneOf, LaneView, lane_runs, lane_views
from autopilot.store.paths import run_dir
from autopilot.store.run_state import PromptSource, RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore, read_state, read_state_quietly
from autopilot.workspace.worktrees import RunWorktree, project_home

POLL_SECONDS = 0.5

SETTLE_LOCK = "settle.lock"
"""Held while the parallel run is ended, so the follower and a lane's daemon that
both see the last lane end write one terminal event."""


def arm_parallel(
    root: Path,
    config: RunConfig,
    source: PromptSource,
    cwd: Path,
    clock: Clock,
    *,
    lanes: int,
    extra_args: tuple[str, ...] = (),
    command: tuple[str, ...] = (),
) -> tuple[str, list[str]]:
    """Arm a parallel run and its ``lanes`` lane runs; returns their ids.

    A lane that cannot be armed (its worktree or branch cannot be made, its files
    written) ends what was armed: the parallel run and each lane armed before it get
    one ``abort`` (``internal_error``, the failure in its note), their worktrees and
    their branches (new, with no work) are removed, and the error is raised.

    Raises:
        RepositoryError: ``cwd`` cannot hold a worktree.
        RunsRootError/StateFileError: the files cannot be written.
    """
    parent = arm_run(
        root,
        config,
        source,
        cwd,
        clock,
        extra_args=extra_args,
        command=command,
        mode=PARALLEL_MODE,
        worktree=True,
    )
    store = StateStore(RunDir(run_dir(root, parent)).state)
    state = read_state(store.path)
    place = RunWorktree.from_json(state.extra.get("worktree"))
    assert place is not None
    armed: list[str] = []

    def record(s: RunState) -> None:
        s.extra = {**s.extra, "parallel": {"lanes": list(armed)}}

    number = 0
    try:
        for number in range(1, lanes + 1):
            lane_config = replace(config, label=f"{state.label}-lane{number}")
            armed.append(
                arm_run(
                    root,
                    lane_config,
                    source,
                    cwd,
                    clock,
                    extra_args=extra_args,
                    command=command,
                    mode="backlog",
                    worktree=True,
                    start=place.branch,
                    extra={"lane": LaneOf(parent, number).to_json()},
                )
            )
    except BaseException as error:
        store.update(record)
        why = f"agent {number} of {lanes} could not be armed: {error or type(error).__name__}"
        for lane_id in armed:
            _disarm(root, lane_id, clock, f"not started: {parent}: {why}")
        _disarm(root, parent, clock, f"not started: {why}")
        raise
    store.update(record)
    return parent, armed


def _disarm(root: Path, run_id: str, clock: Clock, note: str) -> None:
    """End a run armed but never started (one ``abort``) and remove its worktree and
    branch; what cannot be done is left for ``doctor`` and ``prune`` (never raises)."""
    from autopilot.workspace.cleanup import clean_up_run
    from autopilot.workspace.run_workspace import RunPlace

    folder = RunDir(run_dir(root, run_id))
    state = read_state_quietly(folder.state)
    if state is None or state.terminated:
        return
    record = RunRecord(StateStore(folder.state), EventLog(folder.events, run_id, clock.now_ms))
    try:
        record.finish(EventType.ABORT, Reason.INTERNAL_ERROR, note)
    except (AutopilotError, OSError):
        pass
    finally:
        record.log.close()
    place = RunPlace(state.cwd, RunWorktree.from_json(state.extra.get("worktree")), None)
    clean_up_run(folder.path, place, branches=True)


def settle(root: Path, parent_id: str, clock: Clock) -> RunResult | None:
    """End the parallel run once every lane has ended (idempotent); None while a lane
    goes on or when it had already ended.

    Its log gets each lane's ``lane`` ``ended`` event, then the terminal event; its
    spend becomes the lanes' together. It completes (``backlog_done``) when the backlog
    is done; otherwise it ends with the reason of the first lane that did not complete.
    """
    folder = RunDir(run_dir(root, parent_id))
    lock = FileLock(folder.path / SETTLE_LOCK, timeout_seconds=10.0)
    if not lock.acquire():
        return None
    try:
        return _settle(root, parent_id, folder, clock)
    finally:
        lock.release()


def _settle(root: Path, parent_id: str, folder: RunDir, clock: Clock) -> RunResult | None:
    state = read_state_quietly(folder.state)
    if state is None or state.terminated:
        return None
    lanes = [read_state_quietly(RunDir(run_dir(root, lane)).state) for lane in lane_runs(state)]
    if any(lane is None or not lane.terminated for lane in lanes):
        return None
    ended = [lane for lane in lanes if lane is not None]
    record = RunRecord(StateStore(folder.state), EventLog(folder.events, parent_id, clock.now_ms))
    try:
        for view in lane_views(root, state):
            record.emit(EventType.LANE, **_lane_fields(view))
        spend = shared(ended[0].spend, [lane.spend for lane in ended[1:]]) if ended else None

        def total(s: RunState) -> None:
            if spend is not None:
                s.spend = spend
                s.iteration = spend.iterations

        record.update(total)
        unfinished = [lane for lane in ended if lane.termination_reason != Reason.BACKLOG_DONE]
        if not unfinished and _backlog_done(root, state):
            return record.finish(EventType.COMPLETE, Reason.BACKLOG_DONE, "every agent is done")
        first = unfinished[0] if unfinished else None
        reason = first.termination_reason if first and first.termination_reason else "user_stopped"
        note = f"{first.run_id}: {first.termination_note or reason}" if first else None
        return record.finish(EventType.ABORT, reason, note)
    finally:
        record.log.close()


def _lane_fields(view: LaneView) -> dict[str, object]:
    return {
        "lane": view.number,
        "laneRun": view.run_id,
        "state": "ended" if view.ended else "item" if view.item else "started",
        "itemId": view.item,
        "iteration": view.iteration,
        "agent": view.agent,
        "reason": view.ended,
    }


def _backlog_done(root: Path, state: RunState) -> bool:
    if state.cwd is None:
        return False
    home = project_home(Path(state.cwd), RunWorktree.from_json(state.extra.get("worktree")))
    try:
        items = Backlog(home, root / ".locks").read().items
    except BacklogError:
        return False
    return bool(items) and not any(item.is_open for item in items)


def follow(
    root: Path,
    parent_id: str,
    clock: Clock,
    *,
    echo: Callable[[str], None],
    stops_asked: Callable[[], int],
    stop_lanes: Callable[[list[str], bool], None],
) -> RunResult:
    """Follow the lanes until every one has ended and the parallel run has too.

    A lane's start and each item it takes are a ``lane`` event in the parallel run's
    log (under the settle lock, so none comes after its terminal event), and every
    change of a lane a line to ``echo``. Once ``stops_asked()`` is 1, ``stop_lanes``
    gets the lanes still going with ``now`` False (stop at the boundary); once it is
    2 or more, again with ``now`` True (end their attempts now); each once.
    """
    folder = RunDir(run_dir(root, parent_id))
    log = EventLog(folder.events, parent_id, clock.now_ms)
    lock = FileLock(folder.path / SETTLE_LOCK, timeout_seconds=10.0)
    seen: dict[str, LaneView] = {}
    stopping = 0  # the stops passed on to the lanes: 1 at the boundary, 2 now
    try:
        while True:
            for view in lane_views(root, read_state(folder.state)):
                before = seen.get(view.run_id)
                if before == view:
                    continue
                seen[view.run_id] = view
                echo(f"autopilot: {view.line()}")
                if view.ended is None and (before is None or before.item != view.item):
                    _log_lane(log, lock, folder, view)
            asked = min(stops_asked(), 2)
            if asked > stopping:
                stopping = asked
                stop_lanes([v.run_id for v in seen.values() if v.ended is None], asked == 2)
            settle(root, parent_id, clock)
            parent = read_state(folder.state)
            if parent.terminated and all(v.ended for v in seen.values()):
                return result_of(parent)
            time.sleep(POLL_SECONDS)
    finally:
        log.close()


def _log_lane(log: EventLog, lock: FileLock, folder: RunDir, view: LaneView) -> None:
    if not lock.acquire():
        return
    try:
        if not read_state(folder.state).terminated:
            log.emit(EventType.LANE, **_lane_fields(view))
    finally:
        lock.release()
