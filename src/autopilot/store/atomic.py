"""Whole-file writes that a crash cannot tear: a temp file beside the target, written
and fsynced, renamed over it, and the folder fsynced.

Readers see the old file or the new one, never a part. A temp file a dead writer left
is named ``<name>.tmp.<pid>.<thread>`` (a relaunch removes ``state.json``'s).
"""

from __future__ import annotations

import _thread  # the thread id, without threading's imports
import json
import os
from pathlib import Path

from autopilot.store.private import open_private

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def write_atomically(
    path: Path,
    data: bytes,
    *,
    mode: int = 0o600,
    sync_dir: bool = True,
    before_rename: Callable[[], None] | None = None,
) -> None:
    """Write ``data`` to ``path`` via a temp file, fsync and rename, then fsync the
    folder so the rename itself survives a power cut.

    Args:
        path: The file; its folder must exist.
        data: Its whole new content.
        mode: The file's permission bits (0600 by default, as under the runs root).
        sync_dir: False leaves the folder's fsync to the next write that does it (it
            covers every rename before it): after a power cut the file is then this
            version or the one before, each whole.
        before_rename: Called once the temp file is synced, before the rename (it
            waits for what must be durable before the new file is: an event log's
            fsync, made meanwhile on another thread).

    Raises:
        OSError: the write failed; ``path`` is unchanged and the temp file removed.
    """
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}.{_thread.get_ident()}")
    try:
        with open(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            if mode != 0o600:
                os.fchmod(handle.fileno(), mode)
        if before_rename is not None:
            before_rename()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """fsync ``folder``, so the renames made in it survive a power cut (best effort:
    a folder that cannot be opened or synced is left as it is)."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def fsync_folder_soon(folder: Path) -> Callable[[], None]:
    """Start ``fsync_folder(folder)`` on a thread of its own; returns the call that
    waits for it to be done (see ``soon``)."""
    return soon(lambda: fsync_folder(folder))


def soon(call: Callable[[], None]) -> Callable[[], None]:
    """Start ``call`` (an fsync: it must not raise) on a thread of its own; returns
    the call that waits for it to be done. The caller goes on meanwhile (an agent
    starting). Where no thread can be started, ``call`` is made here and now."""
    done = _thread.allocate_lock()
    done.acquire()

    def sync() -> None:
        try:
            call()
        finally:
            done.release()

    try:
        _thread.start_new_thread(sync, ())
    except RuntimeError:  # can't start new thread
        sync()

    def wait() -> None:
        with done:
            pass

    return wait


def write_json_atomically(path: Path, value: Any, *, mode: int = 0o600) -> None:
    """``value`` as indented UTF-8 JSON and a newline, written by ``write_atomically``.

    Raises:
        OSError: the write failed; ``path`` is unchanged.
    """
    text = json.dumps(value, ensure_ascii=False, indent=2) + "\n"
    write_atomically(path, text.encode("utf-8"), mode=mode)
