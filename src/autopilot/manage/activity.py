"""Is a run active? Its state, its driver's lock and its driver's process together.

A run is *ended* once ``state.json`` says ``terminated``. Otherwise it is *active*
while a driver holds its ``driver.lock`` (an ``fcntl`` lock the OS drops when the
holder dies) or while the recorded driver process is alive (pid **and** start
time, ``runtime.liveness.driver_alive``); it is *gone* when neither holds; and *unknown*
when that cannot be told (no readable state, a lock that cannot be probed, no
driver recorded yet, or a driver on another host). ``prune`` never touches an active or unknown run.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from enum import StrEnum
from pathlib import Path

from autopilot.runtime.liveness import driver_alive
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir


class Activity(StrEnum):
    """Whether a run can still change."""

    ENDED = "ended"
    ACTIVE = "active"
    GONE = "gone"
    UNKNOWN = "unknown"


def driver_lock_held(run_dir: Path) -> bool | None:
    """Does a driver hold ``<run>/driver.lock``? Probed without creating the file.

    The probe takes the lock for an instant when it is free, as ``autopilot stop``
    does; a driver starting in that instant is refused and can simply be retried.

    Returns:
        True if held, False if free or absent, None if it cannot be probed.
    """
    try:
        fd = os.open(RunDir(run_dir).driver_lock, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return True
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def _elsewhere(state: RunState) -> bool:
    """The driver was recorded on another host: its pid means nothing here."""
    return bool(state.host) and state.host != socket.gethostname()


def run_activity(run_dir: Path, state: RunState | None) -> Activity:
    """Classify a run from its ``state.json`` (None if unreadable) and its lock.

    Returns:
        ``ENDED``, ``ACTIVE``, ``GONE`` or ``UNKNOWN`` (see the module docstring).
    """
    if state is None:
        return Activity.UNKNOWN
    if state.terminated:
        return Activity.ENDED
    held = driver_lock_held(run_dir)
    if held:
        return Activity.ACTIVE
    if _elsewhere(state):
        return Activity.UNKNOWN
    alive = driver_alive(state)
    if alive:
        return Activity.ACTIVE
    if held is None or alive is None:
        return Activity.UNKNOWN
    return Activity.GONE


def driver_running(run_dir: Path, state: RunState | None) -> bool | None:
    """For the live view: True while a driver runs, False when gone, None if unknown.

    Checks the recorded process first (no lock probe while it is alive), so
    calling this every few seconds never races a driver for its lock.
    """
    if state is None or state.terminated or _elsewhere(state):
        return None
    alive = driver_alive(state)
    if alive:
        return True
    held = driver_lock_held(run_dir)
    if held:
        return True
    if alive is False and held is False:
        return False
    return None
