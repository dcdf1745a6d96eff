"""``autopilot service``: the generated systemd unit and launchd agent, their
registration, and the command they run relaunching a run left active."""

from __future__ import annotations

import os
import plistlib
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from autopilot.config import RunConfig
from autopilot.core.vocabulary import RunStatus
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.runtime.service import (
    install,
    plan_service,
    relaunch_command,
    service_environment,
    status,
    systemd_unit,
    uninstall,
)
from autopilot.store.paths import runs_root
from autopilot.store.run_state import PromptSource, RunState
from autopilot.store.state import StateStore, read_state
from tests.cli.test_control import _terminals, _wait_for
from tests.conftest import FakeAgent, run_cli

ENV = {
    "PATH": "/home/u/.npm/bin:/usr/bin",
    "AUTOPILOT_RUNS_DIR": "/home/u/runs",
    "AUTOPILOT_CODEX_BIN": "/opt/codex",
    "ANTHROPIC_API_KEY": "sk-secret",
    "AUTOPILOT_MAX_COST": "5",
}


def test_only_locations_reach_the_service_never_secrets() -> None:
    assert service_environment(ENV) == {
        "AUTOPILOT_CODEX_BIN": "/opt/codex",
        "AUTOPILOT_RUNS_DIR": "/home/u/runs",
        "PATH": "/home/u/.npm/bin:/usr/bin",
    }


