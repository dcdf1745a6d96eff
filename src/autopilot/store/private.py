"""Files and folders only their owner can read: run folders 0700, files 0600.

A run's files hold what an agent printed (its raw output, excerpts of it) and
what the user gave it (the prompt); other users of the machine must not read
them. Every folder and file autopilot creates under the runs root goes through
these helpers, so the modes hold also when something deleted one and autopilot
makes it again, whatever the umask.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: Path, *, exist_ok: bool = False) -> None:
    """Create ``path`` (its parent must exist) with mode 0700.

    Raises:
        FileExistsError: it exists and ``exist_ok`` is False.
        OSError: it cannot be created.
    """
    try:
        path.mkdir(mode=PRIVATE_DIR_MODE)
    except FileExistsError:
        if not exist_ok:
            raise
        return
    # mkdir's mode is masked by the umask: set it exactly.
    with contextlib.suppress(OSError):
        os.chmod(path, PRIVATE_DIR_MODE)


def open_private(path: Path, flags: int) -> int:
    """``os.open`` with mode 0600 for a file it creates (exactly, whatever the umask).

    Raises:
        OSError: it cannot be opened.
    """
    fd = os.open(path, flags | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    if flags & os.O_CREAT:
        with contextlib.suppress(OSError):
            os.fchmod(fd, PRIVATE_FILE_MODE)
    return fd


def create_private(path: Path) -> io.FileIO:
    """Open ``path`` for writing from its start (created or truncated), unbuffered, 0600.

    Raises:
        OSError: it cannot be opened.
    """
    return io.FileIO(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb")


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` as the whole of ``path`` (mode 0600), flushed to the OS.

    Raises:
        OSError: it cannot be written.
    """
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with open(fd, "wb") as handle:
        handle.write(data)
