"""A run's sentinel (``loop.sentinel``): a driver's death ends its run's cgroup, a
normal end kills nothing, and a guarded agent needs no ``setpriv``."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autopilot.loop import spawn
from autopilot.loop.cgroup import AgentCgroup
from autopilot.loop.descendants import HELPERS, reap_adopted
from autopilot.loop.sentinel import Sentinel
from autopilot.process_exit import exited_within
from tests.loop.test_descendants import assert_ok_alone
from tests.loop.test_spawn import _alive, _run_cgroup, _wait


@pytest.fixture
def cgroup() -> Iterator[AgentCgroup]:
    """A new run's cgroup, emptied and removed at the end (skipped where this user may
    have none, or the kernel no ``cgroup.kill``)."""
    made = _run_cgroup("sentinel-test")
    if not (made.path / "cgroup.kill").exists():
        made.remove()
        pytest.skip("this kernel has no cgroup.kill")
    yield made
    made.kill()
    _wait(lambda: not made.pids())
    made.remove()
    _endsentinels_of(made)


def _endsentinels_of(cgroup: AgentCgroup) -> None:
    """Kill what still watches ``cgroup`` (a test that failed may leave one stopped)."""
    import psutil

    target = str(cgroup.path / "cgroup.kill")
    for process in psutil.process_iter(["cmdline"]):
        if (process.info["cmdline"] or [""])[-1] == target:
            with contextlib.suppress(psutil.Error):
                process.kill()


_DRIVER = """
import os, sys
from pathlib import Path
from autopilot.loop import spawn
from autopilot.loop.process import ProcessLimits
from autopilot.loop.runner import AgentWatch, RunRequest, SubprocessRunner
from autopilot.store.rundir import AttemptDir
folder, run_id = Path(sys.argv[1]), sys.argv[2]
spawn._SYSTEM_DIRS = ()  # no setpriv: a descendant in a session of its own needs the sentinel
attempt = AttemptDir(folder / "iter")
attempt.path.mkdir()
started = lambda pid: (folder / "pid").write_text(str(pid))
watch = AgentWatch(lambda line: None, lambda: False, lambda: False, started)
script = f"setsid sleep 600 & echo $! > {folder}/kid; exec sleep 601"
request = RunRequest(
    ["/bin/sh", "-c", script], dict(os.environ), None, folder, attempt, ProcessLimits(), run_id
)
SubprocessRunner().run(request, watch)
"""


def sentinels_of(driver: int) -> list[int]:
    """The pids of ``driver``'s children that watch a run's cgroup, zombies left out."""
    import psutil

    found = []
    for child in psutil.Process(driver).children():
        try:
            if child.cmdline()[-1:] and child.cmdline()[-1].endswith("/cgroup.kill"):
                found.append(child.pid)
        except psutil.Error:  # a zombie (a killed sentinel its driver has not reaped yet)
            continue
    return found


@pytest.mark.parametrize("sentinel", ["watching", "killed", "stopped"])
def test_a_killed_driver_takes_its_agent_and_all_it_started_with_it(
    tmp_path: Path, cgroup: AgentCgroup, sentinel: str
) -> None:
    """Also when someone killed or stopped the sentinel while the agent ran: the
    driver's heartbeat starts another on the same cgroup."""
    run_id = cgroup.path.name.removeprefix("autopilot-")
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(tmp_path), run_id])
    try:
        assert _wait(lambda: (tmp_path / "kid").exists() and (tmp_path / "kid").read_text())
        agent, kid = int((tmp_path / "pid").read_text()), int((tmp_path / "kid").read_text())
        assert _wait(lambda: Path(f"/proc/{agent}/cmdline").read_bytes().startswith(b"sleep"))
        assert _alive(kid)
        if sentinel != "watching":
            (first,) = sentinels_of(driver.pid)
            os.kill(first, signal.SIGKILL if sentinel == "killed" else signal.SIGSTOP)
            assert _wait(lambda: [p for p in sentinels_of(driver.pid) if p != first])
            assert _wait(lambda: not _alive(first))  # a stopped one is killed
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        assert _wait(lambda: not _alive(agent) and not _alive(kid))
        assert cgroup.pids() == []
    finally:
        driver.kill()
        driver.wait()


def _sleeper_in(cgroup: AgentCgroup, tmp_path: Path) -> subprocess.Popen[bytes]:
    return spawn.start_agent(
        ["sleep", "600"], cwd=tmp_path, env=os.environ, stdin_data=None, cgroup=cgroup, guarded=True
    )


