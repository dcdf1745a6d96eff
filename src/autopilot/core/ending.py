"""How a run ends: its terminal event, status, exit code and the words for it.

The documented exit codes: 0 complete, 1 aborted or failed, 3 a budget reached, 130
stopped; 2 and 4 are the command line's usage and environment errors.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

from autopilot.core.vocabulary import LIMIT_REASONS, EventType, Reason, RunStatus

EXIT_COMPLETE = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_LIMIT = 3
EXIT_ENVIRONMENT = 4
EXIT_INTERRUPTED = 130

_ERROR_REASONS = frozenset(
    {Reason.AGENT_FAILING, Reason.SUPERVISOR_GIVEUP, Reason.DISK_FULL, Reason.IO_ERROR}
)
"""Terminal reasons that leave a run in status ``error`` and read as ``failed``."""

_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


@dataclass(frozen=True)
class RunResult:
    """How a run ended: its terminal event type, reason, note and exit code (a
    dataclass: ``status`` of an ended run reads this module, and loads no msgspec)."""

    run_id: str
    terminal_type: str
    reason: str
    note: str | None
    exit_code: int


def exit_code_for(terminal_type: str, reason: str) -> int:
    """The documented exit code for a terminal event."""
    if terminal_type == EventType.COMPLETE:
        return EXIT_COMPLETE
    if reason == Reason.USER_STOPPED:
        return EXIT_INTERRUPTED
    if reason in LIMIT_REASONS:
        return EXIT_LIMIT
    return EXIT_FAILED


def describe_ending(reason: str | None, *, completed: bool) -> str:
    """How a run ended, in the same words everywhere people read it.

    ``completed (completion_promise)``, ``stopped by the user``, ``budget reached
    (max_cost)``, ``failed (agent_failing)`` or ``aborted (stagnation)``.
    """
    if completed:
        return f"completed ({reason})" if reason else "completed"
    if reason == Reason.USER_STOPPED:
        return "stopped by the user"
    if reason in LIMIT_REASONS:
        return f"budget reached ({reason})"
    if reason in _ERROR_REASONS:
        return f"failed ({reason})"
    return f"aborted ({reason})" if reason else "aborted"


def status_for(terminal_type: str, reason: str) -> RunStatus:
    """The ``state.json`` status a terminal event leaves the run in."""
    if terminal_type == EventType.COMPLETE:
        return RunStatus.COMPLETED
    if reason in _ERROR_REASONS:
        return RunStatus.ERROR
    return RunStatus.STOPPED


def io_reason(error_number: int | None) -> Reason:
    """The terminal reason for a run's files that cannot be written: ``disk_full``
    for a full disk, a quota or a file-size limit (``ENOSPC``, ``EDQUOT``,
    ``EFBIG``), else ``io_error``."""
    return Reason.DISK_FULL if error_number in _DISK_FULL_ERRNOS else Reason.IO_ERROR


def error_ending(error: BaseException, error_number: int | None) -> tuple[Reason, str]:
    """The reason and note of the ``abort`` that ends a run an unexpected ``error``
    broke off: ``disk_full`` or ``io_error`` when the run's files refused a write
    (``error_number``: its errno, None for any other error), else ``internal_error``."""
    if error_number is not None:
        return io_reason(error_number), f"the run's files cannot be written: {error}"
    return Reason.INTERNAL_ERROR, f"internal error: {type(error).__name__}: {error}"
