"""Control a run from any terminal: pause, resume, stop, status.

Each command is a locked read-modify-write of the run's ``state.json``; the driver
reads the flags at its next boundary (a stop with ``now`` ends the agent within a
second). A stop of a run whose driver is gone ends the run here, with its one
terminal event, so no run is left "running" forever. Pause, resume and stop of a
parallel run reach each of its lanes that has not ended (``store.lanes``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from msgspec import Struct

from autopilot.core.vocabulary import HOOK_MODE, EventType, RunStatus
from autopilot.errors import StateFileError, UsageError
from autopilot.loop.clock import Clock
from autopilot.runtime.ending import reconciled, refuse_ended, stop_without_driver
from autopilot.store.flock import FileLock
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore, read_state

# Loaded where a command needs them (``pause`` and ``resume`` of a run that is not
# parallel need none): the driver's liveness, the log, the lanes, the snapshot.
TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from autopilot.hook.status import HookRunView
    from autopilot.store.snapshot import Snapshot


class ControlResult(Struct, frozen=True):
    """What a control command did: the new state and a line for the user."""

    state: RunState
    message: str


def pause(run_dir: Path, clock: Clock) -> ControlResult:
    """Ask the run to pause at its next boundary (idempotent).

    Raises:
        UsageError: the run has ended.
        StateFileError: state.json is corrupt or cannot be written.
    """
    store = StateStore(RunDir(run_dir).state)

    def change(s: RunState) -> None:
        refuse_ended(s, run_dir.name)
        # ``pausedAt`` is set by the driver when it actually pauses at the boundary,
        # so the rest of a running iteration is not counted as paused time.
        s.paused = True

    state = store.update(change)
    _to_lanes(run_dir, state, lambda lane: pause(lane, clock))
    return ControlResult(
        state, f"{run_dir.name}: pause requested; it takes effect at the next boundary"
    )


def resume(run_dir: Path, clock: Clock) -> ControlResult:
    """Clear a pause, rolling ``totalPausedMs`` forward (idempotent).

    A driver logs ``resume`` when it leaves its pause; a hook run has no driver, so a
    hook run that had paused is resumed here (status ``running``, a ``resume`` event):
    its session's next prompt picks it up.

    Raises:
        UsageError: the run has ended.
        StateFileError: state.json is corrupt or cannot be written.
    """
    folder = RunDir(run_dir)
    store = StateStore(folder.state)
    now = clock.now_ms()
    hook_resumed = False

    def change(s: RunState) -> None:
        nonlocal hook_resumed
        refuse_ended(s, run_dir.name)
        if s.paused:
            if s.paused_at_ms is not None:
                s.total_paused_ms += max(0, now - s.paused_at_ms)
            s.paused = False
            s.paused_at_ms = None
        if s.mode == HOOK_MODE and s.status is RunStatus.PAUSED:
            s.status, hook_resumed = RunStatus.RUNNING, True

    state = store.update(change)
    if hook_resumed:
        from autopilot.store.events import EventLog

        log = EventLog(folder.events, run_dir.name, clock.now_ms)
        try:
            log.emit(EventType.RESUME, note="autopilot resume: the session's next prompt goes on")
        finally:
            log.close()
    _to_lanes(run_dir, state, lambda lane: resume(lane, clock))
    return ControlResult(state, f"{run_dir.name}: resumed")


def stop(
    run_dir: Path, clock: Clock, *, now: bool = False, reason: str = "autopilot stop"
) -> ControlResult:
    """Ask the run to stop at its next boundary, or at once with ``now``.

    If no driver is alive for the run, it is ended here with an ``abort`` event
    (reason ``user_stopped``). Whether a driver is alive is asked of the recorded
    driver process (pid and identity) as well as of ``driver.lock``, so a deleted
    lock file never gets a live driver's agent killed. A hook run (``mode`` ``hook``)
    is ended here too, its open iteration closed through ``conclude``
    (``hook.control``).

    A run whose ``state.json`` cannot be read is stopped through its driver: the
    process holding its ``driver.lock`` (``liveness.lock_holder``) gets SIGTERM (the
    daemon or ``autopilot run`` then stops at the boundary; with ``now``, a second
    one ends the agent at once), and writes the state again from what it holds.

    Raises:
        UsageError: the run has ended.
        StateFileError: state.json is corrupt or cannot be written (a corrupt one of
            a run no driver holds: ``autopilot doctor --repair`` rebuilds it).
    """
    store = StateStore(RunDir(run_dir).state)
    try:
        before = read_state(store.path)
    except StateFileError as unreadable:
        return _stop_through_driver(run_dir, unreadable, now=now)
    going = 0
    if not before.terminated and _lane_runs(before):
        _to_lanes(run_dir, before, lambda lane: stop(lane, clock, now=now, reason=reason))
        going = sum(not s.terminated for s in _lane_states(run_dir, before))

    def request(hook: bool = False) -> ControlResult:
        # A driver runs the run: it reads the flags at its boundary (or at once).
        def change(s: RunState) -> None:
            refuse_ended(s, run_dir.name)
            s.stop_requested = True
            s.stop_reason = reason
            if now:
                s.stop_now = True

        state = store.update(change)
        if hook:
            when = "when the Stop of its session being answered now is done"
        else:
            when = "now" if now else "at the next boundary"
        if going:  # a parallel run ends once its agents have (runtime.parallel.settle)
            return ControlResult(
                state, f"{run_dir.name}: stop requested; its {going} agents stop {when}"
            )
        return ControlResult(state, f"{run_dir.name}: stop requested; the run stops {when}")

    if going:
        return request()
    if read_state(store.path).mode == HOOK_MODE:
        ended = _stop_hook_run(run_dir, clock, reason)
        return ended if ended is not None else request(hook=True)
    state = stop_without_driver(run_dir, clock, reason)
    if state is None:
        return request()  # a driver holds the run (or its driver.lock is gone, not it)
    return ControlResult(state, f"{run_dir.name}: stopped (no driver was running)")


def _stop_through_driver(run_dir: Path, unreadable: StateFileError, *, now: bool) -> ControlResult:
    """Stop a run whose ``state.json`` cannot be read by signalling its live driver.

    Raises:
        StateFileError: no live driver holds the run (``unreadable``, with the way out).
    """
    import os
    import signal
    import time

    from autopilot.runtime.liveness import lock_holder

    pid = lock_holder(run_dir)
    if pid is None:
        raise StateFileError(
            f"{unreadable}; no driver is running {run_dir.name}: `autopilot doctor --repair` "
            "rebuilds its state.json from its event log, then stop it",
            errno=unreadable.errno,
        )
    os.kill(pid, signal.SIGTERM)
    if now:
        time.sleep(0.2)  # two signals, not one coalesced: the second ends the agent now
        os.kill(pid, signal.SIGTERM)
    when = "now" if now else "at the next boundary"
    return ControlResult(
        RunState(run_id=run_dir.name),
        f"{run_dir.name}: its state.json cannot be read; its driver (pid {pid}) was told "
        f"to stop, and stops {when}",
    )


def _stop_hook_run(run_dir: Path, clock: Clock, note: str) -> ControlResult | None:
    """End a hook run now (``hook.control``); None while a Stop of its session is
    being answered (the stop is then requested, and that Stop ends the run)."""
    from autopilot.hook.control import stop_hook_run

    before = read_state(RunDir(run_dir).state)
    refuse_ended(before, run_dir.name)
    state = stop_hook_run(run_dir, clock, note)
    if state is None:
        return None
    closed = f" (iteration {state.iteration} closed)" if before.iteration_open else ""
    return ControlResult(
        state, f"{run_dir.name}: stopped{closed}; its session's next stop is let through"
    )


def _lane_states(run_dir: Path, state: RunState) -> list[RunState]:
    """The readable states of a parallel run's lanes."""
    found = []
    for lane in _lane_runs(state):
        try:
            found.append(read_state(RunDir(run_dir.parent / lane).state))
        except StateFileError:
            continue
    return found


