"""Nothing an agent starts outlives its iteration; nothing else is ever signalled.

Real processes: an agent's grandchildren that ``setsid``, ``nohup``, double-fork,
``env -i``, and all of that at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from autopilot.core.vocabulary import EndedBy
from autopilot.loop.agent_group import AgentGroup
from autopilot.loop.cgroup import AgentCgroup
from autopilot.loop.leftovers import end_leftovers
from autopilot.loop.process import ProcessLimits
from autopilot.loop.recovery import end_left_processes
from autopilot.loop.subreaper import become_subreaper
from autopilot.store.run_state import RunState
from tests.conftest import FakeAgent
from tests.loop.agent_process import FAKE_AGENT, run_agent

KINDS = ("setsid", "nohup", "double-fork", "env-i", "env-i-setsid-double-fork")


def spawner(pid_file: Path, kinds: tuple[str, ...] = KINDS) -> str:
    """A shell command that leaves one ``sleep 1004`` behind per kind (each writes
    its own pid to ``pid_file`` first), and returns once all are running."""
    sleeper = f"/bin/sh -c 'echo $$ >> {pid_file}; exec sleep 1004' > /dev/null 2>&1"
    ways = {
        "setsid": f"setsid {sleeper} &",
        "nohup": f"nohup {sleeper} &",
        "double-fork": f"( {sleeper} & )",
        "env-i": f"env -i {sleeper} &",
        "env-i-setsid-double-fork": f"( env -i setsid {sleeper} & )",
    }
    wait = f'while [ "$(wc -l < {pid_file})" -lt {len(kinds)} ]; do sleep 0.05; done'
    return "\n".join([*(ways[kind] for kind in kinds), wait])


def recorded(pid_file: Path) -> list[int]:
    """The pids the grandchildren wrote."""
    return [int(word) for word in pid_file.read_text().split()]


def survivors(pids: list[int]) -> list[psutil.Process]:
    """The grandchildren still running (a zombie has ended; a reused pid runs something
    else than ``sleep 1004``)."""
    left = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE and process.cmdline() == ["sleep", "1004"]:
                left.append(process)
        except psutil.Error:
            continue
    return left


def wait_for_survivors(pids: list[int], count: int) -> list[psutil.Process]:
    """``survivors``, once there are ``count`` of them (or after 10 s)."""
    deadline = time.monotonic() + 10
    left = survivors(pids)
    while len(left) != count and time.monotonic() < deadline:
        time.sleep(0.05)
        left = survivors(pids)
    return left


@pytest.fixture
def cleanup() -> Iterator[list[int]]:
    """Pids of grandchildren a test started: killed at the end whatever happened."""
    pids: list[int] = []
    yield pids
    for process in survivors(pids):
        process.kill()


def _cgroup_or_skip(run_id: str) -> AgentCgroup:
    cgroup = AgentCgroup.for_run(run_id, {})
    if cgroup is None:
        pytest.skip("this machine gives this user no cgroup v2")
    return cgroup


@pytest.mark.parametrize("use_cgroup", [False, True], ids=["no-cgroup", "cgroup"])
def test_every_grandchild_ends_with_the_iteration(
    tmp_path: Path, fake_agent: FakeAgent, cleanup: list[int], use_cgroup: bool
) -> None:
    pid_file = tmp_path / "kids"
    pid_file.touch()
    cgroup = _cgroup_or_skip(f"test-{os.getpid()}-{time.time_ns()}") if use_cgroup else None
    env = fake_agent([[{"shell": spawner(pid_file)}, {"result": "done"}]])
    limits = ProcessLimits(result_grace_seconds=0.5, kill_grace_seconds=1.0)
    result, report, _, _ = run_agent(
        tmp_path, FAKE_AGENT, env, limits=limits, stdin=b"go", cgroup=cgroup
    )
    kids = recorded(pid_file)
    cleanup.extend(kids)
    assert result.ended_by is EndedBy.EXIT
    assert report.final_message == "done"
    assert len(kids) == len(KINDS)
    assert survivors(kids) == []
    if cgroup is not None:
        assert not cgroup.path.exists()


def _spawn_leftovers(
    tmp_path: Path, run_id: str, kinds: tuple[str, ...]
) -> tuple[int, float, list[int]]:
    """An agent in a session of its own, as the driver starts one, that leaves
    ``kinds`` of grandchildren and exits; its pid, start time and the grandchildren."""
    pid_file = tmp_path / f"kids-{run_id}"
    pid_file.touch()
    agent = subprocess.Popen(
        ["/bin/sh", "-c", spawner(pid_file, kinds)],
        env=dict(os.environ, AUTOPILOT_RUN_ID=run_id),
        start_new_session=True,
    )
    started = psutil.Process(agent.pid).create_time()
    agent.wait(timeout=30)
    return agent.pid, started, recorded(pid_file)


def test_leftovers_of_a_dead_driver_are_ended_by_group_and_run_id(
    tmp_path: Path, cleanup: list[int]
) -> None:
    run_id = f"leftovers-{time.time_ns()}"
    kinds = ("setsid", "nohup", "double-fork", "env-i")
    agent_pid, agent_started, kids = _spawn_leftovers(tmp_path, run_id, kinds)
    cleanup.extend(kids)
    assert len(wait_for_survivors(kids, len(kinds))) == len(kinds)
    ended = end_leftovers(
        run_id,
        agent_pid=agent_pid,
        agent_started=agent_started,
        grace_seconds=1.0,
    )
    assert ended == len(kinds)
    assert wait_for_survivors(kids, 0) == []


def test_nothing_is_signalled_while_the_runs_driver_is_alive_and_all_once_it_is_dead(
    tmp_path: Path, cleanup: list[int]
) -> None:
    run_id = f"alive-{time.time_ns()}"
    agent_pid, agent_started, kids = _spawn_leftovers(tmp_path, run_id, ("setsid", "nohup"))
    cleanup.extend(kids)
    driver = subprocess.Popen(["sleep", "1004"])  # stands for the run's live driver
    try:
        state = RunState(
            run_id=run_id,
            pid=driver.pid,
            pid_start_time=psutil.Process(driver.pid).create_time(),
            agent_pid=agent_pid,
            agent_start_time=agent_started,
        )
        ended = end_left_processes(state)
    finally:
        driver.kill()
        driver.wait()
    assert ended == 0
    assert len(wait_for_survivors(kids, 2)) == 2
    # Once that driver is dead, the same record ends them.
    assert end_left_processes(state) == 2
    assert wait_for_survivors(kids, 0) == []


def test_a_process_group_that_is_not_the_recorded_one_is_never_signalled(
    tmp_path: Path, cleanup: list[int]
) -> None:
    # The recorded agent pid now names another program's group (the pid was reused):
    # its start time differs and none of its members carries the run id.
    stranger = subprocess.Popen(["sleep", "1004"], start_new_session=True)
    try:
        ended = end_leftovers(
            f"gone-{time.time_ns()}",
            agent_pid=stranger.pid,
            agent_started=psutil.Process(stranger.pid).create_time() - 3600,
        )
        assert ended == 0
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_a_shell_job_that_got_the_dead_agents_group_id_is_never_signalled(
    tmp_path: Path, cleanup: list[int]
) -> None:
    # The agent (an hour ago) and its group are gone, and its pid went to a shell job:
    # a process group of that id, its leader gone too, in this (another) session.
    pid_file = tmp_path / "kids"
    pid_file.touch()
    job = subprocess.Popen(["/bin/sh", "-c", spawner(pid_file, ("nohup",))], process_group=0)
    job.wait(timeout=30)
    kids = recorded(pid_file)
    cleanup.extend(kids)
    assert [os.getpgid(kid) for kid in kids] == [job.pid] and os.getsid(kids[0]) != job.pid
    ended = end_leftovers(
        f"reused-{time.time_ns()}", agent_pid=job.pid, agent_started=time.time() - 3600
    )
    assert ended == 0
    assert len(survivors(kids)) == 1


def test_leftovers_in_the_runs_cgroup_are_ended_whatever_they_did(
    tmp_path: Path, cleanup: list[int]
) -> None:
    run_id = f"cgroup-{time.time_ns()}"
    cgroup = _cgroup_or_skip(run_id)
    pid_file = tmp_path / "kids"
    pid_file.touch()
    # Only the cgroup knows this one: no run id, its own session, no parent of ours.
    agent = subprocess.Popen(
        ["/bin/sh", "-c", spawner(pid_file, ("env-i-setsid-double-fork",))],
        start_new_session=True,
        preexec_fn=cgroup.join_from_child,  # noqa: PLW1509 - a single-threaded test
    )
    agent.wait(timeout=30)
    kids = recorded(pid_file)
    cleanup.extend(kids)
    assert len(wait_for_survivors(kids, 1)) == 1
    ended = end_leftovers(run_id, agent_pid=None, agent_started=None)
    assert ended == 1
    assert wait_for_survivors(kids, 0) == []
    assert not cgroup.path.exists()


def _run_shell_agent(tmp_path: Path, command: str, cgroup: AgentCgroup | None = None) -> EndedBy:
    """Run ``sh -c command`` as the agent, as the driver runs one; how it ended."""
    limits = ProcessLimits(result_grace_seconds=0.5, kill_grace_seconds=0.5)
    result, _, _, _ = run_agent(
        tmp_path, ["/bin/sh", "-c", command], {}, limits=limits, stdin=None, cgroup=cgroup
    )
    return result.ended_by


def test_a_grandchild_that_ignores_term_or_is_stopped_is_killed(
    tmp_path: Path, cleanup: list[int]
) -> None:
    deaf, stopped = tmp_path / "deaf", tmp_path / "stopped"
    deaf.touch()
    stopped.touch()
    command = "\n".join(
        [
            # SIG_IGN survives exec: this sleep ignores SIGTERM.
            f"setsid /bin/sh -c 'trap \"\" TERM; echo $$ >> {deaf}; exec sleep 1004' "
            "> /dev/null 2>&1 &",
            f"( setsid /bin/sh -c 'echo $$ >> {stopped}; exec sleep 1004' > /dev/null 2>&1 & )",
            f"while [ ! -s {deaf} ] || [ ! -s {stopped} ]; do sleep 0.05; done",
            f"kill -STOP $(cat {stopped})",
        ]
    )
    assert _run_shell_agent(tmp_path, command) is EndedBy.EXIT
    kids = recorded(deaf) + recorded(stopped)
    cleanup.extend(kids)
    assert len(kids) == 2
    assert survivors(kids) == []


def test_a_process_the_driver_started_before_the_agent_is_not_touched(
    tmp_path: Path, cleanup: list[int]
) -> None:
    # Like the sleep inhibitor a detached driver holds: its child, in a session of
    # its own, started before the agent.
    sibling = subprocess.Popen(["sleep", "1004"], start_new_session=True)
    cleanup.append(sibling.pid)
    time.sleep(0.05)  # start times are compared in clock ticks (10 ms)
    pid_file = tmp_path / "kids"
    pid_file.touch()
    try:
        assert _run_shell_agent(tmp_path, spawner(pid_file)) is EndedBy.EXIT
        kids = recorded(pid_file)
        cleanup.extend(kids)
        assert survivors(kids) == []
        assert sibling.poll() is None
    finally:
        sibling.kill()
        sibling.wait()


def test_a_cgroup_that_vanished_before_the_agent_started_costs_nothing(
    tmp_path: Path, cleanup: list[int]
) -> None:
    cgroup = _cgroup_or_skip(f"vanished-{os.getpid()}-{time.time_ns()}")
    cgroup.remove()  # removed by someone else: the agent cannot join it
    pid_file = tmp_path / "kids"
    pid_file.touch()
    assert _run_shell_agent(tmp_path, spawner(pid_file), cgroup) is EndedBy.EXIT
    kids = recorded(pid_file)
    cleanup.extend(kids)
    assert len(kids) == len(KINDS)
    assert survivors(kids) == []
    assert not cgroup.path.exists()


def _exited_agent(script: str) -> AgentGroup:
    """An agent (``script`` in ``sh``) in a session of its own, once it has exited;
    this process a subreaper, as the driver is."""
    assert become_subreaper()
    proc = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)
    group = AgentGroup(proc, None, subreaper=True)
    deadline = time.monotonic() + 10
    while not group.exited():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return group


_LEFT_NOTHING = """
import subprocess, time
from autopilot.loop import descendants
from autopilot.loop.agent_group import AgentGroup
from autopilot.loop.subreaper import become_subreaper

