"""Launching a run in the background (``run --detach``, ``start``, ``send``,
``relaunch``): one launch at a time per work tree, and the truth about how it went.

A launch holds the work tree's ``LaunchLock`` from the check that nothing else drives
it until the daemon it started has attached (holds the run and the project), so of
several launches at once exactly one starts a daemon and the others are refused (exit
4). It then says success only once the daemon is attached; a run that ended at once (a
full disk) is reported with its ending and exit code, a supervisor that left without a
daemon with the daemon's own error line.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path

from autopilot.cli.echo import say
from autopilot.errors import EnvironmentProblem, RunLockedError, StateFileError
from autopilot.runtime.liveness import driver_alive, process_alive, supervisor_alive
from autopilot.runtime.locks import LaunchLock, ProjectLock
from autopilot.runtime.run_result import ending_line, result_of
from autopilot.store.logged_end import ended_as_logged, logged_ending
from autopilot.store.paths import run_dir
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state, read_state_quietly

DAEMON_WAIT_SECONDS = 15.0
"""How long a launch waits for its daemon to attach before it returns anyway."""


@dataclass(frozen=True)
class Attached:
    """What became of a launch: the daemon's pid once attached (None: not yet), or the
    run's ending (it ended at once), or the supervisor left with neither."""

    daemon_pid: int | None = None
    ended: RunState | None = None
    supervisor_gone: bool = False


def launch_detached(
    root: Path, run_id: str, *, adopt: int | None = None, launch_lock: LaunchLock | None = None
) -> int:
    """Start ``run_id``'s supervisor (which starts its daemon, or adopts ``adopt``),
    wait for the daemon to attach and say how to follow it; returns the exit code.

    Args:
        root: The runs root.
        run_id: A run that has not ended.
        adopt: A live daemon whose supervisor died, to supervise.
        launch_lock: The work tree's launch lock, when the caller holds it already
            (``run --detach`` takes it before it arms the run); it is left held.

    Raises:
        RunLockedError: the run is already running, another run drives its work tree,
            or another command is launching one there (``ProjectBusyError``).
        StateFileError: the disk holding the run folder is full.
        EnvironmentProblem: the supervisor, or its daemon, could not start the run.
    """
    from autopilot.runtime.detach import spawn_supervisor

    folder = RunDir(run_dir(root, run_id))
    lock = launch_lock or LaunchLock(root, Path(read_state(folder.state).cwd or "."))
    if launch_lock is None:
        lock.acquire()
    try:
        _check_not_driven(root, run_id, read_state(folder.state), adopt=adopt)
        _check_disk(folder)
        logs_before = {name: _size(folder.path / name) for name in _LOGS}
        supervisor = spawn_supervisor(root, run_id, adopt=adopt)
        attached = Attached(adopt) if adopt is not None else _wait_for_daemon(folder, supervisor)
    finally:
        if launch_lock is None:
            lock.release()
    if attached.ended is not None:
        result = result_of(attached.ended)
        say(ending_line(result))
        return result.exit_code
    if attached.supervisor_gone:
        raise EnvironmentProblem(_why_not_started(folder, run_id, logs_before))
    shown = f"daemon pid {attached.daemon_pid}, " if attached.daemon_pid else ""
    say(f"autopilot: run {run_id} goes on in the background ({shown}supervisor pid {supervisor})")
    say(f"autopilot: watch it:    autopilot watch {run_id}")
    say(f"autopilot: message it:  autopilot send {run_id} TEXT")
    say(f"autopilot: stop it:     autopilot stop {run_id}")
    return 0


def _check_not_driven(root: Path, run_id: str, state: RunState, *, adopt: int | None) -> None:
    """Refuse a launch that would double a daemon or a supervisor, or put a second run
    in a work tree another run drives. Called under the launch lock.

    Raises:
        RunLockedError: the run is driven or supervised already.
        ProjectBusyError: another run drives its work tree.
    """
    daemon = driver_alive(state) is not False and state.pid is not None
    supervised = supervisor_alive(state) is not False and state.supervisor_pid is not None
    if supervised or (daemon and adopt is None):
        raise RunLockedError(
            f"run {run_id} is already running (daemon pid {state.pid}, supervisor pid "
            f"{state.supervisor_pid}); nothing was started"
        )
    if adopt is not None or state.cwd is None:
        return  # the adopted daemon holds the project lock itself
    project = ProjectLock.of_run(root, state)
    project.acquire(run_id=run_id)  # a foreground run, or another run's daemon
    project.release()


def _disk_full(folder: RunDir) -> bool:
    """Is the disk holding the run folder full (no block left for this user)?"""
    try:
        stats = os.statvfs(folder.path)
    except OSError:
        return False
    return (stats.f_bfree if os.geteuid() == 0 else stats.f_bavail) == 0


def _check_disk(folder: RunDir) -> None:
    """Refuse to launch a run whose disk is full: its supervisor could not record
    itself and would end the run (``disk_full``) instead of driving it.

    Raises:
        StateFileError: the disk holding the run folder is full.
    """
    if _disk_full(folder):
        raise StateFileError(
            f"run {folder.run_id} was not started: the disk holding {folder.path} is full "
            "(No space left on device); free some space and start it again",
            errno=errno.ENOSPC,
        )


def _wait_for_daemon(folder: RunDir, supervisor: int) -> Attached:
    """Wait until the daemon has attached to the run, the run has ended, or the
    supervisor has left without a daemon (at most ``DAEMON_WAIT_SECONDS``)."""
    deadline = time.monotonic() + DAEMON_WAIT_SECONDS
    while True:
        state = read_state_quietly(folder.state)
        if state is not None:
            ending = None if state.terminated else logged_ending(folder.events, state)
            if state.terminated or ending is not None:
                return Attached(ended=state if ending is None else ended_as_logged(state, ending))
            if driver_alive(state):
                return Attached(state.pid)
        if not process_alive(supervisor, None):
            # The run's files are read once more: the supervisor may have ended it last.
            state = read_state_quietly(folder.state)
            ending = None if state is None else logged_ending(folder.events, state)
            if state is not None and ending is not None:
                return Attached(ended=ended_as_logged(state, ending))
            return Attached(supervisor_gone=True)
        if time.monotonic() >= deadline:
            return Attached()
        time.sleep(0.1)


_LOGS = ("daemon.err", "supervisor.log")
"""The files a daemon or supervisor that cannot start writes its one line to."""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _why_not_started(folder: RunDir, run_id: str, logs_before: dict[str, int]) -> str:
    """One line on why a supervisor left without a daemon: a full disk, what the daemon
    or supervisor wrote since the launch, or where to look."""
    if _disk_full(folder):
        return (
            f"run {run_id} was not started: the disk holding {folder.path} is full "
            "(No space left on device); free some space and start it again"
        )
    for name in _LOGS:
        line = _last_line(folder.path / name, logs_before.get(name, 0))
        if line:
            said = line.removeprefix("autopilot: ").removeprefix("supervisor: ")
            return f"run {run_id} was not started: {said.removeprefix('error: ')}"
    return f"run {run_id} was not started: its supervisor left (see {folder.path})"


def _last_line(path: Path, start: int) -> str | None:
    """The last line written to ``path`` after its first ``start`` bytes."""
    try:
        with path.open("rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            stream.seek(max(start, size - 4096))
            lines = stream.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return None
    return lines[-1].strip() if lines else None
