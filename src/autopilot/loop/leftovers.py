"""What a dead driver's agent left running, ended: after a driver crash (the relaunch,
``loop.recovery``), a merge's ``--verify`` commands killed outright, a Stop hook's
checks cut short. The tree the driver kept is gone, so what is ended is found by every
other means: the run's cgroup, every process carrying the run's id and the process
groups they are in, and the recorded agent's group unless its pid names another
process now (the caller makes sure the run's driver is dead). psutil is loaded here,
never by a driver whose agents leave nothing (``loop.descendants``).
"""

from __future__ import annotations

import contextlib
import os
import time

import psutil

from autopilot.loop.cgroup import cgroups_of_run
from autopilot.loop.descendants import RUN_ID_ENV, Found, cgroup_members, end_all

_SAME_START_SECONDS = 1.0  # a recorded start time is rounded; a reused pid is not this close


def _recorded_group(pid: int | None, started: float | None) -> tuple[int, float] | None:
    """The recorded agent's process group and the earliest start its members may
    have, if the group may still be the agent's: its leader is the recorded process
    (same start time), or is gone. The leader dies with its driver (parent-death
    signal) while its group lives on in what it started; and a process group id is
    never given to a new process while a member of the group lives. The agent leads
    its own session (``loop.process``), so its group's members are in the session of
    the same id: a group of that id in another session (a shell's job, once the pid
    was reused) is not the agent's."""
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
        found = cgroup_members(cgroups)
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
    carrying = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(RUN_ID_ENV) == run_id:
                carrying.append(process)
        except (psutil.Error, OSError):
            continue
    return carrying
