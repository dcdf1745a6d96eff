"""A run's cgroup v2: where the machine lets this user have one, the agent and all it
starts live in ``autopilot-<runId>`` below the driver's own cgroup, and
``cgroup.kill`` ends all of it at once (cgroup-v2(7), "Cgroups v2 delegation").

Detection never fails a run: no cgroup v2 mount, a cgroup this user may not write
(the common case outside a delegated systemd user slice), or ``AUTOPILOT_CGROUP=off``
all mean no cgroup, and the other means in ``loop.descendants`` work alone.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
from collections.abc import Mapping
from pathlib import Path

CGROUP_ENV = "AUTOPILOT_CGROUP"
"""``off`` keeps agents out of cgroups."""

_PREFIX = "autopilot-"

_warming: list[threading.Thread] = []
"""The thread ``warm_up`` started, if any (``for_run`` stops it and waits for it)."""

_warm_enough = threading.Event()
"""Set by ``for_run``: the thread ``warm_up`` started moves this process no more."""

_KEEP_WARM_SECONDS = 0.005
_KEEP_WARM_ROUNDS = 400
"""The warm-up's moves: every 5 ms, for 2 s at most."""


def _off(environ: Mapping[str, str]) -> bool:
    return environ.get(CGROUP_ENV, "").strip().lower() in ("off", "0", "no", "false")


def cgroup_likely(environ: Mapping[str, str]) -> bool:
    """Whether this process could make its runs' cgroups (``for_run``): its own cgroup
    v2 directory takes new members, and ``AUTOPILOT_CGROUP`` is not ``off``."""
    if _off(environ):
        return False
    parent = _own_cgroup_dir()
    return parent is not None and os.access(parent / "cgroup.procs", os.W_OK)


def warm_up(environ: Mapping[str, str]) -> None:
    """Begin, in a thread, what this process's first move between cgroups waits for:
    the kernel turns its cgroup lock to its slow path first (an RCU grace period, some
    10 ms, idle time), and back some 10 to 20 ms after the last move, so that a move
    later than that waits again. The thread moves this process into the cgroup it is
    already in (which changes nothing) at once and every 5 ms after, until ``for_run``
    stops it (or for 2 s at most): the driver's first ``enter`` then finds the lock
    ready. Call early in a driver. Nothing where ``for_run`` would make no cgroup, or
    once started."""
    if _warming or not cgroup_likely(environ):
        return
    parent = _own_cgroup_dir()
    assert parent is not None
    thread = threading.Thread(
        target=_keep_warm, args=(parent / "cgroup.procs",), name="cgroup-warm-up", daemon=True
    )
    _warming.append(thread)
    thread.start()


def _keep_warm(procs: Path) -> None:
    for _ in range(_KEEP_WARM_ROUNDS):
        if not _write_pid(procs) or _warm_enough.wait(_KEEP_WARM_SECONDS):
            return


def _cgroup2_mount() -> tuple[Path, str] | None:
    """The cgroup v2 mount point and the hierarchy path mounted there."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as lines:
            for line in lines:
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    fields = left.split(" ")
                    return Path(_unescape(fields[4])), _unescape(fields[3])
    except (OSError, IndexError):
        pass
    return None


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as \ooo.
    return field.encode().decode("unicode_escape") if "\\" in field else field


@functools.cache
def _own_cgroup_dir() -> Path | None:
    """This process's cgroup v2 directory, looked up once (a driver stays where it
    was started; its agents' cgroups are made below it, one per iteration)."""
    mount = _cgroup2_mount()
    if mount is None:
        return None
    mount_point, mounted = mount
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as lines:
            own = next((line[3:].strip() for line in lines if line.startswith("0::")), None)
    except OSError:
        return None
    if own is None or not own.startswith("/"):
        return None
    relative = os.path.relpath(own, mounted)
    if relative.startswith(".."):
        return None
    return Path(os.path.normpath(mount_point / relative))


