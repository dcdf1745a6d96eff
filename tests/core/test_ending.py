"""How a run an unexpected error broke off ends: pure."""

from __future__ import annotations

import errno

from autopilot.core.ending import error_ending
from autopilot.core.vocabulary import Reason


def test_an_unexpected_error_ends_the_run_as_a_disk_problem_or_an_internal_error() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    assert error_ending(full, errno.ENOSPC) == (
        Reason.DISK_FULL,
        "the run's files cannot be written: [Errno 28] No space left on device",
    )
    assert error_ending(OSError(errno.EIO, "I/O"), errno.EIO)[0] is Reason.IO_ERROR
    assert error_ending(KeyError("iter"), None) == (
        Reason.INTERNAL_ERROR,
        "internal error: KeyError: 'iter'",
    )
