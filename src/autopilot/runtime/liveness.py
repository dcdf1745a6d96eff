"""Is a recorded process alive? The one liveness check, by pid **and** process identity.

``state.json`` records the driver's ``pid``, its start time (``pidStartTime``, epoch
s) and its command line (``pidCommand``), and a detached run's supervisor
(``supervisorPid``, ``supervisorStartTime``). A process with that pid counts as the
recorded one only if it started within a second of the recorded time and runs the
recorded command, so a pid reused after a reboot or by another program is never
taken for it (as rq's ``StartedJobRegistry`` does). Lock files are not consulted
here: an agent can delete a file, not a process. ``control``, ``status``, the
supervisor, ``manage.activity`` and the view all ask here.
"""

from __future__ import annotations

import socket

from autopilot.loop.identity import is_same_process
from autopilot.store.run_state import RunState


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
    if host and host != socket.gethostname():
        return True  # another machine's process cannot be checked from here
    same = is_same_process(pid, start_time, command)
    return True if same is None else same


def driver_alive(state: RunState) -> bool | None:
    """Is the run's driver (its daemon, when detached) alive? See ``process_alive``."""
    return process_alive(state.pid, state.pid_start_time, state.pid_command, state.host)


def supervisor_alive(state: RunState) -> bool | None:
    """Is a detached run's supervisor alive? See ``process_alive``."""
    return process_alive(state.supervisor_pid, state.supervisor_start_time, None, state.host)