def no_table():
    raise AssertionError("the whole process table was read")

assert become_subreaper()
proc = subprocess.Popen(["/bin/sh", "-c", "exit 0"], start_new_session=True)
group = AgentGroup(proc, None, subreaper=True)
while not group.exited():
    time.sleep(0.01)
assert group.left_nothing()
descendants._process_table = no_table
group.end(kill_grace_seconds=1.0)
assert proc.returncode == 0
print("ok")
"""


def assert_ok_alone(script: str, *args: str) -> None:
    """Run ``script`` in a Python process of its own (this one may have children other
    tests left) and check it printed ``ok``."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout == "ok\n", done.stderr


def test_an_agent_that_left_nothing_is_told_without_the_process_table() -> None:
    assert_ok_alone(_LEFT_NOTHING)


def test_an_agent_whose_orphan_lives_is_searched_for_and_the_orphan_ended(
    tmp_path: Path, cleanup: list[int]
) -> None:
    pid_file = tmp_path / "kids"
    pid_file.touch()
    group = _exited_agent(spawner(pid_file, ("env-i-setsid-double-fork",)))
    kids = recorded(pid_file)
    cleanup.extend(kids)
    assert not group.left_nothing()  # the orphan is this process's child now
    assert set(kids) <= set(group.find())
    group.end(kill_grace_seconds=1.0)
    assert survivors(kids) == []
    assert AgentGroup(group.proc, None, subreaper=False).left_nothing() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_driver_becomes_a_subreaper_on_a_thread_of_its_own() -> None:
    """``become_subreaper_soon`` (a driver's start) makes the process a subreaper, as
    the kernel reports it."""
    probe = (
        "import ctypes, os, sys, threading\n"
        "from autopilot.loop.subreaper import become_subreaper_soon\n"
        "become_subreaper_soon()\n"
        "for thread in threading.enumerate():\n"
        "    if thread.name == 'subreaper':\n"
        "        thread.join()\n"
        "flag = ctypes.c_int(0)\n"
        "ctypes.CDLL(None).prctl(37, ctypes.byref(flag), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER\n"
        "print(flag.value)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "1"