def _lane_runs(state: RunState) -> list[str]:
    """``store.lanes.lane_runs``, loaded only for a parallel run (one whose
    ``state.json`` has ``parallel``, where ``lane_runs`` reads its lanes)."""
    if "parallel" not in state.extra:
        return []
    from autopilot.store.lanes import lane_runs

    return lane_runs(state)


def _to_lanes(run_dir: Path, state: RunState, act: Callable[[Path], object]) -> None:
    """Apply a control command to each lane of a parallel run that has not ended."""
    for lane in _lane_runs(state):
        try:
            act(run_dir.parent / lane)
        except (UsageError, StateFileError):
            continue  # that lane has ended, or its state.json cannot be read


def repair(run_dir: Path, clock: Clock) -> RunState:
    """If no driver is alive for the run, make its state and log agree that it ended
    (a crash between the two writes); returns the state. A driver, if any, does this.
    When ``state.json`` cannot be written, a run whose log says it ended is returned
    ended as the log says.

    Raises:
        StateFileError: the state cannot be read, or cannot be written and the log
            does not say the run ended.
    """
    from autopilot.runtime.liveness import driver_alive
    from autopilot.store.events import EventLog

    folder = RunDir(run_dir)
    store = StateStore(folder.state)
    lock = FileLock(folder.driver_lock)
    if not lock.acquire():
        return read_state(folder.state)
    log = EventLog(folder.events, run_dir.name, clock.now_ms)
    try:
        state = read_state(folder.state)
        if driver_alive(state):
            return state  # its driver.lock is gone, not its driver
        return reconciled(folder, store, log)
    finally:
        log.close()
        lock.release()


