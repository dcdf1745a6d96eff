"""A deleted lock file never lets a second driver in, nor a stop kill a live agent.

An agent can delete files it can find; liveness is decided from the recorded driver
process (pid and identity), so deleting ``driver.lock`` or ``<runs-root>/.locks``
changes nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil

from tests.cli.test_control import (
    _events,
    _run_dir,
    _sleeping_run,
    _start,
    _state,
    _terminals,
    _wait_for,
)
from tests.conftest import FakeAgent, run_cli


def test_stop_with_driver_lock_deleted_does_not_kill_the_live_agent(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Long enough that the stop lands while it works, however slow the machine.
    env = fake_agent([[{"sleep": 8.0}, {"result": "step done"}]])
    proc = _start(repo, env, "--max-iterations", "5", "--stagnation-limit", "0")
    folder = _run_dir(tmp_path)
    _wait_for(lambda: _state(folder).get("agentPid") is not None)
    agent_pid = _state(folder)["agentPid"]
    assert isinstance(agent_pid, int)
    (folder / "driver.lock").unlink()
    done = run_cli(["stop", folder.name], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "stop requested" in done.stdout and "no driver" not in done.stdout
    assert psutil.pid_exists(agent_pid)  # the agent was not touched
    assert proc.wait(timeout=60) == 130
    ends = [e for e in _events(folder) if e["type"] == "iteration_end"]
    # It finished its iteration on its own: not ended by the driver, nor by stop.
    assert [(e["outcome"], e["endedBy"]) for e in ends] == [("ok", "exit")]
    assert _terminals(folder) == [("abort", "user_stopped")]


def test_start_with_driver_lock_deleted_is_refused_while_the_driver_lives(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env, proc, folder = _sleeping_run(tmp_path, repo, fake_agent, agent_started=True)
    (folder / "driver.lock").unlink()
    done = run_cli(["start", folder.name, "--plain"], cwd=repo, env=env)
    assert done.returncode == 4
    assert "still being driven" in done.stderr or "already being driven" in done.stderr
    assert run_cli(["stop", "--now", folder.name], cwd=repo).returncode == 0
    assert proc.wait(timeout=30) == 130
    assert _terminals(folder) == [("abort", "user_stopped")]
    assert [e["type"] for e in _events(folder)].count("driver_start") == 1


def test_second_run_is_refused_with_the_locks_folder_deleted(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env, proc, folder = _sleeping_run(tmp_path, repo, fake_agent, agent_started=True)
    shutil.rmtree(tmp_path / "runs" / ".locks")
    (repo / "sub").mkdir()
    second = run_cli(["run", "-p", "other"], cwd=repo / "sub", env=env)
    assert second.returncode == 4, second.stdout + second.stderr
    assert folder.name in second.stderr and "active" in second.stderr
    runs = [p for p in (tmp_path / "runs").iterdir() if p.is_dir() and p.name[0] != "."]
    assert runs == [folder]  # nothing was armed
    assert run_cli(["stop", "--now", folder.name], cwd=repo).returncode == 0
    proc.wait(timeout=30)
