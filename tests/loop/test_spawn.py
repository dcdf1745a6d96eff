"""The agent's fast spawn: no ``preexec_fn``, the parent-death signal and the cgroup
still set before the agent runs, a program that cannot start still an ``OSError``."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autopilot.loop import spawn
from autopilot.loop.cgroup import AgentCgroup
from autopilot.loop.spawn import check_program, fast_spawn_argv, find_setpriv, setpriv_path

needs_setpriv = pytest.mark.skipif(setpriv_path() is None, reason="no setpriv here")


def test_a_missing_program_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        check_program("no-such-agent-anywhere", cwd=tmp_path, env={"PATH": str(tmp_path)})
    with pytest.raises(FileNotFoundError):
        check_program(str(tmp_path / "gone"), cwd=tmp_path, env={})


def test_a_file_that_is_not_executable_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(PermissionError):
        check_program("./agent.sh", cwd=tmp_path, env={})
    with pytest.raises(PermissionError):
        check_program("agent.sh", cwd=tmp_path, env={"PATH": str(tmp_path)})


def test_programs_are_found_as_exec_finds_them(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "agent.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    check_program("agent.sh", cwd=tmp_path, env={"PATH": f"/nowhere:{script.parent}"})
    check_program("agent.sh", cwd=tmp_path, env={"PATH": "bin"})  # relative to cwd
    check_program("bin/agent.sh", cwd=tmp_path, env={})
    check_program(str(script), cwd=Path("/"), env={})


@needs_setpriv
def test_the_fast_argv_keeps_the_agents_argv_whole(tmp_path: Path) -> None:
    argv = ["/bin/sh", "-c", 'printf "%s|" "$0" "$@"', "zero", "--help", "-- x"]
    fast = fast_spawn_argv(argv, cwd=tmp_path, env=os.environ)
    assert fast is not None and fast[-len(argv) :] == argv
    done = subprocess.run(fast, capture_output=True, text=True, check=True)
    assert done.stdout == "zero|--help|-- x|"


_OLD_SETPRIV = """#!/bin/sh
echo "setpriv: unrecognized option '$1'" >&2
exit 1
"""
"""What util-linux's ``setpriv`` before 2.33 answers to ``--pdeathsig``."""

_WORKING_SETPRIV = """#!/bin/sh
[ "$1" = --version ] && exit 0
[ "$1 $2 $3" = "--pdeathsig KILL --" ] || exit 1
shift 3
exec "$@"
"""


def _program(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_no_setpriv_where_there_is_none(tmp_path: Path) -> None:
    assert find_setpriv([str(tmp_path / "missing"), str(tmp_path)]) is None


def test_a_setpriv_that_cannot_set_the_signal_is_not_used(tmp_path: Path) -> None:
    _program(tmp_path / "old", "setpriv", _OLD_SETPRIV)
    working = _program(tmp_path / "new", "setpriv", _WORKING_SETPRIV)
    assert find_setpriv([str(tmp_path / "old"), str(tmp_path / "new")]) is None
    assert find_setpriv([str(tmp_path / "new"), str(tmp_path / "old")]) == str(working)


_DRIVER = """
import os, sys
from pathlib import Path
from autopilot.loop import spawn
from autopilot.loop.process import ProcessLimits, run_agent_process
folder = Path(sys.argv[1])
if len(sys.argv) > 2:  # where setpriv is looked for
    spawn._SYSTEM_DIRS = (sys.argv[2],)
run_agent_process(
    ["sleep", "600"], cwd=folder, env=dict(os.environ), stdin_data=None,
    stdout_path=folder / "out", stderr_path=folder / "err", on_line=lambda line: None,
    result_seen=lambda: False, should_kill=lambda: False, limits=ProcessLimits(),
    on_start=lambda pid: (folder / "pid").write_text(str(pid)),
)
"""


def _wait(condition: object, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return False


def _agent_dies_with_its_driver(tmp_path: Path, *setpriv_folder: str) -> None:
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(tmp_path), *setpriv_folder])
    try:
        assert _wait(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text())
        agent = int((tmp_path / "pid").read_text())
        assert _wait(lambda: Path(f"/proc/{agent}/cmdline").read_bytes().startswith(b"sleep"))
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        assert _wait(lambda: not _alive(agent))
    finally:
        driver.kill()
        driver.wait()


@needs_setpriv
def test_the_agent_dies_with_its_driver(tmp_path: Path) -> None:
    """kill -9 of the driver ends the agent it started (its parent-death signal)."""
    _agent_dies_with_its_driver(tmp_path)


@pytest.mark.parametrize("setpriv", ["none", "too old"])
def test_without_a_usable_setpriv_the_agent_starts_and_dies_with_its_driver(
    tmp_path: Path, setpriv: str
) -> None:
    """The spawn falls back to setting the signal between fork and exec."""
    folder = tmp_path / "sbin"
    folder.mkdir()
    if setpriv == "too old":
        _program(folder, "setpriv", _OLD_SETPRIV)
    _agent_dies_with_its_driver(tmp_path, str(folder))


@needs_setpriv
def test_the_agent_runs_in_the_runs_cgroup(tmp_path: Path) -> None:
    cgroup = AgentCgroup.for_run(f"spawn-test-{time.time_ns()}", {})
    if cgroup is None:
        pytest.skip("this machine gives this user no cgroup v2")
    try:
        argv = ["cat", "/proc/self/cgroup"]
        fast = fast_spawn_argv(
            argv, cwd=tmp_path, env=os.environ, cgroup_procs=cgroup.path / "cgroup.procs"
        )
        assert fast is not None
        done = subprocess.run(fast, capture_output=True, text=True, check=True)
        own = [line for line in done.stdout.splitlines() if line.startswith("0::")]
        assert own[0].endswith("/" + cgroup.path.name)
        assert done.stderr == ""
    finally:
        cgroup.remove()


