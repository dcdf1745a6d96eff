"""The agent's fast spawn: no ``preexec_fn``, the parent-death signal and the cgroup
still set before the agent runs, a program that cannot start still an ``OSError``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autopilot.loop.cgroup import AgentCgroup
from autopilot.loop.spawn import check_program, fast_spawn_argv, setpriv_path

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


_DRIVER = """
import os, sys
from pathlib import Path
from autopilot.loop.process import ProcessLimits, run_agent_process
folder = Path(sys.argv[1])
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


@needs_setpriv
def test_the_agent_dies_with_its_driver(tmp_path: Path) -> None:
    """kill -9 of the driver ends the agent it started (its parent-death signal)."""
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(tmp_path)])
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