def test_the_systemd_user_unit(tmp_path: Path) -> None:
    plan = plan_service("linux", tmp_path, {**ENV, "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    assert plan.path == tmp_path / "cfg" / "systemd" / "user" / "autopilot-relaunch.service"
    text = plan.content.decode()
    python = relaunch_command()[0]
    assert f'ExecStart="{python}" "-m" "autopilot" "relaunch" "--all"' in text
    for line in (
        "Type=oneshot",
        "KillMode=process",  # the runs it starts outlive it
        'Environment="PATH=/home/u/.npm/bin:/usr/bin"',
        'Environment="AUTOPILOT_RUNS_DIR=/home/u/runs"',
        "WantedBy=default.target",
    ):
        assert line in text.splitlines()
    assert "sk-secret" not in text
    assert plan.enable == (
        ("systemctl", "--user", "daemon-reload"),
        ("systemctl", "--user", "enable", "autopilot-relaunch.service"),
    )
    assert plan_service("linux", tmp_path, {}).path.parent == tmp_path / ".config/systemd/user"


def test_unit_words_are_quoted() -> None:
    text = systemd_unit(["/a b/py", 'say "hi"', "100%"], {"PATH": "/x y"})
    assert r'ExecStart="/a b/py" "say \"hi\"" "100%%"' in text
    assert 'Environment="PATH=/x y"' in text


def test_the_launchd_agent(tmp_path: Path) -> None:
    plan = plan_service("darwin", tmp_path, ENV, uid=501)
    assert plan.path == tmp_path / "Library/LaunchAgents/dev.autopilot.relaunch.plist"
    agent = plistlib.loads(plan.content)
    assert agent["Label"] == "dev.autopilot.relaunch"
    assert agent["ProgramArguments"] == list(relaunch_command())
    assert agent["RunAtLoad"] is True and agent["AbandonProcessGroup"] is True
    assert agent["EnvironmentVariables"]["PATH"] == ENV["PATH"]
    assert "ANTHROPIC_API_KEY" not in agent["EnvironmentVariables"]
    assert plan.enable == (("launchctl", "bootstrap", "gui/501", str(plan.path)),)
    assert plan.disable == (("launchctl", "bootout", "gui/501/dev.autopilot.relaunch"),)


def test_other_platforms_are_a_usage_error(tmp_path: Path) -> None:
    from autopilot.errors import UsageError

    with pytest.raises(UsageError, match="systemd"):
        plan_service("win32", tmp_path, {})


def test_install_registers_uninstall_removes_and_failures_are_reported(tmp_path: Path) -> None:
    calls: list[tuple[str, ...]] = []

    def runner(argv: Sequence[str]) -> tuple[int, str]:
        calls.append(tuple(argv))
        return (1, "Failed to connect to bus") if "enable" in argv else (0, "enabled")

    plan = plan_service("linux", tmp_path, {"XDG_CONFIG_HOME": str(tmp_path)})
    problems = install(plan, runner)
    assert plan.path.read_bytes() == plan.content
    assert problems == [
        "systemctl --user enable autopilot-relaunch.service failed (1): Failed to connect to bus"
    ]
    assert status(plan, runner) == (True, "enabled")
    assert uninstall(plan, runner) is True and not plan.path.exists()
    assert calls[-1] == ("systemctl", "--user", "disable", "autopilot-relaunch.service")
    assert uninstall(plan, runner) is False
    assert status(plan, runner) == (False, "not installed")


def test_the_service_command_relaunches_a_run_left_active(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = fake_agent([[{"write_file": "a.txt"}, {"result": "COMPLETE"}]])
    root = runs_root()
    run_id = arm_run(root, RunConfig(), PromptSource(text="work"), repo, SystemClock())
    paused_id = arm_run(root, RunConfig(), PromptSource(text="w"), tmp_path, SystemClock())

    # Left active by a reboot: a status that is relaunched, and a dead driver's pid.
    def left_active(s: RunState) -> None:
        s.status, s.pid, s.pid_start_time = RunStatus.RATE_LIMITED, 1, 1.0

    StateStore(root / run_id / "state.json").update(left_active)
    StateStore(root / paused_id / "state.json").update(
        lambda s: setattr(s, "status", RunStatus.PAUSED)
    )
    plan = plan_service("linux", tmp_path, {**os.environ, **env})
    exec_start = next(
        line for line in plan.content.decode().splitlines() if line.startswith("ExecStart=")
    )
    unit_env = dict(
        shlex.split(line.removeprefix("Environment="))[0].split("=", 1)
        for line in plan.content.decode().splitlines()
        if line.startswith("Environment=")
    )
    done = subprocess.run(
        shlex.split(exec_start.removeprefix("ExecStart=")),
        cwd="/",
        env={"HOME": str(tmp_path), **unit_env, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"relaunching {run_id}" in done.stdout
    assert f"not relaunching {paused_id}: it is paused" in done.stdout
    folder = root / run_id
    _wait_for(lambda: _terminals(folder) != [], 90)
    assert _terminals(folder) == [("complete", "completion_promise")]
    assert read_state(root / paused_id / "state.json").status == "paused"


def test_service_install_from_the_command_line(tmp_path: Path, repo: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/systemctl.log\n')
    (bin_dir / "systemctl").chmod(0o755)
    env = {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }
    done = run_cli(["service", "install"], cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    unit = tmp_path / "cfg" / "systemd" / "user" / "autopilot-relaunch.service"
    assert f"wrote {unit}" in done.stdout and unit.is_file()
    assert (tmp_path / "systemctl.log").read_text().splitlines() == [
        "--user daemon-reload",
        "--user enable autopilot-relaunch.service",
    ]
    assert "installed" in run_cli(["service", "status"], cwd=repo, env=env).stdout
    assert "removed" in run_cli(["service", "uninstall"], cwd=repo, env=env).stdout
    assert not unit.exists()


def test_bare_autopilot_beside_a_run_it_leaves_alone_says_why_not_the_help(
    tmp_path: Path, repo: Path
) -> None:
    root = runs_root()
    paused_id = arm_run(root, RunConfig(), PromptSource(text="w"), repo, SystemClock())
    StateStore(root / paused_id / "state.json").update(
        lambda s: setattr(s, "status", RunStatus.PAUSED)
    )
    done = run_cli([], cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"autopilot: not relaunching {paused_id}: it is paused: start it with autopilot start",
        "autopilot: `autopilot status` shows this project's run; `autopilot --help` the commands",
    ]
