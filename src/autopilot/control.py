"""Control a run from any terminal: pause, resume, stop, status (seed 000).

Each command is a locked read-modify-write of the run's ``state.json``; the driver
reads the flags at its next boundary (a stop with ``now`` ends the agent within a
second). A stop of a run whose driver is gone ends the run here, with its one
terminal event, so no run is left "running" forever.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock
import psutil

from autopilot.errors import UsageError
from autopilot.loop.clock import Clock
from autopilot.loop.process import end_process_group_of
from autopilot.loop.recovery import charge_interrupted_attempt, reconcile_terminal
from autopilot.store.events import EventLog, EventType, read_events
from autopilot.store.fold import Snapshot, fold
from autopilot.store.private import PRIVATE_FILE_MODE
from autopilot.store.state import RunStatus, StateStore, read_state


@dataclass(frozen=True)
class ControlResult:
    """What a control command did: the new state and a line for the user."""

    state: dict[str, Any]
    message: str


def process_alive(pid: Any, started: Any, host: Any = None) -> bool | None:
    """Is a recorded process alive? Checked by pid **and** start time (its identity),
    so a pid a reboot handed to another program counts as dead (seed 003).

    Args:
        pid: The recorded pid.
        started: Its recorded start time (epoch s), if any.
        host: The host it was recorded on, if any.

    Returns:
        True or False; None when no pid was recorded. A check that cannot answer
        (permission denied, another host) counts as alive.
    """
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    if isinstance(host, str) and host and host != socket.gethostname():
        return True  # another machine's process cannot be checked from here
    try:
        process = psutil.Process(pid)
        if isinstance(started, int | float) and abs(process.create_time() - started) > 1.0:
            return False
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def driver_alive(state: dict[str, Any]) -> bool | None:
    """Is the run's driver (daemon) alive? ``process_alive`` of ``pid``."""
    return process_alive(state.get("pid"), state.get("pidStartTime"), state.get("host"))


def supervisor_alive(state: dict[str, Any]) -> bool | None:
    """Is the run's supervisor alive? ``process_alive`` of ``supervisorPid``."""
    return process_alive(
        state.get("supervisorPid"), state.get("supervisorStartTime"), state.get("host")
    )


def _check_active(state: dict[str, Any], run_id: str) -> None:
    if state.get("terminated"):
        raise UsageError(
            f"run {run_id} has already ended "
            f"({state.get('terminationReason') or state.get('status')})"
        )


def pause(run_dir: Path, clock: Clock) -> ControlResult:
    """Ask the run to pause at its next boundary (idempotent).

    Raises:
        UsageError: the run has ended.
        StateFileError: state.json is corrupt or cannot be written.
    """
    store = StateStore(run_dir / "state.json")

    def change(s: dict[str, Any]) -> None:
        _check_active(s, run_dir.name)
        # ``pausedAt`` is set by the driver when it actually pauses at the boundary,
        # so the rest of a running iteration is not counted as paused time.
        s["paused"] = True

    state = store.update(change)
    return ControlResult(
        state, f"{run_dir.name}: pause requested; it takes effect at the next boundary"
    )


def resume(run_dir: Path, clock: Clock) -> ControlResult:
    """Clear a pause, rolling ``totalPausedMs`` forward (idempotent).

    Raises:
        UsageError: the run has ended.
        StateFileError: state.json is corrupt or cannot be written.
    """
    store = StateStore(run_dir / "state.json")
    now = clock.now_ms()

    def change(s: dict[str, Any]) -> None:
        _check_active(s, run_dir.name)
        if s.get("paused"):
            paused_at = s.get("pausedAt")
            if isinstance(paused_at, int):
                s["totalPausedMs"] = int(s.get("totalPausedMs") or 0) + max(0, now - paused_at)
            s["paused"] = False
            s["pausedAt"] = None

    state = store.update(change)
    return ControlResult(state, f"{run_dir.name}: resumed")


