"""Ending a run no driver holds: ``autopilot stop`` of a run whose driver is gone, and
the supervisor finishing a stop its daemon did not reach. Its leftover agent processes
are ended, the interrupted attempt charged and recorded as stopped by the user, and
one ``abort`` (``user_stopped``) written, under the run's ``driver.lock``; its two
records are reconciled first (``reconciled``, which ``control.repair`` uses too).
"""

from __future__ import annotations

from pathlib import Path

from autopilot.core.vocabulary import EventType, RunStatus
from autopilot.errors import StateFileError, UsageError
from autopilot.loop.clock import Clock
from autopilot.store.flock import FileLock
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore, read_state

# The log and liveness are loaded by the functions that end a run, not by ``pause``
# and ``resume``, which need only ``refuse_ended``.
TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from autopilot.store.events import EventLog


def refuse_ended(state: RunState, run_id: str) -> None:
    """Refuse a command for a run that has ended.

    Raises:
        UsageError: the run has ended (its reason named).
    """
    if state.terminated:
        raise UsageError(
            f"run {run_id} has already ended ({state.termination_reason or state.status})"
        )


def reconciled(folder: RunDir, store: StateStore, log: EventLog) -> RunState:
    """``reconcile_terminal``; when ``state.json`` cannot be written (a full disk), the
    run as its log tells it (``store.logged_end``), which is the truth on disk.

    Raises:
        StateFileError: the state cannot be read, or written for a run whose log does
            not say it ended.
    """
    from autopilot.loop.recovery import reconcile_terminal  # only where a run is repaired
    from autopilot.store.logged_end import ended_as_logged, logged_ending

    try:
        return reconcile_terminal(folder, store, log)
    except StateFileError:
        state = read_state(folder.state)
        ending = logged_ending(folder.events, state)
        if ending is None:
            raise
        return ended_as_logged(state, ending)


def end_without_driver(run_dir: Path, store: StateStore, clock: Clock, note: str) -> RunState:
    """End a run nobody drives: its leftover agent processes, then its records."""
    from autopilot.loop.recovery import end_left_processes, settle_open_attempt
    from autopilot.runtime.agents import adapter_for_state
    from autopilot.store.events import EventLog

    folder = RunDir(run_dir)
    log = EventLog(folder.events, run_dir.name, clock.now_ms)
    try:
        state = reconciled(folder, store, log)
        refuse_ended(state, run_dir.name)
        # An interrupted attempt (one state.json opened, or one only the log started)
        # is charged and recorded as stopped by the user; leftover processes are ended.
        try:
            adapter = adapter_for_state(state)
        except UsageError:  # an agent this autopilot cannot parse: its output is not read
            if state.agent_pid is not None:
                raise
            end_left_processes(state)
        else:
            state = settle_open_attempt(folder, store, log, adapter, clock.now_ms(), stop_note=note)
            if state.terminated:  # the attempt's step ended it: the stop is on record
                if state.stop_requested:
                    return state
                return store.update(lambda s: _record_stop(s, note))

        def end(s: RunState) -> None:
            s.terminated, s.termination_reason = True, "user_stopped"
            s.termination_note, s.status = note, RunStatus.STOPPED
            s.stop_requested, s.stop_reason = True, note
            s.iteration_open = False
            s.pid = s.agent_pid = None

        state = store.update(end)
        log.emit(EventType.ABORT, reason="user_stopped", note=note, iteration=state.iteration)
        log.sync()
    finally:
        log.close()
    return state


def _record_stop(state: RunState, note: str) -> None:
    state.stop_requested, state.stop_reason = True, note


def stop_without_driver(run_dir: Path, clock: Clock, note: str) -> RunState | None:
    """End the run at ``run_dir`` if no driver holds it (``end_without_driver``, under
    its ``driver.lock``); None when a driver does: its lock is held, or the recorded
    driver is alive although its lock file is gone.

    Raises:
        UsageError: the run has ended.
        StateFileError: state.json is corrupt or cannot be written.
    """
    from autopilot.runtime.liveness import driver_alive

    store = StateStore(RunDir(run_dir).state)
    lock = FileLock(RunDir(run_dir).driver_lock)
    if not lock.acquire():
        return None
    try:
        if driver_alive(read_state(store.path)):
            return None  # its driver.lock is gone, not its driver
        return end_without_driver(run_dir, store, clock, note)
    finally:
        lock.release()
