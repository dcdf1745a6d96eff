"""The agent's descendants: keep them in sight, end every one of them, nothing else.

An agent's children do what they like: ``setsid``, double forks, ``nohup``,
``env -i``. Three means keep them findable:

* **Subreaper.** On Linux the driver is a child subreaper (``PR_SET_CHILD_SUBREAPER``,
  prctl(2)): an orphan is re-parented to the driver instead of init, so every process
  the agent starts stays in the driver's process tree. The agent leads a session of
  its own, and no process can join a session it was not born in, so the agent's
  descendants are the processes of the driver's tree outside the driver's session
  that started no earlier than the agent.
* **cgroup.** Where the machine lets this user create a cgroup v2 below its own, a
  run's agents run in ``autopilot-<runId>``: whatever they start is in there, and
  ``cgroup.kill`` ends all of it at once. Where it cannot (no cgroup v2, not
  delegated, ``AUTOPILOT_CGROUP=off``) the other means work alone.
* **The run id.** Every agent inherits ``AUTOPILOT_RUN_ID``; descendants that kept
  their environment carry it.

``end_all`` ends what a finder returns (SIGTERM and SIGCONT, a grace period, then
SIGKILL until the finder comes back empty, since a process may fork while it is being
ended) and reaps the zombies the driver adopted. Signals go through psutil, which
refuses a pid whose start time changed, so a reused pid is never signalled.
What a relaunch ends after a driver crash, when the tree is gone, is
``loop.leftovers``. ``end_descendants`` is the supervisor's
part: it is a subreaper too, so when a detached run's daemon dies, what its agents left
is re-parented to the supervisor, which ends it — even a grandchild that shed the run
id, its session and its parent where there is no cgroup.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from msgspec import Struct

from autopilot.loop.cgroup import AgentCgroup

if TYPE_CHECKING:  # imported where a process is found or ended: not at all in the usual case
    import psutil

RUN_ID_ENV = "AUTOPILOT_RUN_ID"
"""The variable every agent inherits, naming its run."""

HELPERS: set[int] = set()
"""This process's children that no agent started (a run's sentinel, ``loop.sentinel``):
never found here as something an agent left, nor reaped here (so that, until their
owner reaps one and takes it out, its pid cannot name another process)."""

_POLL_SECONDS = 0.05
_KILL_ROUNDS = 20

Found = dict[int, "psutil.Process"]


# -- finding -------------------------------------------------------------------------


def _keep(found: Found, pid: int) -> None:
    """``psutil.Process(pid)`` into ``found``, unless it is gone or one of ``HELPERS``."""
    if pid in HELPERS:
        return
    import psutil

    with contextlib.suppress(psutil.Error):
        found[pid] = psutil.Process(pid)


def cgroup_members(cgroups: Iterable[AgentCgroup]) -> Found:
    found: Found = {}
    for cgroup in cgroups:
        for pid in cgroup.pids():
            _keep(found, pid)
    return found


class _Row(Struct, frozen=True):
    """One process as the table shows it."""

    ppid: int
    pgid: int
    sid: int
    started: int  # in clock ticks since boot: comparable between processes
    zombie: bool


def _process_table() -> dict[int, _Row]:
    """Every process: one read of ``/proc/<pid>/stat`` each on Linux (psutil's
    iteration reads each several times, too slow for every iteration), else psutil."""
    rows: dict[int, _Row] = {}
    if not os.path.isdir("/proc/self"):
        import psutil

        for process in psutil.process_iter(["ppid", "create_time", "status"]):
            with contextlib.suppress(OSError):
                info = process.info
                rows[process.pid] = _Row(
                    info["ppid"] or 0,
                    os.getpgid(process.pid),
                    os.getsid(process.pid),
                    int((info["create_time"] or 0) * 100),
                    info["status"] == psutil.STATUS_ZOMBIE,
                )
        return rows
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
            try:
                data = os.read(fd, 4096)
            finally:
                os.close(fd)
            # After "pid (comm) ": state ppid pgrp session ... starttime (field 22).
            fields = data[data.rfind(b")") + 2 :].split()
            rows[int(name)] = _Row(
                int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]), fields[0] == b"Z"
            )
        except (OSError, IndexError, ValueError):
            continue
    return rows


def agent_processes(leader_pid: int, cgroup: AgentCgroup | None) -> Found:
    """The agent leader (an unreaped child of this process) and every descendant of
    it in sight: its cgroup's members, the members of its process group, and this
    process's tree outside this process's session started no earlier than the leader.
    """
    found = cgroup_members([cgroup] if cgroup is not None else [])
    own_pid, own_session = os.getpid(), os.getsid(0)
    table = _process_table()
    leader = table.get(leader_pid)
    for pid, row in table.items():
        # The leader is not reaped yet, so its group id cannot have been reused.
        ours = row.pgid == leader_pid or (
            row.sid != own_session
            and (leader is None or row.started >= leader.started)
            and _descends_from(pid, own_pid, table)
        )
        if ours:
            _keep(found, pid)
    return found


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in the process table's clock ticks (None: not found)."""
    row = _process_table().get(pid)
    return row.started if row is not None else None


