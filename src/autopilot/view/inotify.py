"""Linux inotify for a run folder, through ``inotify_simple``: changes are read only
when the kernel reports them.

watchfiles (the fallback elsewhere, ``follow.watch_run_dir``) looks for changes every
``step`` milliseconds in a thread that takes the GIL each time: about half a percent
of a core for a live view that shows a quiet run. Here the waiting thread sleeps in
``poll`` on the inotify descriptor (and a pipe that ends the wait) until the kernel has
something to say.

``RunDirNotify`` watches a folder and its direct subfolders (a run's ``iter-NNNN/``),
including the ones created later, and reports the names of changed files among the
names it was asked about. ``Unavailable`` (an ``OSError``) means "use something else":
not Linux, or the system's inotify limits are reached.
"""

from __future__ import annotations

import errno
import os
import select
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from inotify_simple import INotify  # type: ignore[import-untyped]

WATCH_MASK = 0x2 | 0x4 | 0x40 | 0x80 | 0x100 | 0x200
"""What counts as a change (inotify(7)): data (``IN_MODIFY``), metadata
(``IN_ATTRIB``), a file renamed away or in (``IN_MOVED_FROM``, ``IN_MOVED_TO``),
created (``IN_CREATE``) or removed (``IN_DELETE``)."""

_ONLY_DIRECTORY = 0x01000000  # IN_ONLYDIR
_OVERFLOW = 0x4000  # IN_Q_OVERFLOW
_IS_DIRECTORY = 0x40000000  # IN_ISDIR
_NEW_ENTRY = 0x100 | 0x80  # IN_CREATE | IN_MOVED_TO

_UNAVAILABLE = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOSPC, errno.ENOSYS)
"""Errors that mean inotify cannot be used now (limits reached, not supported)."""


class Unavailable(OSError):
    """inotify cannot be used here (not Linux, or the system's limits are reached)."""


def _error(error: OSError, path: Path | None) -> OSError:
    code = error.errno or errno.EIO
    kind = Unavailable if code in _UNAVAILABLE else OSError
    return kind(code, os.strerror(code), None if path is None else str(path))


class RunDirNotify:
    """inotify on ``root`` and its direct subfolders, reporting changes to ``names``.

    Args:
        root: The folder (a run's folder).
        names: File names that matter (e.g. ``events.jsonl``, ``stdout.log``), in
            ``root`` or in any direct subfolder.

    Raises:
        Unavailable: inotify cannot be used (not Linux, limits reached).
        OSError: ``root`` cannot be watched (missing, not a folder, no permission).
    """

    def __init__(self, root: Path, names: frozenset[str]) -> None:
        self._lock = threading.Lock()
        self._names = names
        self._root = root
        self._folders: dict[int, Path] = {}
        self._wake_read, self._wake_write = -1, -1
        self._inotify: INotify | None = None
        if not sys.platform.startswith("linux"):
            raise Unavailable(errno.ENOSYS, "inotify is Linux only")
        from inotify_simple import INotify

        try:
            self._inotify = INotify(nonblocking=True)
        except (OSError, AttributeError) as error:  # AttributeError: no inotify in libc
            found = error if isinstance(error, OSError) else OSError(errno.ENOSYS, "")
            raise _error(found, None) from None
        try:
            self._wake_read, self._wake_write = os.pipe()
            os.set_blocking(self._wake_read, False)
            os.set_blocking(self._wake_write, False)
            self._root_wd = self._add(root)
            for child in root.iterdir():
                if child.is_dir():
                    try:
                        self._add(child)
                    except Unavailable:
                        raise
                    except OSError:
                        pass  # gone already
        except BaseException:
            self.close()
            raise

    def wait(self, timeout: float) -> bool:
        """Sleep until changes are waiting (True), or ``timeout`` seconds pass or
        ``wake`` is called (False)."""
        poller = select.poll()
        fd = self._open().fileno()
        poller.register(fd, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        ready = {fd for fd, _ in poller.poll(max(0, round(timeout * 1000)))}
        if self._wake_read in ready:
            try:
                os.read(self._wake_read, 512)
            except BlockingIOError:
                pass
        return fd in ready

    def wake(self) -> None:
        """End a ``wait`` at once (from any thread; nothing after ``close``)."""
        with self._lock:
            if self._wake_write >= 0:
                try:
                    os.write(self._wake_write, b"\0")
                except BlockingIOError:
                    pass  # the pipe is full: a wake is already waiting

    def read(self) -> set[str]:
        """The watched names changed since the last read (without waiting; may be empty).

        A queue overflow at the kernel reports every name; a new subfolder is watched
        from now on, and the watched names it already holds are reported.
        """
        changed: set[str] = set()
        while events := self._open().read(timeout=0):
            for event in events:
                if event.mask & _OVERFLOW:
                    changed |= self._names
                elif event.mask & _IS_DIRECTORY:
                    if event.wd == self._root_wd and event.mask & _NEW_ENTRY:
                        changed |= self._watch_new(self._root / event.name)
                elif event.name in self._names and event.wd in self._folders:
                    changed.add(event.name)
        return changed

    def close(self) -> None:
        """Stop watching (the descriptors are closed; idempotent)."""
        with self._lock:
            pipe = (self._wake_read, self._wake_write)
            self._wake_read, self._wake_write = -1, -1
        for fd in pipe:
            if fd >= 0:
                os.close(fd)
        inotify, self._inotify = self._inotify, None
        if inotify is not None:
            inotify.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def _open(self) -> INotify:
        if self._inotify is None:
            raise OSError(errno.EBADF, "inotify is closed")
        return self._inotify

    def _add(self, folder: Path) -> int:
        try:
            wd = int(self._open().add_watch(folder, WATCH_MASK | _ONLY_DIRECTORY))
        except OSError as error:
            raise _error(error, folder) from None
        self._folders[wd] = folder
        return wd

    def _watch_new(self, folder: Path) -> set[str]:
        """Watch a new subfolder; the watched names it holds already.

        A folder gone already, or one past the system's limit of watches, is left
        unwatched: a caller's periodic check (``watch_run_dir``'s quiet set) still
        reads its files.
        """
        try:
            self._add(folder)
            return {name for name in self._names if (folder / name).exists()}
        except OSError:
            return set()