def stop(
    run_dir: Path, clock: Clock, *, now: bool = False, reason: str = "autopilot stop"
) -> ControlResult:
    """Ask the run to stop at its next boundary, or at once with ``now``.

    If no driver is alive for the run, it is ended here with an ``abort`` event
    (reason ``user_stopped``). Whether a driver is alive is asked of the recorded
    driver process (pid and start time) as well as of ``driver.lock``, so a deleted
    lock file never gets a live driver's agent killed.

    Raises:
        UsageError: the run has ended.
        StateFileError: state.json is corrupt or cannot be written.
    """
    store = StateStore(run_dir / "state.json")

    def request() -> ControlResult:
        # A driver runs the run: it reads the flags at its boundary (or at once).
        def change(s: dict[str, Any]) -> None:
            _check_active(s, run_dir.name)
            s["stopRequested"] = True
            s["stopReason"] = reason
            if now:
                s["stopNow"] = True

        state = store.update(change)
        when = "now" if now else "at the next boundary"
        return ControlResult(state, f"{run_dir.name}: stop requested; the run stops {when}")

    lock = filelock.UnixFileLock(str(run_dir / "driver.lock"), timeout=0, mode=PRIVATE_FILE_MODE)
    try:
        lock.acquire()
    except filelock.Timeout:
        return request()
    try:
        if driver_alive(read_state(run_dir / "state.json")):
            return request()  # its driver.lock is gone, not its driver
        state = _end_without_driver(run_dir, store, clock, reason)
    finally:
        lock.release()
    return ControlResult(state, f"{run_dir.name}: stopped (no driver was running)")


def adapter_of(state: dict[str, Any]) -> Any:
    """The adapter a run was armed with (for re-reading its saved output)."""
    from autopilot.agents.registry import make_adapter
    from autopilot.config import RunConfig

    config = RunConfig.from_json(state.get("config") or {})
    return make_adapter(
        config.agent,
        command=tuple(state.get("command") or ()) or ("true",),
        prompt_via=config.prompt_via,
    )


def repair(run_dir: Path, clock: Clock) -> dict[str, Any]:
    """If no driver is alive for the run, make its state and log agree that it ended
    (a crash between the two writes); returns the state. A driver, if any, does this."""
    store = StateStore(run_dir / "state.json")
    lock = filelock.UnixFileLock(str(run_dir / "driver.lock"), timeout=0, mode=PRIVATE_FILE_MODE)
    try:
        lock.acquire()
    except filelock.Timeout:
        return read_state(run_dir / "state.json")
    log = EventLog(run_dir / "events.jsonl", run_dir.name, clock.now_ms)
    try:
        state = read_state(run_dir / "state.json")
        if driver_alive(state):
            return state  # its driver.lock is gone, not its driver
        return reconcile_terminal(run_dir, store, log)
    finally:
        log.close()
        lock.release()


def _end_without_driver(
    run_dir: Path, store: StateStore, clock: Clock, note: str
) -> dict[str, Any]:
    """End a run nobody drives: its leftover agent processes, then its records."""
    log = EventLog(run_dir / "events.jsonl", run_dir.name, clock.now_ms)
    try:
        state = reconcile_terminal(run_dir, store, log)
        _check_active(state, run_dir.name)
        leftover = state.get("agentPid")
        if isinstance(leftover, int):
            end_process_group_of(leftover, state.get("agentStartTime"), run_dir.name)
            charge_interrupted_attempt(store, log, adapter_of(state), state)
        state = store.update(
            lambda s: s.update(
                terminated=True,
                terminationReason="user_stopped",
                terminationNote=note,
                status=RunStatus.STOPPED,
                stopRequested=True,
                stopReason=note,
                iterationOpen=False,
                pid=None,
                agentPid=None,
            )
        )
        log.emit(EventType.ABORT, reason="user_stopped", note=note, iteration=state.get("iter"))
        log.sync()
    finally:
        log.close()
    return state


@dataclass(frozen=True)
class RunStatusReport:
    """``status``: the state file, the folded log and the driver's liveness."""

    state: dict[str, Any]
    snapshot: Snapshot
    alive: bool | None
    supervisor: bool | None = None
    pending_messages: int = 0

    def to_json(self) -> dict[str, Any]:
        """For ``status --json``."""
        return {
            "state": self.state,
            "snapshot": self.snapshot.to_dict(),
            "driverAlive": self.alive,
            "supervisorAlive": self.supervisor,
            "pendingMessages": self.pending_messages,
        }


def status(run_dir: Path) -> RunStatusReport:
    """Read a run's state (no lock) and fold its log.

    Raises:
        StateFileError: state.json is unreadable or corrupt.
    """
    from autopilot.runtime.messages import pending_messages

    state = read_state(run_dir / "state.json")
    snapshot = fold(read_events(run_dir / "events.jsonl"))
    return RunStatusReport(
        state,
        snapshot,
        driver_alive(state),
        supervisor_alive(state),
        len(pending_messages(run_dir)),
    )
