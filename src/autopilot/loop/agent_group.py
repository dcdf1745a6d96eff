"""The agent's process group: set up between fork and exec, watched, and ended whole.

The leader gets a parent-death signal (so it dies with the driver) and joins the run's
cgroup where there is one. Ending it ends every process it started, wherever it went
(``loop.descendants``).

Once the leader has exited, the usual case, whether it left anything is told without
reading the whole process table: the driver is a child subreaper, so every living
process the agent started is then in the tree of a child of the driver other than the
leader. No such child (each thread's ``children`` file, proc(5)) and an empty cgroup
mean nothing is left. Anything else, or a kernel without those files, takes the
whole-table search.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from autopilot.loop.cgroup import AgentCgroup
from autopilot.loop.descendants import HELPERS, agent_processes, end_all, reap_adopted

if TYPE_CHECKING:
    import psutil

_PR_SET_PDEATHSIG = 1
_PEEK = os.WEXITED | os.WNOHANG | os.WNOWAIT


def child_setup(cgroup: AgentCgroup | None) -> Callable[[], None]:
    """What the agent runs between fork and exec: the parent-death signal and the
    cgroup. libc is looked up here, in the driver: a child forked from a threaded
    process must not take the loader's locks."""
    import ctypes  # only where setpriv cannot set the signal (``loop.spawn``)

    prctl: Any = None
    with contextlib.suppress(OSError, AttributeError):
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    driver = os.getpid()

    def setup() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != driver:  # the driver died before the signal was set
                os._exit(1)
        if cgroup is not None:
            cgroup.join_from_child()

    return setup


class AgentGroup:
    """The agent's leader process and what it started.

    The leader is reaped only in ``end``, after everything else: until then its pid
    (also its process group's and session's id) cannot be reused, so finding its
    group members by that id is safe.
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        cgroup: AgentCgroup | None,
        *,
        keep_cgroup: bool = False,
        subreaper: bool = False,
    ) -> None:
        self.proc = proc
        self.cgroup = cgroup
        self.keep_cgroup = keep_cgroup  # emptied at the end, not removed
        self.subreaper = subreaper  # this process is a child subreaper
        self.ended = False

    def exited(self) -> bool:
        """Has the leader exited? (Its status is left for ``end`` to collect.)"""
        try:
            return os.waitid(os.P_PID, self.proc.pid, _PEEK) is not None
        except ChildProcessError:
            return True

    def find(self) -> dict[int, psutil.Process]:
        """The leader and what it started (``descendants.agent_processes``); nothing
        without a look at the whole process table when ``left_nothing``."""
        if self.left_nothing():
            return {}
        return agent_processes(self.proc.pid, self.cgroup)

    def left_nothing(self) -> bool:
        """True when the leader has exited and no process it started can be alive: this
        process, a subreaper, has no child but the leader (and ``HELPERS``), and the
        cgroup (if any) is empty. False when that cannot be told."""
        if not self.subreaper or not self.exited():
            return False
        children = children_of_this_process()
        if children is None or children - {self.proc.pid} - HELPERS:
            return False
        return self.cgroup is None or not self.cgroup.pids()

    def end(self, kill_grace_seconds: float) -> None:
        """End the leader and every descendant (TERM, grace, KILL); reap the leader."""
        if self.ended:
            return
        self.ended = True
        if not self.left_nothing():  # else nothing is alive, nor in the cgroup to fork
            end_all(
                self.find,
                grace_seconds=kill_grace_seconds,
                cgroups=[self.cgroup] if self.cgroup is not None else [],
                keep_unreaped=self.proc.pid,
            )
        try:
            self.proc.wait(timeout=kill_grace_seconds + 5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
        reap_adopted()
        if self.cgroup is not None and not self.keep_cgroup:
            self.cgroup.remove()


def children_of_this_process() -> set[int] | None:
    """This process's children, zombies too, from each of its threads' ``children``
    file (Linux 3.5+ with ``CONFIG_PROC_CHILDREN``); None where they cannot be read.

    A thread that ended while its file was about to be read (the driver's short-lived
    write threads) gave its children, if any, to another thread, perhaps one already
    read: the whole reading is made again (a few times at most)."""
    for _ in range(_CHILDREN_TRIES):
        children: set[int] = set()
        try:
            for tid in os.listdir("/proc/self/task"):
                children.update(int(word) for word in _read(f"/proc/self/task/{tid}/children"))
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread ended meanwhile
        except (OSError, ValueError):
            return None
        return children
    return None


_CHILDREN_TRIES = 3


def _read(path: str) -> list[bytes]:
    """The words of a ``/proc`` file, read to its end."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
    finally:
        os.close(fd)
    return data.split()


def is_stopped(pid: int, *, traced_too: bool = False) -> bool:
    """Is ``pid`` stopped (``SIGSTOP``; with ``traced_too``, also held by a tracer)?
    Its state in ``/proc/<pid>/stat`` (proc(5)) on Linux, psutil's elsewhere; False
    when it is gone."""
    if not sys.platform.startswith("linux"):
        import psutil

        try:
            status = psutil.Process(pid).status()
        except psutil.Error:
            return False
        return status == psutil.STATUS_STOPPED or (
            traced_too and status == psutil.STATUS_TRACING_STOP
        )
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return False
    after_name = data.rfind(b")") + 2
    state = data[after_name : after_name + 1]
    return state == b"T" or (traced_too and state == b"t")
