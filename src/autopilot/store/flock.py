"""Exclusive ``fcntl`` locks on lock files, released by the OS when their holder dies.

A lock is an exclusive ``flock`` on a file of its own. The file is created 0600 and
never removed, so every waiter locks the same inode. Each acquisition opens the file
anew, and ``flock`` locks belong to an open file, so two holders in one process
exclude each other just as two processes do. A crash (even ``kill -9``) closes the
file and so releases the lock: no run or project is ever left locked.

This is the whole of what autopilot needs from a lock library: an acquisition costs
an ``open`` and a ``flock``, and importing it costs nothing beyond ``fcntl``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from autopilot.errors import StateFileError
from autopilot.store.private import PRIVATE_FILE_MODE

POLL_SECONDS = 0.05
"""How often a waiting acquisition tries again."""

_BUSY = frozenset({errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK})


class FileLock:
    """An exclusive lock on ``path`` (not reentrant).

    Args:
        path: The lock file; created (0600) if missing. Its folder must exist.
        timeout_seconds: How long ``acquire`` waits for another holder; 0 tries once.
    """

    def __init__(self, path: Path | str, *, timeout_seconds: float = 0.0) -> None:
        self.path = Path(path)
        self.timeout_seconds = timeout_seconds
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> bool:
        """Take the lock, waiting up to ``timeout_seconds`` for another holder.

        Returns:
            True once it is held; False if another holder kept it all that time.

        Raises:
            RuntimeError: this object already holds it.
            OSError: the lock file cannot be opened or locked.
        """
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this lock")
        deadline = time.monotonic() + self.timeout_seconds
        while True:
            fd = _open_lock_file(self.path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as error:
                os.close(fd)
                if error.errno not in _BUSY:
                    raise
            else:
                if os.fstat(fd).st_nlink > 0:
                    self._fd = fd
                    return True
                # Someone deleted the file after we opened it: lock the new one.
                os.close(fd)
                continue
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))

    def write_note(self, text: str) -> None:
        """Make ``text`` the lock file's content while it is held (who holds it, for
        a reader that cannot ask elsewhere); a disk that refuses the write leaves the
        file as it was.

        Raises:
            RuntimeError: this object does not hold the lock.
        """
        if self._fd is None:
            raise RuntimeError(f"{self.path} is not held by this lock")
        with contextlib.suppress(OSError):
            data = text.encode()
            os.pwrite(self._fd, data, 0)
            os.ftruncate(self._fd, len(data))

    def release(self) -> None:
        """Release the lock (nothing happens if it is not held)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the file releases its flock


@contextlib.contextmanager
def holding(path: Path, *, timeout_seconds: float, what: Path) -> Iterator[None]:
    """Hold the lock on ``path`` for a ``with`` block, with a lock of its own for
    each acquisition (threads sharing one object exclude each other as processes do).

    Args:
        path: The lock file.
        timeout_seconds: How long to wait for another holder.
        what: What the lock guards, for the message.

    Raises:
        StateFileError: the lock cannot be taken, or stayed taken all that time.
    """
    lock = FileLock(path, timeout_seconds=timeout_seconds)
    try:
        taken = lock.acquire()
    except OSError as error:
        raise StateFileError(
            f"cannot lock {what}: {error.strerror or error}", errno=error.errno
        ) from None
    if not taken:
        raise StateFileError(f"{what} stayed locked for {timeout_seconds:.0f} s")
    try:
        yield
    finally:
        lock.release()


def _open_lock_file(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o777 != PRIVATE_FILE_MODE:
            os.fchmod(fd, PRIVATE_FILE_MODE)  # created under a umask, or by an older version
    except OSError:
        pass
    return fd
