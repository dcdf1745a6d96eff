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
``end_leftovers`` is a relaunch after a driver crash, when the tree is gone: it ends
the run's cgroup, every process carrying the run's id and the process groups they are
in, and the recorded agent's group unless its pid names another process now (its
caller makes sure the run's driver is dead). ``end_descendants`` is the supervisor's
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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autopilot.loop.cgroup import AgentCgroup, cgroups_of_run

if TYPE_CHECKING:  # imported where a process is found or ended: not at all in the usual case
    import psutil

RUN_ID_ENV = "AUTOPILOT_RUN_ID"
"""The variable every agent inherits, naming its run."""

_POLL_SECONDS = 0.05
_KILL_ROUNDS = 20
_SAME_START_SECONDS = 1.0  # a recorded start time is rounded; a reused pid is not this close

Found = dict[int, "psutil.Process"]


# -- finding -------------------------------------------------------------------------


def _cgroup_members(cgroups: Iterable[AgentCgroup]) -> Found:
    import psutil

    found: Found = {}
    for cgroup in cgroups:
        for pid in cgroup.pids():
            with contextlib.suppress(psutil.Error):
                found[pid] = psutil.Process(pid)
    return found


@dataclass(frozen=True)
class _Row:
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
    import psutil

    found = _cgroup_members([cgroup] if cgroup is not None else [])
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
            with contextlib.suppress(psutil.Error):
                found[pid] = psutil.Process(pid)
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
    import psutil

    own_pid, own_session = os.getpid(), os.getsid(0)
    table = _process_table()
    found: Found = {}
    for pid, row in table.items():
        if row.zombie or row.started < since_ticks or pid == own_pid:
            continue
        if row.pgid == leader_pid or (
            row.sid != own_session and _descends_from(pid, own_pid, table)
        ):
            with contextlib.suppress(psutil.Error):
                found[pid] = psutil.Process(pid)
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

    Never ``keep`` (the agent leader, whose ``Popen`` reads its status) and never a
    child in this process's own session (some ``Popen`` may be waiting for it).
    """
    if not _some_child_exited():
        return  # no zombie child at all: no need to read the process table
    own_pid, own_session = os.getpid(), os.getsid(0)
    for pid, row in _process_table().items():
        if row.ppid == own_pid and row.zombie and row.sid != own_session and pid != keep:
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
    import psutil

    own = os.getpid()

    def find() -> Found:
        table = _process_table()
        found: Found = {}
        for pid, row in table.items():
            if pid == own or row.zombie or not _descends_from(pid, ancestor, table):
                continue
            if _descends_from(pid, own, table):
                continue
            with contextlib.suppress(psutil.Error):
                found[pid] = psutil.Process(pid)
        return found

    return end_all(find, grace_seconds=grace_seconds)


# -- after a driver crash --------------------------------------------------------------


def _recorded_group(pid: int | None, started: float | None) -> tuple[int, float] | None:
    """The recorded agent's process group and the earliest start its members may
    have, if the group may still be the agent's: its leader is the recorded process
    (same start time), or is gone. The leader dies with its driver (parent-death
    signal) while its group lives on in what it started; and a process group id is
    never given to a new process while a member of the group lives. The agent leads
    its own session (``loop.process``), so its group's members are in the session of
    the same id: a group of that id in another session (a shell's job, once the pid
    was reused) is not the agent's."""
    import psutil

    if not isinstance(pid, int) or pid <= 1 or not isinstance(started, int | float):
        return None
    try:
        if abs(psutil.Process(pid).create_time() - started) > _SAME_START_SECONDS:
            return None  # the pid names another process now
    except psutil.NoSuchProcess:
        pass
    except psutil.Error:
        return None
    return pid, float(started) - _SAME_START_SECONDS


def _spared() -> set[int]:
    """This process and its ancestors: never ended, whatever they carry."""
    import psutil

    spared = {os.getpid()}
    with contextlib.suppress(psutil.Error):
        spared.update(p.pid for p in psutil.Process().parents())
    return spared


def end_leftovers(
    run_id: str,
    *,
    agent_pid: int | None,
    agent_started: float | None,
    grace_seconds: float = 2.0,
) -> int:
    """End what a dead driver's agent left running, by every means there is. Call
    only once the run's driver is known dead (``loop.recovery.end_left_processes``).

    The run's cgroups; every process whose environment carries
    ``AUTOPILOT_RUN_ID=<run_id>``; and every member of a process group that is the
    agent's: the recorded one if its leader is still the recorded process or is gone
    (members started no earlier than the agent), and any group a process carrying the
    run's id is in (a process group never outlives its members, so while one lives
    its id names the same group; and only descendants of the agent share a session,
    and so a group, with them). That reaches an ``env -i`` grandchild left in the
    agent's group. A member of the recorded group must be in the session of the
    same id, as the agent's are: a shell's job that got the id once the pid was
    reused is spared. (A stranger could own a group of that id only if the agent's
    group emptied and its pid was given to a new session leader that started members
    and exited, all between the crash and this call.)

    Args:
        run_id: The run.
        agent_pid: The agent leader's pid (its process group id), as recorded.
        agent_started: Its recorded start time (epoch s).
        grace_seconds: Between SIGTERM and SIGKILL.

    Returns:
        How many processes were ended.
    """
    import psutil

    cgroups = cgroups_of_run(run_id)
    spared = _spared()
    own_group = os.getpgrp()
    # Each group to end → the earliest start time a member of it may have.
    groups: dict[int, float] = {}
    recorded = _recorded_group(agent_pid, agent_started)
    if recorded is not None:
        groups[recorded[0]] = recorded[1]
    recorded_group = recorded[0] if recorded is not None else None
    for process in _carrying(run_id):
        with contextlib.suppress(OSError):
            groups.setdefault(os.getpgid(process.pid), 0.0)
    groups.pop(own_group, None)
    identified_at = time.time()

    def find() -> Found:
        found = _cgroup_members(cgroups)
        for process in psutil.process_iter():
            try:
                # A member started after its group was identified may be in a new group
                # that reuses the id of one that has emptied meanwhile: not ours.
                group = os.getpgid(process.pid)
                earliest = groups.get(group)
                if earliest is None or not earliest <= process.create_time() <= identified_at:
                    continue
                if group == recorded_group and os.getsid(process.pid) != group:
                    continue  # the agent's session is its group's: another's group now
                found[process.pid] = process
            except (psutil.Error, OSError):
                continue
        found.update((p.pid, p) for p in _carrying(run_id))
        return {pid: p for pid, p in found.items() if pid not in spared}

    ended = end_all(find, grace_seconds=grace_seconds, cgroups=cgroups)
    for cgroup in cgroups:
        cgroup.remove()
    return ended


def _carrying(run_id: str) -> list[psutil.Process]:
    """Every process whose environment names the run (those this user may read)."""
    import psutil

    carrying = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(RUN_ID_ENV) == run_id:
                carrying.append(process)
        except (psutil.Error, OSError):
            continue
    return carrying