class RunStatusReport(Struct, frozen=True):
    """``status``: the state file, the folded log and the driver's liveness (a hook
    run's session instead: ``hook``)."""

    state: RunState
    snapshot: Snapshot
    alive: bool | None
    supervisor: bool | None = None
    pending_messages: int = 0
    hook: HookRunView | None = None
    pending_user_messages: int = 0

    def to_json(self) -> dict[str, Any]:
        """For ``status --json``."""
        return {
            "state": self.state.to_json(),
            "snapshot": self.snapshot.to_dict(),
            "driverAlive": self.alive,
            "supervisorAlive": self.supervisor,
            "pendingMessages": self.pending_messages,
            "pendingUserMessages": self.pending_user_messages,
            "hook": self.hook.to_json() if self.hook is not None else None,
        }


def status(run_dir: Path, clock: Clock | None = None) -> RunStatusReport:
    """Read a run's state (no lock) and fold its log; a terminal event in the log
    wins over a ``state.json`` that still says running when no driver is alive
    (``manage.activity.settled_state``). A hook run no session claimed within its
    claim window is ended first (``hook.control.expire_unclaimed``, without waiting
    for a Stop being answered).

    Raises:
        StateFileError: state.json is unreadable or corrupt.
    """
    from autopilot.core.delivery import MessageSource
    from autopilot.loop.messages import pending_messages
    from autopilot.manage.activity import settled_state
    from autopilot.runtime.liveness import driver_running, supervisor_alive
    from autopilot.store.reader import read_snapshot

    folder = RunDir(run_dir)
    state = settled_state(run_dir, read_state(folder.state))
    if state.mode == HOOK_MODE and not state.terminated:
        from autopilot.hook.control import expire_unclaimed
        from autopilot.loop.clock import SystemClock

        if expire_unclaimed(run_dir.parent, clock or SystemClock(), wait_seconds=0):
            state = settled_state(run_dir, read_state(folder.state))
    snapshot = read_snapshot(folder.events)
    hook = None
    if state.mode == HOOK_MODE:
        from autopilot.hook.status import hook_run_view

        hook = hook_run_view(run_dir)
    pending = pending_messages(run_dir)
    return RunStatusReport(
        state,
        snapshot,
        driver_running(run_dir, state),
        supervisor_alive(state),
        len(pending),
        hook,
        sum(1 for m in pending if m.source is MessageSource.USER),
    )
