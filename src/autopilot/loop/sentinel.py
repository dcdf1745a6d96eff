"""A run's sentinel: a driver's death ends everything in its run's cgroup, however the
driver died.

A driver killed by ``kill -9``, the OOM killer or a lost terminal cannot end its
agent. The sentinel is a ``/bin/sh`` started once per run, in a session of its own
and outside the run's cgroup, that reads a pipe whose only writer is the driver. The
kernel closes that end when the driver dies, the ``read`` returns end-of-file, and
the sentinel writes ``1`` to the cgroup's ``cgroup.kill`` (Linux 5.14+,
cgroup-v2(7)): the agent and everything it started get SIGKILL, wherever they went.
A driver that ends normally writes a line first (``stand_down``): the sentinel then
exits without killing anything.

Where a sentinel watches the cgroup an agent is born in, the agent needs no
parent-death signal of its own (``loop.spawn.start_agent``): the exec of
``setpriv`` per agent is saved, and the agent's descendants end with the driver
too, which a parent-death signal never reached. With no cgroup, no
``cgroup.kill``, or a sentinel that could not start, agents get their parent-death
signal as before. A sentinel someone killed or stopped is replaced before the next
agent and at the driver's heartbeat while one runs (``loop.process``): the new one
watches the same cgroup, so the agent running is covered again within a second.

An agent that moves itself out of the run's cgroup (which needs write access to an
ancestor's ``cgroup.procs``, as root has) is out of the sentinel's reach; a relaunch
ends it by its ``AUTOPILOT_RUN_ID``.

The sentinel carries the run's ``AUTOPILOT_RUN_ID``, so a relaunch that ends what
a dead driver left (``loop.leftovers.end_leftovers``) ends a sentinel that is late
too, before the new driver starts an agent in the same cgroup. Its pid is in
``descendants.HELPERS``: never taken for something an agent started.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

from autopilot.loop.agent_group import is_stopped
from autopilot.loop.cgroup import AgentCgroup
from autopilot.loop.descendants import HELPERS, RUN_ID_ENV

_SH = "/bin/sh"
_SCRIPT = 'read -r _ || echo 1 >"$0"'
"""``sh -c`` script, ``$0`` the cgroup's ``cgroup.kill``: a line is the driver's
stand-down; end-of-file is its death."""

_STAND_DOWN_SECONDS = 2.0


class Sentinel:
    """A started sentinel (``start``); ``watching`` while it runs.

    Args:
        proc: The sentinel process.
        write_fd: The driver's end of the pipe (close-on-exec: no child keeps it).
    """

    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int) -> None:
        self.proc = proc
        self._write_fd: int | None = write_fd

    @classmethod
    def start(cls, cgroup: AgentCgroup, run_id: str) -> Sentinel | None:
        """Start the sentinel of ``cgroup`` (this process must be outside it).

        Returns:
            None where the cgroup has no writable ``cgroup.kill`` (a kernel before
            5.14), ``/bin/sh`` is missing, or the start failed.
        """
        kill = cgroup.path / "cgroup.kill"
        if not os.access(kill, os.W_OK) or not os.access(_SH, os.X_OK):
            return None
        try:
            read_fd, write_fd = os.pipe()
        except OSError:  # no file descriptor left
            return None
        try:
            proc = subprocess.Popen(
                [_SH, "-c", _SCRIPT, str(kill)],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={RUN_ID_ENV: run_id, "PATH": "/usr/bin:/bin"},
                start_new_session=True,
                close_fds=True,
            )
        except OSError:
            os.close(write_fd)
            return None
        finally:
            os.close(read_fd)
        HELPERS.add(proc.pid)
        return cls(proc, write_fd)

    def watching(self) -> bool:
        """Is it still there to end the cgroup if this process dies? Not once it has
        exited, nor while it is stopped (``SIGSTOP``: it could not act)."""
        if self._write_fd is None or self.proc.poll() is not None:
            return False
        return not is_stopped(self.proc.pid, traced_too=True)

    def stand_down(self) -> None:
        """Tell it this process ends normally, and reap it: it kills nothing (one that
        is stopped is killed at once, before it could read end-of-file)."""
        if self._write_fd is not None:
            with contextlib.suppress(OSError):
                os.write(self._write_fd, b"\n")
            if self.proc.poll() is None and is_stopped(self.proc.pid, traced_too=True):
                with contextlib.suppress(OSError):
                    self.proc.kill()
            os.close(self._write_fd)
            self._write_fd = None
        try:
            self.proc.wait(timeout=_STAND_DOWN_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        HELPERS.discard(self.proc.pid)
