"""Whole-file writes that a crash cannot tear: a temp file beside the target, written
and fsynced, renamed over it, and the folder fsynced.

Readers see the old file or the new one, never a part. A temp file a dead writer left
is named ``<name>.tmp.<pid>.<thread>`` (a relaunch removes ``state.json``'s).
"""

from __future__ import annotations

import _thread  # the thread id, without threading's imports
import json
import os
from _queue import SimpleQueue  # queue's, without threading's imports
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
    """Start ``fsync_folder(folder)`` off this thread; returns the call that waits for
    it to be done (see ``soon``)."""
    return soon(lambda: fsync_folder(folder))


def soon(call: Callable[[], None]) -> Callable[[], None]:
    """Start ``call`` (an fsync or a write: it must not raise) on this process's
    writer thread, after the calls started before it; returns the call that waits for
    it to be done. The caller goes on meanwhile (an agent starting). One thread, made
    at the first call (again in a forked child) and kept, runs them all in order:
    starting a thread for each costs more than the fsync it waits in. Where no thread
    can be started, ``call`` is made here and now."""
    done = _thread.allocate_lock()
    done.acquire()

    def job() -> None:
        try:
            call()
        finally:
            done.release()

    if not _hand_over(job):
        job()

    def wait() -> None:
        with done:
            pass

    return wait


class _Writer:
    """This process's writer thread: its queue, once started."""

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """No thread yet (in a forked child, the thread did not come along, nor may
        the lock be free): the next ``soon`` starts one."""
        self.jobs: SimpleQueue[Callable[[], None]] | None = None
        self.starting = _thread.allocate_lock()


_writer = _Writer()
os.register_at_fork(after_in_child=_writer.forget)


def _hand_over(job: Callable[[], None]) -> bool:
    """Queue ``job`` for the writer thread, starting it first if this process has
    none; False when it cannot be started."""
    with _writer.starting:
        if _writer.jobs is None:
            jobs: SimpleQueue[Callable[[], None]] = SimpleQueue()
            try:
                _thread.start_new_thread(_work, (jobs,))
            except RuntimeError:  # can't start new thread
                return False
            _writer.jobs = jobs
        _writer.jobs.put(job)
    return True


def _work(jobs: SimpleQueue[Callable[[], None]]) -> None:
    while True:
        job = jobs.get()
        try:
            job()
        except BaseException:  # a call's failure is its owner's to report (``soon``);
            pass  # the thread goes on, or every later ``wait`` would hang


def write_json_atomically(path: Path, value: Any, *, mode: int = 0o600) -> None:
    """``value`` as indented UTF-8 JSON and a newline, written by ``write_atomically``.

    Raises:
        OSError: the write failed; ``path`` is unchanged.
    """
    text = json.dumps(value, ensure_ascii=False, indent=2) + "\n"
    write_atomically(path, text.encode("utf-8"), mode=mode)
