"""A process's identity: its start time and command line, read from ``/proc`` on
Linux (psutil elsewhere).

A pid alone does not name a process for long: after an exit (or a reboot) the
kernel gives the same number to another. A pid together with the start time and
the command line recorded beside it does.

On Linux both come from ``/proc`` (``man 5 proc``): ``/proc/<pid>/stat`` field 3 is
the state and field 22 the start time in clock ticks after boot, ``/proc/stat``'s
``btime`` the boot time in epoch seconds, and ``/proc/<pid>/cmdline`` the arguments
separated by NULs. These are psutil's own sources with psutil's arithmetic
(``Process.create_time``, ``Process.cmdline``), so a start time or command recorded
by either reads the same; reading three small files costs far less than importing
psutil, which ``status``, ``list`` and the control commands would otherwise load for
this alone.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections import namedtuple

_START_TIME_TOLERANCE_SECONDS = 1.0
_MAX_COMMAND_CHARS = 500


class ProcessIdentity(namedtuple("ProcessIdentity", ["start_time", "command"])):
    """What tells one process from another that later gets the same pid (a named
    tuple, not a typed record: ``status`` and ``send`` ask it without msgspec).

    Attributes:
        start_time: When it started (epoch s, a float).
        command: Its command line, space-joined and cut to 500 characters (None if
            it cannot be read).
    """

    __slots__ = ()


class _AccessDenied(Exception):
    """The process exists but this user may not look at it."""


_Seen = namedtuple("_Seen", ["start_time", "zombie"])
"""A process's start time (epoch s) and whether it is a zombie."""


def process_identity(pid: int) -> ProcessIdentity | None:
    """The identity of process ``pid``, or None if there is no such process."""
    try:
        seen = _seen(pid)
    except _AccessDenied:
        return None
    if seen is None:
        return None
    try:
        command = _command(pid)
    except _AccessDenied:
        command = None
    return ProcessIdentity(seen.start_time, (command or "")[:_MAX_COMMAND_CHARS] or None)


def process_start_time(pid: int) -> float | None:
    """A process's start time (epoch s), or None if it is gone or cannot be looked
    at. Only its ``stat`` is read, not its command line (an agent just started may
    be in the middle of its ``exec``)."""
    try:
        seen = _seen(pid)
    except _AccessDenied:
        return None
    return seen.start_time if seen is not None else None


def start_time_now() -> float | None:
    """The start time (epoch s, as ``process_start_time`` reads it) of a process this
    one started a moment ago: the boot clock read now, to the clock tick, which the
    kernel's own record (the boot clock at the fork, in ticks) is at most a tick or
    two before, well within the tolerance of ``is_same_process``. Read instead of
    ``/proc/<pid>/stat``, which waits while the new process maps its program (up to
    about a millisecond). None where the boot clock is not the kernel's record's
    (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    ticks = _ticks_per_second()
    try:
        boot = _boot_seconds()
    except (OSError, _AccessDenied):
        return None
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * ticks) / ticks + boot


def is_same_process(pid: int, start_time: float | None, command: str | None) -> bool | None:
    """Does ``pid`` still name the process recorded with ``start_time`` and ``command``?

    Returns:
        True or False; None when it cannot be told (permission denied). A recorded
        value that is None is not compared.
    """
    try:
        seen = _seen(pid)
        if seen is None:
            return False
        if start_time is not None and (
            abs(seen.start_time - start_time) > _START_TIME_TOLERANCE_SECONDS
        ):
            return False
        if seen.zombie:
            return False
        if command is not None:
            current = _command(pid)
            if current is None:
                return False  # it ended meanwhile
            current = current[:_MAX_COMMAND_CHARS]
            if current and current != command:
                return False
        return True
    except _AccessDenied:
        return None


def parent_pid(pid: int) -> int | None:
    """The parent of process ``pid`` (``/proc/<pid>/stat`` field 4, psutil elsewhere),
    or None when it is gone, cannot be looked at, or has none (pid 0)."""
    if pid <= 0:
        return None
    if not sys.platform.startswith("linux"):
        return _parent_by_psutil(pid)
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        parent = int(data[data.rfind(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return parent if parent > 0 else None


def _seen(pid: int) -> _Seen | None:
    """Start time and zombie state of ``pid``; None if there is no such process.

    Raises:
        _AccessDenied: it exists, but cannot be looked at.
    """
    if pid <= 0:
        return None
    if not sys.platform.startswith("linux"):
        return _seen_by_psutil(pid)
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return _hidden(pid)
    except PermissionError:
        raise _AccessDenied(pid) from None
    # The name, in parentheses, may itself hold spaces and parentheses.
    fields = data[data.rfind(b")") + 2 :].split()
    ticks = int(fields[19])
    return _Seen(ticks / _ticks_per_second() + _boot_seconds(), zombie=fields[0] == b"Z")


def _command(pid: int) -> str | None:
    """``" ".join(psutil.Process(pid).cmdline())``; None if the process is gone.

    Raises:
        _AccessDenied: it cannot be read.
    """
    if not sys.platform.startswith("linux"):
        return _command_by_psutil(pid)
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            data = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except PermissionError:
        raise _AccessDenied(pid) from None
    text = data.decode(sys.getfilesystemencoding(), "surrogateescape")
    # psutil: NUL-separated, or space-separated by a process that rewrote its title.
    separator = "\0" if text.endswith("\0") else " "
    if text.endswith(separator):
        text = text[:-1]
    return text.replace("\0", " ")


def _hidden(pid: int) -> _Seen | None:
    """No ``/proc`` entry: gone, or hidden from this user (``hidepid``)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        raise _AccessDenied(pid) from None
    raise _AccessDenied(pid)


@functools.cache
def _ticks_per_second() -> int:
    return os.sysconf("SC_CLK_TCK")


@functools.cache
def _boot_seconds() -> float:
    with open("/proc/stat", "rb") as handle:
        for line in handle:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise _AccessDenied("no btime in /proc/stat")


def _seen_by_psutil(pid: int) -> _Seen | None:
    import psutil

    try:
        process = psutil.Process(pid)
        with process.oneshot():
            return _Seen(float(process.create_time()), process.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:
        raise _AccessDenied(pid) from None


def _command_by_psutil(pid: int) -> str | None:
    import psutil

    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:
        raise _AccessDenied(pid) from None


def _parent_by_psutil(pid: int) -> int | None:
    import psutil

    try:
        parent = psutil.Process(pid).ppid()
    except psutil.Error:
        return None
    return parent if parent > 0 else None
