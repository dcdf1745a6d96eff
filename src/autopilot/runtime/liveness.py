"""Is a recorded process alive? The one liveness check, by pid **and** process identity.

``state.json`` records the driver's ``pid``, its start time (``pidStartTime``, epoch
s) and its command line (``pidCommand``), and a detached run's supervisor
(``supervisorPid``, ``supervisorStartTime``). A process with that pid counts as the
recorded one only if it started within a second of the recorded time and runs the
recorded command, so a pid reused after a reboot or by another program is never
taken for it (as rq's ``StartedJobRegistry`` does). Lock files are not consulted
here: an agent can delete a file, not a process. ``driver_running`` adds the
driver's ``driver.lock`` for a driver that has not recorded itself yet. ``control``,
``status``, ``list``, ``prune``, ``doctor``, the supervisor, ``manage.activity`` and
the view all ask here.
"""

from __future__ import annotations

import errno
import fcntl
import os
from _socket import gethostname  # socket.gethostname itself, without socket's imports

from autopilot.store.run_files import DRIVER_LOCK_FILE

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from autopilot.store.run_state import RunState
    from autopilot.store.state_file import StateView


def process_alive(
    pid: int | None,
    start_time: float | None,
    command: str | None = None,
    host: str | None = None,
) -> bool | None:
    """Is the process recorded as ``pid`` (with its identity) alive?

    Args:
        pid: The recorded pid.
        start_time: Its recorded start time (epoch s), if any.
        command: Its recorded command line, if any.
        host: The host it was recorded on, if any.

    Returns:
        True or False; None when no pid was recorded. A process on another host,
        or a check that cannot answer (permission denied), counts as alive.
    """
    if pid is None or isinstance(pid, bool) or pid <= 0:
        return None
    if host and host != gethostname():
        return True  # another machine's process cannot be checked from here
    try:
        os.kill(pid, 0)  # one system call: no process has the pid at all
    except (ProcessLookupError, OverflowError):  # OverflowError: no pid can be that big
        return False
    except OSError:  # someone else's (EPERM)
        pass
    from autopilot.loop.identity import is_same_process  # only where a pid is recorded

    try:
        same = is_same_process(pid, start_time, command)
    except OverflowError:  # a start time no clock can give (a hand edit): another process
        return False
    return True if same is None else same


def driver_alive(state: RunState | StateView) -> bool | None:
    """Is the run's driver (its daemon, when detached) alive? See ``process_alive``."""
    return process_alive(state.pid, state.pid_start_time, state.pid_command, state.host)


def supervisor_alive(state: RunState | StateView) -> bool | None:
    """Is a detached run's supervisor alive? See ``process_alive``."""
    return process_alive(state.supervisor_pid, state.supervisor_start_time, None, state.host)


def driver_lock_held(run_dir: Path) -> bool | None:
    """Does a driver hold ``<run>/driver.lock``? Probed without creating the file.

    The probe takes the lock for an instant when it is free, as ``autopilot stop``
    does; a driver starting in that instant is refused and can simply be retried.

    Returns:
        True if held, False if free or absent, None if it cannot be probed.
    """
    return _lock_held(os.path.join(run_dir, DRIVER_LOCK_FILE))


def _lock_held(path: str) -> bool | None:
    """``driver_lock_held`` of the lock file at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
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


def lock_holder(run_dir: Path) -> int | None:
    """The pid of the driver holding ``<run>/driver.lock``, as the lock file names it
    (``locks.driver_note``), when the lock is held and that process (pid **and**
    identity) is alive; else None. For a run whose ``state.json`` cannot be read."""
    import json

    if driver_lock_held(run_dir) is not True:
        return None
    try:
        note = json.loads((run_dir / DRIVER_LOCK_FILE).read_text(errors="replace"))
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict):
        return None
    pid, start_time, command = note.get("pid"), note.get("pidStartTime"), note.get("pidCommand")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return None
    start_time = start_time if isinstance(start_time, (int, float)) else None
    command = command if isinstance(command, str) else None
    return pid if process_alive(pid, start_time, command) is True else None


def driver_running(run_dir: Path, state: RunState | StateView | None) -> bool | None:
    """Is a driver running the run (``run_dir``, its ``state``; None: unreadable)?

    The recorded driver process first (pid and identity, ``driver_alive``: no lock
    probe while it is alive, so asking every few seconds never races a driver for
    its lock), then ``driver.lock`` (a driver that has not recorded itself yet).

    Returns:
        True while a driver runs; False when none does; None when that cannot be
        told: the state is unreadable, the run has ended, no driver was recorded, the
        lock cannot be probed, or the driver was recorded on another host and holds
        no lock here.
    """
    if state is None or state.terminated:
        return None
    if state.host and state.host != gethostname():
        return True if driver_lock_held(run_dir) else None
    alive = driver_alive(state)
    if alive:
        return True
    held = driver_lock_held(run_dir)
    if held:
        return True
    if alive is False and held is False:
        return False
    return None


def driver_record(state: RunState) -> list[Any]:
    """The run's driver as ``still_gone`` checks it: pid, start time, command, host."""
    return [state.pid, state.pid_start_time, state.pid_command, state.host]


def still_gone(run_dir: Path | str, driver: list[Any]) -> bool:
    """Is the driver ``driver_record`` gave, found gone then, still gone: no process
    with its pid and identity, and no ``driver.lock`` held (a driver started again
    takes the lock before it writes ``state.json``)? False when the record is not
    one. ``run_dir`` may be a string (``list`` asks for thousands of runs)."""
    if len(driver) != 4:
        return False
    pid, start_time, command, host = driver
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    if not (start_time is None or isinstance(start_time, int | float)):
        return False
    if not (command is None or isinstance(command, str)):
        return False
    if not (host is None or isinstance(host, str)):
        return False
    if process_alive(pid, start_time, command, host) is not False:
        return False
    return _lock_held(f"{run_dir}/{DRIVER_LOCK_FILE}") is False