def started_processes(leader_pid: int, since_ticks: int) -> Found:
    """What a child of this process that leads a session of its own started (a check
    command, whatever ``setsid`` or double forks it did): its process group and this
    process's tree outside this process's session started no earlier than
    ``since_ticks`` (``start_ticks`` of the leader, read while it ran). An orphan is
    in this tree only while this process is a subreaper (``loop.subreaper``)."""
    own_pid, own_session = os.getpid(), os.getsid(0)
    table = _process_table()
    found: Found = {}
    for pid, row in table.items():
        if row.zombie or row.started < since_ticks or pid == own_pid:
            continue
        if row.pgid == leader_pid or (
            row.sid != own_session and _descends_from(pid, own_pid, table)
        ):
            _keep(found, pid)
    return found


def _descends_from(pid: int, ancestor: int, table: Mapping[int, _Row]) -> bool:
    for _ in range(len(table)):
        row = table.get(pid)
        if row is None or row.ppid <= 1:
            return False
        if row.ppid == ancestor:
            return True
        pid = row.ppid
    return False


# -- ending --------------------------------------------------------------------------


def _alive(process: psutil.Process) -> bool:
    import psutil

    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal(processes: Iterable[psutil.Process], signum: int) -> None:
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.Error, OSError):
            process.send_signal(signum)  # psutil refuses a pid reused since it was found


def _some_child_exited() -> bool:
    """Whether a child of this process has exited and not been waited for (asked with
    ``WNOWAIT``, so nothing is collected); True where the question cannot be asked."""
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False  # no child at all
    except (OSError, AttributeError):
        return True


def reap_adopted(keep: int | None = None) -> None:
    """Collect the exit status of the zombies this process adopted as a subreaper.

    Never ``keep`` (the agent leader, whose ``Popen`` reads its status), never a
    child in this process's own session (some ``Popen`` may be waiting for it), and
    never one of ``HELPERS``: its owner reaps it, and until then its pid names no
    other process.
    """
    if not _some_child_exited():
        return  # no zombie child at all: no need to read the process table
    own_pid, own_session = os.getpid(), os.getsid(0)
    for pid, row in _process_table().items():
        if (
            row.ppid == own_pid
            and row.zombie
            and row.sid != own_session
            and pid != keep
            and pid not in HELPERS
        ):
            with contextlib.suppress(OSError):
                os.waitpid(pid, os.WNOHANG)


def end_all(
    find: Callable[[], Found],
    *,
    grace_seconds: float,
    cgroups: Iterable[AgentCgroup] = (),
    keep_unreaped: int | None = None,
) -> int:
    """End every process ``find`` returns: SIGTERM and SIGCONT (a stopped process
    gets its SIGTERM only once continued), up to ``grace_seconds`` for them to exit,
    then SIGKILL, repeated until ``find`` returns no live process.

    Args:
        find: Returns the processes to end; called again for each SIGKILL round.
        grace_seconds: Between SIGTERM and SIGKILL.
        cgroups: Killed whole in each SIGKILL round.
        keep_unreaped: A child whose exit status its ``Popen`` will read.

    Returns:
        How many live processes were found in all.
    """
    targets = [p for p in find().values() if _alive(p)]
    seen = {p.pid for p in targets}
    if not targets:  # nothing alive to fork anew: only the cgroup could still fill
        for cgroup in cgroups:
            cgroup.kill()
        return 0
    _signal(targets, signal.SIGTERM)
    _signal(targets, signal.SIGCONT)
    deadline = time.monotonic() + grace_seconds
    while targets and time.monotonic() < deadline:
        reap_adopted(keep_unreaped)
        targets = [p for p in targets if _alive(p)]
        if targets:
            time.sleep(_POLL_SECONDS)
    for _ in range(_KILL_ROUNDS):
        for cgroup in cgroups:
            cgroup.kill()
        live = [p for p in find().values() if _alive(p)]
        if not live:
            break
        seen.update(p.pid for p in live)
        _signal(live, signal.SIGKILL)
        time.sleep(_POLL_SECONDS)
        reap_adopted(keep_unreaped)
    return len(seen)


def end_descendants(ancestor: int, *, grace_seconds: float = 2.0) -> int:
    """End every process descending from ``ancestor`` but this one and what it
    started: what a subreaper (the supervisor) adopted once the process it watched
    died. Returns how many were found alive."""
    own = os.getpid()

    def find() -> Found:
        table = _process_table()
        found: Found = {}
        for pid, row in table.items():
            if pid == own or row.zombie or not _descends_from(pid, ancestor, table):
                continue
            if _descends_from(pid, own, table):
                continue
            _keep(found, pid)
        return found

    return end_all(find, grace_seconds=grace_seconds)
