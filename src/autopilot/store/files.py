"""Read a file a repository could have planted: a regular file, bounded, inside.

A checkout can hold anything at a path autopilot reads — ``.autopilot/config.toml``
as a symlink to ``/dev/zero`` (reading it never ends and eats memory), a FIFO (the
read blocks forever), a symlink to a file elsewhere on the machine, a file of
gigabytes. ``read_bounded_file`` opens without blocking, checks what it opened, and
reads at most ``max_bytes``; anything else is an ``UnsafeFileError`` whose message
says what the path really is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_CONFIG_FILE_BYTES = 1024 * 1024
"""A config file (the project's or the user's) larger than this is refused."""

MAX_PROMPT_FILE_BYTES = 8 * 1024 * 1024
"""A prompt file larger than this is refused (far beyond any agent's context)."""


class UnsafeFileError(OSError):
    """The path is not a regular file, leaves the project through a symlink, or is
    over the size cap; ``strerror`` says which, e.g. ``is a FIFO, not a regular file``.
    An ``OSError``, so callers that report unreadable files report this one too."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def read_bounded_file(
    path: Path,
    *,
    max_bytes: int,
    project: Path | None = None,
    follow_symlinks: bool = True,
) -> bytes:
    """The contents of the regular file at ``path``, at most ``max_bytes`` long.

    Args:
        path: The file; relative paths are taken from the current directory.
        max_bytes: A larger file is refused, not cut.
        project: If ``path`` lies inside this directory, it must not lead out of it
            through a symlink (a repository's files stay the repository's).
        follow_symlinks: False refuses a symlink at ``path`` itself (``ELOOP``).

    Returns:
        The bytes.

    Raises:
        FileNotFoundError: nothing is there (also a dangling symlink).
        UnsafeFileError: not a regular file, a symlink leaving ``project``, or over
            ``max_bytes``.
        OSError: any other reason it cannot be read (permissions, a refused symlink).
    """
    given = Path(os.path.abspath(path))
    real = Path(os.path.realpath(given)) if follow_symlinks else given
    if project is not None and follow_symlinks:
        root = Path(os.path.realpath(project))
        if _inside(given, Path(os.path.abspath(project))) and not _inside(real, root):
            raise UnsafeFileError(0, f"is a symlink leading out of {root} (to {real})")
    # Non-blocking, so that opening a FIFO returns at once; no following a symlink
    # that was swapped in after it was resolved.
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(real, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFileError(0, f"is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise UnsafeFileError(0, f"is larger than {_size(max_bytes)}")
        chunks: list[bytes] = []
        left = max_bytes + 1  # one byte more tells a file that grew meanwhile
        while left > 0 and (chunk := os.read(fd, min(left, 1024 * 1024))):
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise UnsafeFileError(0, f"is larger than {_size(max_bytes)}")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _size(count: int) -> str:
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= scale and count % scale == 0:
            return f"{count // scale} {unit}"
    return f"{count} bytes"


def read_prompt_file(path: Path, *, project: Path) -> str:
    """A prompt file's text (bad UTF-8 replaced), read as ``read_bounded_file`` reads.

    Raises:
        OSError: as ``read_bounded_file`` (``UnsafeFileError`` for what is refused).
    """
    data = read_bounded_file(path, max_bytes=MAX_PROMPT_FILE_BYTES, project=project)
    return data.decode("utf-8", "replace")