class AgentCgroup:
    """One run's cgroup v2 directory, ``autopilot-<runId>``.

    Args:
        path: The directory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # False once this process could not leave it (``leave``): it is then not
        # for any agent, whose end would kill this process with it.
        self.usable = True

    @classmethod
    def for_run(cls, run_id: str, environ: Mapping[str, str]) -> AgentCgroup | None:
        """Create (or reuse) the run's cgroup below this process's own.

        Returns:
            None where there is no cgroup v2, this user may not create or fill one
            there, or ``AUTOPILOT_CGROUP`` is ``off``.
        """
        if _off(environ):
            return None
        _warm_enough.set()
        for thread in _warming:  # its move back where this process is must come first
            thread.join()
        parent = _own_cgroup_dir()
        # Moving a process needs write access to cgroup.procs of the common ancestor.
        if parent is None or not os.access(parent / "cgroup.procs", os.W_OK):
            return None
        path = parent / f"{_PREFIX}{run_id}"
        try:
            path.mkdir(exist_ok=True)
        except OSError:
            return None
        if not os.access(path / "cgroup.procs", os.W_OK):
            return None
        return cls(path)

    def join_from_child(self) -> None:
        """Move the calling process in (after fork, before exec; ``os`` calls only, so
        a child forked from a threaded driver cannot deadlock here); refused, it stays
        out."""
        _write_pid(self.path / "cgroup.procs")

    def enter(self) -> bool:
        """Move this process (all its threads) in, so that a child it spawns now is
        born in the cgroup (``loop.process``: no ``sh`` between the driver and the
        agent); ``leave`` at once after the spawn. False (this process stays where
        it was) when the move is refused, or when the cgroup is frozen (someone wrote
        1 to its ``cgroup.freeze``: this process would freeze in it)."""
        try:
            with open(self.path / "cgroup.freeze", "rb") as freeze:
                if freeze.read(1) == b"1":
                    return False
        except OSError:
            pass  # no such file (an older kernel) or gone: the move says
        return _write_pid(self.path / "cgroup.procs")

    def leave(self) -> bool:
        """Move this process back to the cgroup the run's cgroup was made in (its own,
        ``for_run``). False when that is refused: this process is then still in
        the run's cgroup, and must not kill it (``usable`` is False from then on)."""
        back = _write_pid(self.path.parent / "cgroup.procs")
        if not back:
            self.usable = False
        return back

    def pids(self) -> list[int]:
        """The processes in it now (none once it is gone)."""
        try:
            fd = os.open(self.path / "cgroup.procs", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return []
        data = b""
        try:
            while chunk := os.read(fd, 65536):
                data += chunk
        except OSError:
            return []
        finally:
            os.close(fd)
        return [int(word) for word in data.split() if word.isdigit()]

    def kill(self) -> None:
        """SIGKILL everything in it: ``cgroup.kill`` (Linux 5.14+), else each member."""
        try:
            fd = os.open(self.path / "cgroup.kill", os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"1")
            finally:
                os.close(fd)
        except OSError:
            for pid in self.pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        """Remove the directory if it is empty (a process left in it keeps it)."""
        with contextlib.suppress(OSError):
            self.path.rmdir()


def _write_pid(procs: Path) -> bool:
    """Move this process into the cgroup whose ``cgroup.procs`` is ``procs``."""
    try:
        fd = os.open(procs, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, b"0")
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def cgroups_of_run(run_id: str) -> list[AgentCgroup]:
    """Every ``autopilot-<runId>`` directory in the cgroup v2 hierarchy (a relaunched
    driver may sit in another cgroup than the one that died)."""
    mount = _cgroup2_mount()
    if mount is None:
        return []
    name = f"{_PREFIX}{run_id}"
    found: list[AgentCgroup] = []
    for folder, subfolders, _ in os.walk(mount[0]):
        if name in subfolders:
            found.append(AgentCgroup(Path(folder) / name))
            subfolders.remove(name)
    return found
