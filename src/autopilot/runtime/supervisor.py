"""The supervisor: a small process that starts a run's daemon and starts it again after
a crash (``docs/architecture.md``, "Detached runs").

``python -m autopilot.runtime.supervisor [--fork] [--adopt PID] RUNS_ROOT RUN_ID``

* ``--fork``: print the supervisor's pid on stdout and go on in a child, so the
  command that detached the run returns at once and leaves no zombie behind.
* ``--adopt PID``: watch a daemon that is already running (its supervisor died)
  instead of starting one; its exit status is then unknown. The daemons it starts
  later get the adopted daemon's environment, not the adopting command's.

The daemon (``runtime.daemon``) runs in a session of its own, with stdin ``/dev/null``
and its stdout and stderr appended to ``daemon.out`` and ``daemon.err`` in the run
folder, so it outlives the supervisor. ``state.json`` holds ``supervisorPid`` and
``supervisorStartTime`` (the daemon records ``pid`` and ``pidStartTime`` itself), and
``supervisorRestarts``, so the restart window survives the supervisor too.

When the daemon exits, ``core.restart.decide_restart`` says what follows: restart it
(``supervisor_restart`` with the exit code or signal, and a notice for the agent when
an attempt was cut short), end a run whose stop was requested, give up (one
``supervisor_giveup``, status ``error``, one terminal ``abort`` with reason
``supervisor_giveup``, and a notification), or leave the run as it is. SIGTERM or
SIGINT make the supervisor leave and the daemon go on; SIGHUP is ignored. It waits
on a pidfd where the platform has one, so it costs nothing while the daemon runs.

On Linux the supervisor is a child subreaper (``loop.subreaper``): when the daemon
dies, whatever its agents left running is re-parented to the supervisor, which ends
it before anything else (``loop.descendants.end_descendants``), cgroup or not.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from autopilot.core.restart import DaemonExit
from autopilot.loop.subreaper import become_subreaper, has_children, reap_zombie_children
from autopilot.runtime.supervision import DAEMON_ERR, DAEMON_OUT, KEEP_GOING, SUPERVISOR_LOG

_POLL_SECONDS = 1.0


def daemon_argv(root: Path, run_id: str) -> list[str]:
    """The command that runs a run's daemon."""
    return [sys.executable, "-m", "autopilot.runtime.daemon", str(root), run_id]


def _in_child(work: Any) -> int:
    """Run ``work()`` in a forked child and return its exit code.

    Everything that reads or writes the run's files happens this way, so what it
    imports never grows the long-lived supervisor (its resident memory stays that of a
    bare interpreter, plus a little).
    """
    _flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = int(work())
        except BaseException as error:  # the child must never return into the loop
            with contextlib.suppress(BaseException):
                print(f"autopilot: supervisor: {type(error).__name__}: {error}", file=sys.stderr)
        finally:
            with contextlib.suppress(BaseException):
                _flush()
            os._exit(code)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status)
        except InterruptedError:
            continue


