"""A process's identity: its start time and command line, read with psutil.

A pid alone does not name a process for long: after an exit (or a reboot) the
kernel gives the same number to another. A pid together with the start time and
the command line recorded beside it does.
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

_START_TIME_TOLERANCE_SECONDS = 1.0
_MAX_COMMAND_CHARS = 500


@dataclass(frozen=True)
class ProcessIdentity:
    """What tells one process from another that later gets the same pid.

    Attributes:
        start_time: When it started (epoch s).
        command: Its command line, space-joined and cut to 500 characters (None if
            it cannot be read).
    """

    start_time: float
    command: str | None


def process_identity(pid: int) -> ProcessIdentity | None:
    """The identity of process ``pid``, or None if there is no such process."""
    try:
        process = psutil.Process(pid)
        started = float(process.create_time())
    except psutil.Error:
        return None
    try:
        command: str | None = " ".join(process.cmdline())[:_MAX_COMMAND_CHARS] or None
    except psutil.Error:
        command = None
    return ProcessIdentity(started, command)


def process_start_time(pid: int) -> float | None:
    """A process's start time (epoch s), or None if it is gone."""
    identity = process_identity(pid)
    return identity.start_time if identity is not None else None


def is_same_process(pid: int, start_time: float | None, command: str | None) -> bool | None:
    """Does ``pid`` still name the process recorded with ``start_time`` and ``command``?

    Returns:
        True or False; None when it cannot be told (permission denied). A recorded
        value that is None is not compared.
    """
    try:
        process = psutil.Process(pid)
        if start_time is not None and (
            abs(process.create_time() - start_time) > _START_TIME_TOLERANCE_SECONDS
        ):
            return False
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        if command is not None:
            try:
                current = " ".join(process.cmdline())[:_MAX_COMMAND_CHARS]
            except psutil.AccessDenied:
                return None
            if current and current != command:
                return False
        return True
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return None