def test_a_runner_keeps_the_runs_cgroup_between_agents_and_removes_it_on_close(
    tmp_path: Path,
) -> None:
    from autopilot.loop.process import ProcessLimits
    from autopilot.loop.runner import AgentWatch, RunRequest, SubprocessRunner
    from autopilot.store.rundir import AttemptDir

    run_id = f"runner-test-{time.time_ns()}"
    probe = AgentCgroup.for_run(run_id, {})
    if probe is None:
        pytest.skip("this machine gives this user no cgroup v2")
    runner = SubprocessRunner()
    before = _own_cgroup()
    try:
        for number in (1, 2):
            attempt = AttemptDir(tmp_path / f"iter-{number}")
            attempt.path.mkdir()
            lines: list[str] = []
            watch = AgentWatch(lines.append, lambda: False, lambda: False, lambda _: None)
            argv = ["cat", "/proc/self/cgroup"]
            limits = ProcessLimits()
            request = RunRequest(argv, dict(os.environ), None, tmp_path, attempt, limits, run_id)
            runner.run(request, watch)
            # The agent ran in the run's cgroup, which is empty now and kept; this
            # process, which moved in for the spawn, is back in its own.
            assert any(line.endswith("/" + probe.path.name) for line in lines)
            assert probe.path.is_dir() and probe.pids() == []
            assert _own_cgroup() == before
        runner.close()
        assert not probe.path.exists()
    finally:
        probe.remove()


def _own_cgroup() -> str:
    text = Path("/proc/self/cgroup").read_text()
    return next(line for line in text.splitlines() if line.startswith("0::"))


def _run_cgroup(label: str) -> AgentCgroup:
    """A new run's cgroup (the test is skipped where this user may have none)."""
    cgroup = AgentCgroup.for_run(f"{label}-{time.time_ns()}", {})
    if cgroup is None:
        pytest.skip("this machine gives this user no cgroup v2")
    return cgroup


def _assert_runs_an_agent_in(cgroup: AgentCgroup, tmp_path: Path) -> None:
    """An agent started with ``cgroup`` runs to its end in it (and the cgroup is kept)."""
    from autopilot.loop.process import ProcessLimits, run_agent_process

    lines: list[str] = []
    result = run_agent_process(
        ["cat", "/proc/self/cgroup"],
        cwd=tmp_path,
        env=os.environ,
        stdin_data=None,
        stdout_path=tmp_path / "out",
        stderr_path=tmp_path / "err",
        on_line=lines.append,
        result_seen=lambda: False,
        should_kill=lambda: False,
        limits=ProcessLimits(),
        cgroup=cgroup,
        keep_cgroup=True,
    )
    assert result.exit_code == 0
    assert any(line.endswith("/" + cgroup.path.name) for line in lines)


@needs_setpriv
def test_a_driver_that_cannot_leave_the_runs_cgroup_is_not_killed_with_its_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autopilot.loop import cgroup as cgroup_module

    cgroup = _run_cgroup("stuck-test")
    before = _own_cgroup()
    home = cgroup.path.parent / "cgroup.procs"
    real = cgroup_module._write_pid
    monkeypatch.setattr(cgroup_module, "_write_pid", lambda procs: procs != home and real(procs))
    try:
        # The agent ran in the cgroup; this process, stuck in it, was not killed with
        # it, and gives it to no agent from then on.
        _assert_runs_an_agent_in(cgroup, tmp_path)
        assert not cgroup.usable
    finally:
        monkeypatch.undo()
        assert real(home)
        cgroup.remove()
    assert _own_cgroup() == before


@needs_setpriv
def test_the_driver_does_not_step_into_a_frozen_runs_cgroup(tmp_path: Path) -> None:
    cgroup = _run_cgroup("frozen-test")
    freeze = cgroup.path / "cgroup.freeze"
    if not freeze.exists():
        pytest.skip("this kernel has no cgroup.freeze")
    before = _own_cgroup()
    freeze.write_text("1")
    try:
        assert not cgroup.enter()
        assert _own_cgroup() == before
        freeze.write_text("0")
        _assert_runs_an_agent_in(cgroup, tmp_path)
        assert _own_cgroup() == before
    finally:
        freeze.write_text("0")
        cgroup.remove()


def test_an_early_trial_runs_once_and_the_spawn_waits_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trials: list[threading.Thread] = []

    @functools.cache
    def trial() -> str | None:
        trials.append(threading.current_thread())
        time.sleep(0.05)
        return "/usr/bin/setpriv"

    monkeypatch.setattr(spawn, "_setpriv_path", trial)
    monkeypatch.setattr(spawn, "_early", [])
    monkeypatch.setenv("AUTOPILOT_CGROUP", "off")  # no sentinel: setpriv is wanted
    spawn.start_trial()
    spawn.start_trial()  # once only
    assert len(spawn._early) == 1
    assert setpriv_path() == "/usr/bin/setpriv"  # waited for the thread's answer
    assert not spawn._early[0].is_alive()
    assert trials == [spawn._early[0]]


def test_no_early_trial_where_a_sentinel_will_likely_watch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the runs' cgroups can be made, agents are born in a watched cgroup and
    need no ``setpriv``: none is tried while the driver starts, only at a spawn that
    needs it."""
    monkeypatch.setattr(spawn, "_early", [])
    monkeypatch.setattr(spawn, "cgroup_likely", lambda environ: True)
    spawn.start_trial()
    assert spawn._early == []