def _flush() -> None:
    """Flush stdout and stderr (``supervisor.log``); a full disk loses the lines, never
    the supervisor."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


class Supervisor:
    """Supervises one run's daemon until the run no longer needs it.

    Args:
        root: The runs root.
        run_id: The run.
        adopt: The pid of a daemon already running, to watch instead of starting one.
    """

    def __init__(self, root: Path, run_id: str, adopt: int | None = None) -> None:
        self.root = root
        self.run_id = run_id
        self.folder = root / run_id
        self._adopt = adopt
        # Every daemon it starts gets the environment the run was started with: its
        # own, or, adopting a daemon a dead supervisor started, that daemon's.
        self._daemon_env = None if adopt is None else environment_of(adopt)
        self._leaving = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    # -- signals -----------------------------------------------------------------

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._leaving = True

    def install_signals(self) -> None:
        """SIGTERM and SIGINT: leave (the daemon goes on); SIGHUP: ignored."""
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        signal.set_wakeup_fd(self._wake_w)

    # -- the loop ----------------------------------------------------------------

    def run(self) -> int:
        """Supervise until the run ends, gives up, or the supervisor is asked to leave.

        Returns:
            0, or 4 when the run's ``state.json`` cannot be read or written.
        """
        me = os.getpid()
        if _in_child(lambda: _acts(self).attach(me)) != 0:
            return 4
        # Orphans the daemon's agents leave when the daemon dies come to us, not init.
        subreaper = become_subreaper()
        try:
            pid, child = (self._adopt, None) if self._adopt else self._spawn()
            while True:
                ended = self._wait(pid, child)
                if ended is None:
                    return 0  # asked to leave: the daemon goes on without us
                if subreaper:
                    self._end_orphans(me)
                verdict = _in_child(lambda ended=ended: _acts(self).after_exit(ended))
                if verdict != KEEP_GOING or self._leaving:
                    return 0
                pid, child = self._spawn()
        finally:
            _in_child(lambda: _acts(self).forget(me))

    def _end_orphans(self, me: int) -> None:
        """End what the daemon left running (re-parented to us: its agents' leftovers,
        its sleep inhibitor), then collect their exit statuses. Between two daemons
        only: no child of ours is waited for by anyone else then."""
        if has_children():  # the daemon's children came to us when it died
            _in_child(lambda: _end_descendants(me))
            reap_zombie_children()

    def _spawn(self) -> tuple[int, subprocess.Popen[bytes]]:
        from autopilot.store.private import open_private

        appending = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        with (
            open(open_private(self.folder / DAEMON_OUT, appending), "ab") as out,
            open(open_private(self.folder / DAEMON_ERR, appending), "ab") as err,
        ):
            child = subprocess.Popen(
                daemon_argv(self.root, self.run_id),
                env=self._daemon_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd=self.folder,
                start_new_session=True,
                close_fds=True,
            )
        return child.pid, child

    def _wait(self, pid: int, child: subprocess.Popen[bytes] | None) -> DaemonExit | None:
        """Block until the daemon exits (its exit) or we are asked to leave (None)."""
        pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
        try:
            while not self._leaving:
                watched = [self._wake_r] if pidfd is None else [self._wake_r, pidfd]
                timeout = None if pidfd is not None else _POLL_SECONDS
                try:
                    readable, _, _ = select.select(watched, [], [], timeout)
                except InterruptedError:
                    continue
                if self._wake_r in readable:
                    with contextlib.suppress(BlockingIOError, OSError):
                        os.read(self._wake_r, 512)
                if child is not None:
                    code = child.poll()
                    if code is not None:
                        return DaemonExit.from_returncode(code)
                elif (pidfd is not None and pidfd in readable) or not _exists(pid):
                    return DaemonExit(None)
            return None
        finally:
            if pidfd is not None:
                os.close(pidfd)


def _end_descendants(supervisor: int) -> int:
    from autopilot.loop.descendants import end_descendants

    end_descendants(supervisor)
    return 0


def environment_of(pid: int) -> dict[str, str] | None:
    """The environment process ``pid`` was started with (``/proc/PID/environ`` on
    Linux, psutil elsewhere), or None when it cannot be read (then the supervisor's own
    is used, and its log says so)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        raw = None
    if raw is None:
        try:
            import psutil  # not on Linux: /proc has it there, and psutil costs memory

            return dict(psutil.Process(pid).environ())
        except Exception:
            _say(f"cannot read the environment of daemon {pid}: restarts take this one's")
            return None
    env = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            env[os.fsdecode(key)] = os.fsdecode(value)
    return env


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"autopilot: supervisor: {line}", file=sys.stderr, flush=True)


def _acts(supervisor: Supervisor) -> Any:
    """The supervisor's acts on the run's files, imported in the forked child only."""
    from autopilot.runtime.supervisor_acts import SupervisorActs

    return SupervisorActs(supervisor.folder, supervisor.run_id)


def _exists(pid: int) -> bool:
    """Does ``pid`` still exist (a zombie counts as gone)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    return True


def _fork_and_report() -> None:
    """Go on in a child; the parent prints the child's pid and exits at once."""
    child = os.fork()
    if child:
        print(child, flush=True)
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    """Entry point; see the module docstring for the arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    fork = "--fork" in args
    if fork:
        args.remove("--fork")
    adopt: int | None = None
    if "--adopt" in args:
        at = args.index("--adopt")
        adopt = int(args[at + 1])
        del args[at : at + 2]
    if len(args) != 2:
        print("usage: supervisor [--fork] [--adopt PID] RUNS_ROOT RUN_ID", file=sys.stderr)
        return 2
    root, run_id = Path(args[0]), args[1]
    if "/" in run_id or run_id in ("", ".", ".."):
        print(f"invalid run id {run_id!r}", file=sys.stderr)
        return 2
    if fork:
        _fork_and_report()
        log_path = root / run_id / SUPERVISOR_LOG
        log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(log, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
    supervisor = Supervisor(root, run_id, adopt=adopt)
    supervisor.install_signals()
    return supervisor.run()


if __name__ == "__main__":
    sys.exit(main())