def test_a_sentinel_stood_down_kills_nothing(tmp_path: Path, cgroup: AgentCgroup) -> None:
    sentinel = Sentinel.start(cgroup, "stand-down-test")
    assert sentinel is not None and sentinel.watching()
    assert sentinel.proc.pid in HELPERS
    agent = _sleeper_in(cgroup, tmp_path)
    try:
        sentinel.stand_down()
        assert sentinel.proc.returncode == 0  # it read the line: no kill
        assert not sentinel.watching()
        assert sentinel.proc.pid not in HELPERS
        assert exited_within(agent.pid, 0.5) is not True
        assert agent.poll() is None
    finally:
        agent.kill()
        agent.communicate()


def test_a_guarded_agent_is_started_without_setpriv(
    tmp_path: Path, cgroup: AgentCgroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A setpriv that cannot run: an unguarded spawn fails on it, a guarded one never
    # looks for it.
    monkeypatch.setattr(spawn, "setpriv_path", lambda: str(tmp_path / "no-setpriv"))
    argv = ["cat", "/proc/self/cgroup"]
    guarded = spawn.start_agent(
        argv, cwd=tmp_path, env=os.environ, stdin_data=None, cgroup=cgroup, guarded=True
    )
    out, _ = guarded.communicate(timeout=30)
    assert f"0::/{cgroup.path.name}\n".encode() in out
    with pytest.raises(FileNotFoundError):
        spawn.start_agent(argv, cwd=tmp_path, env=os.environ, stdin_data=None, cgroup=cgroup)


def test_a_sentinel_someone_killed_is_replaced_before_the_next_agent(
    tmp_path: Path, cgroup: AgentCgroup
) -> None:
    from autopilot.loop.process import ProcessLimits
    from autopilot.loop.runner import AgentWatch, RunRequest, SubprocessRunner
    from autopilot.store.rundir import AttemptDir

    run_id = cgroup.path.name.removeprefix("autopilot-")
    runner = SubprocessRunner()
    watchers: list[set[int]] = []
    try:
        for number in (1, 2):
            attempt = AttemptDir(tmp_path / f"iter-{number}")
            attempt.path.mkdir()
            watch = AgentWatch(lambda line: None, lambda: False, lambda: False, lambda _: None)
            request = RunRequest(
                ["true"], dict(os.environ), None, tmp_path, attempt, ProcessLimits(), run_id
            )
            result = runner.run(request, watch)
            assert result.exit_code == 0
            watchers.append(set(HELPERS))
            if number == 1:
                (first,) = watchers[0]
                os.kill(first, signal.SIGKILL)
                assert exited_within(first, 30) is not False
                # What reaps an agent's orphans leaves it to its owner: while its pid
                # is a helper's, it names no other process.
                reap_adopted()
                assert not _alive(first) and Path(f"/proc/{first}").exists()
        assert len(watchers[1]) == 1 and watchers[1] != watchers[0]
        assert not Path(f"/proc/{first}").exists()  # reaped once replaced
    finally:
        runner.close()
    assert not HELPERS


def test_no_sentinel_without_a_cgroup_kill_file(tmp_path: Path) -> None:
    assert Sentinel.start(AgentCgroup(tmp_path), "no-kill-file") is None


_LEFT_NOTHING = """
import subprocess, sys, time
from pathlib import Path
from autopilot.loop.agent_group import AgentGroup
from autopilot.loop.cgroup import AgentCgroup
from autopilot.loop.descendants import agent_processes
from autopilot.loop.sentinel import Sentinel
from autopilot.loop.subreaper import become_subreaper

sentinel = Sentinel.start(AgentCgroup(Path(sys.argv[1])), "left-nothing-test")
assert sentinel is not None
assert become_subreaper()
proc = subprocess.Popen(["/bin/sh", "-c", "exit 0"], start_new_session=True)
group = AgentGroup(proc, None, subreaper=True)
while not group.exited():
    time.sleep(0.01)
assert group.left_nothing()  # the sentinel, a child of this process, is not the agent's
assert sentinel.proc.pid not in agent_processes(proc.pid, None)
group.end(kill_grace_seconds=1.0)
assert sentinel.watching()
sentinel.stand_down()
print("ok")
"""


def test_an_agent_is_not_thought_to_have_left_the_sentinel(cgroup: AgentCgroup) -> None:
    assert_ok_alone(_LEFT_NOTHING, str(cgroup.path))


def test_a_stopped_sentinel_is_not_watching_and_is_stood_down_at_once(
    cgroup: AgentCgroup,
) -> None:
    sentinel = Sentinel.start(cgroup, "stopped-test")
    assert sentinel is not None
    os.kill(sentinel.proc.pid, signal.SIGSTOP)
    assert _wait(lambda: not sentinel.watching())
    sentinel.stand_down()  # killed, not waited for
    assert sentinel.proc.returncode == -signal.SIGKILL


def test_no_sentinel_where_no_pipe_can_be_made(
    cgroup: AgentCgroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_fds() -> tuple[int, int]:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "pipe", no_fds)
    assert Sentinel.start(cgroup, "no-fds") is None
