"""Being a child subreaper (Linux, prctl(2) ``PR_SET_CHILD_SUBREAPER``): an orphan
among this process's descendants is re-parented to it instead of init, so whatever an
agent leaves behind stays in sight. Standard library only: the long-lived supervisor
imports this and stays small."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

_PR_SET_CHILD_SUBREAPER = 36


_made_subreaper: list[int] = []
"""The pid of the process ``become_subreaper`` made a subreaper (a forked child is not
one: the attribute is not inherited)."""


def become_subreaper_soon() -> None:
    """``become_subreaper`` on a thread of its own (loading ``ctypes`` takes about 2
    ms), so that a driver finds it done by its first agent; ``become_subreaper`` there
    waits for the import if it is still under way."""
    if _made_subreaper != [os.getpid()] and sys.platform.startswith("linux"):
        threading.Thread(target=become_subreaper, name="subreaper", daemon=True).start()


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux only); True if it is one. Once it is
    one it stays one: later calls ask nothing of the kernel."""
    if _made_subreaper == [os.getpid()]:
        return True
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        made = bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False
    if made:
        _made_subreaper[:] = [os.getpid()]
    return made


def has_children() -> bool:
    """Whether any process (a zombie too) has this one as its parent (Linux: from
    ``/proc``; elsewhere always True, so a caller looks closer)."""
    if not os.path.isdir("/proc/self"):
        return True
    own = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with (
            contextlib.suppress(OSError, IndexError, ValueError),
            open(f"/proc/{name}/stat", "rb") as stat,
        ):
            # After "pid (comm) ": state ppid ...
            if int(stat.read().rsplit(b")", 1)[-1].split()[1]) == own:
                return True
    return False


def reap_zombie_children() -> int:
    """Collect the exit status of every child of this process that has exited and
    not been waited for (orphans it adopted); how many. Call only when no ``Popen``
    of this process waits for a child of its own."""
    reaped = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped += 1


__all__ = ["become_subreaper", "has_children", "reap_zombie_children"]
