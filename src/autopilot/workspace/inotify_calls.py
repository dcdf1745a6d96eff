"""The three Linux inotify calls a driver's tree watch makes (``workspace.tree_watch``),
through ctypes: ``inotify_init1(2)``, ``inotify_add_watch(2)`` and reading the events as
inotify(7) lays them out.

The live view watches a run folder with ``inotify_simple`` (``view.inotify``); a driver
does not load it: that library finds libc with ``ctypes.util.find_library``, which
loads shutil, tempfile and the archive modules and runs ``ldconfig`` (about 1.2 MiB and
8 ms more in every driver that watches its tree). Here libc's functions come from the
process itself (``ctypes.CDLL(None)``).
"""

from __future__ import annotations

import ctypes
import os
import struct
from typing import NamedTuple

_HEADER = struct.Struct("iIII")
"""``struct inotify_event`` before its name: wd, mask, cookie, len (inotify(7))."""
_READ_BYTES = 65536
"""Bytes asked of one read: more than one event of the longest name takes."""


class Event(NamedTuple):
    """One inotify event: the watch it came from, its mask (inotify(7)), the cookie
    pairing a rename's two halves, and the name of the entry within a watched folder
    ("" for the folder itself)."""

    wd: int
    mask: int
    cookie: int
    name: str


class Inotify:
    """One inotify instance, non-blocking and closed on exec.

    Raises:
        OSError: the kernel refused an instance (``EMFILE``: the user's limit).
        AttributeError: this libc has no inotify (not Linux).
    """

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._add_watch = libc.inotify_add_watch
        self._add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._add_watch.restype = ctypes.c_int
        fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
        if fd < 0:
            _raise(None)
        self.fd = fd

    def add_watch(self, path: str, mask: int) -> int:
        """Watch ``path`` for the events in ``mask``; its watch descriptor (the same
        one again for a folder already watched).

        Raises:
            OSError: as ``inotify_add_watch(2)`` (``ENOENT``, ``ENOSPC``: the user's
                limit of watches, ``EACCES``).
        """
        wd = int(self._add_watch(self.fd, os.fsencode(path), mask))
        if wd < 0:
            _raise(path)
        return wd

    def read(self) -> list[Event]:
        """The events waiting, without waiting (empty: none yet)."""
        try:
            data = os.read(self.fd, _READ_BYTES)
        except BlockingIOError:
            return []
        events = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, cookie, length = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            name = os.fsdecode(data[offset : offset + length].rstrip(b"\0"))
            offset += length
            events.append(Event(wd, mask, cookie, name))
        return events

    def close(self) -> None:
        """Close the instance (idempotent): every watch ends with it."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def _raise(path: str | None) -> None:
    code = ctypes.get_errno()
    raise OSError(code, os.strerror(code), path)
