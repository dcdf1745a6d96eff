"""What an agent can do to the driver from where it runs: write into the run's log,
plant git configuration in the work tree, leave processes behind."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autopilot.loop.cgroup import AgentCgroup
from autopilot.store.events import read_events
from autopilot.store.state import read_state_json
from tests.cli.test_control import _run_dir, _start, _wait_for
from tests.conftest import FakeAgent, run_cli
from tests.loop.test_descendants import KINDS, recorded, spawner, survivors, wait_for_survivors
from tests.loop.test_sentinel import sentinels_of


def test_a_half_line_the_agent_appends_to_the_log_glues_nothing(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Written after the agent's last tool call, so the next event is its iteration_end.
    log = '"$AUTOPILOT_RUNS_DIR/$AUTOPILOT_RUN_ID/events.jsonl"'
    half = f"""(sleep 0.5; printf '{{"type":"iteration_end","ts":1,"iterat' >> {log}) >/dev/null 2>&1 &"""
    env = fake_agent([[{"shell": half}, {"sleep": 1.0}, {"result": "step"}]])
    done = run_cli(
        ["run", "-p", "x", "--max-iterations", "3", "--stagnation-limit", "0", "--plain"],
        cwd=repo,
        env=env,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    events = list(read_events(_run_dir(tmp_path) / "events.jsonl"))
    for kind in ("iteration_start", "session_attached", "usage_update", "iteration_end"):
        assert [e["iteration"] for e in events if e["type"] == kind] == [1, 2, 3], kind
    assert [e["reason"] for e in events if e["type"] == "abort"] == ["max_iterations"]


# -- processes: nothing left behind ----------------------------------------------------


def _cgroup_env(mode: str) -> dict[str, str]:
    if mode == "off":
        return {"AUTOPILOT_CGROUP": "off"}
    probe = AgentCgroup.for_run(f"probe-{time.time_ns()}", {})
    if probe is None:
        pytest.skip("this machine gives this user no cgroup v2")
    probe.remove()
    return {}


@pytest.fixture
def kids_file(tmp_path: Path) -> Iterator[Path]:
    """Where the grandchildren write their pids; any left are killed at the end."""
    path = tmp_path / "kids"
    path.touch()
    yield path
    for process in survivors(recorded(path)):
        process.kill()


@pytest.mark.parametrize("cgroup", ["on", "off"])
def test_no_grandchild_outlives_a_normal_run(
    repo: Path, fake_agent: FakeAgent, kids_file: Path, cgroup: str
) -> None:
    env = fake_agent([[{"shell": spawner(kids_file)}, {"result": "Done. COMPLETE"}]])
    done = run_cli(["run", "-p", "x", "--plain"], cwd=repo, env={**env, **_cgroup_env(cgroup)})
    assert done.returncode == 0, done.stdout + done.stderr
    kids = recorded(kids_file)
    assert len(kids) == len(KINDS)
    assert wait_for_survivors(kids, 0) == []


@pytest.mark.parametrize("cgroup", ["on", "off"])
def test_no_grandchild_outlives_stop_now(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, kids_file: Path, cgroup: str
) -> None:
    env = fake_agent([[{"shell": spawner(kids_file)}, {"sleep": 600}]])
    proc = _start(repo, {**env, **_cgroup_env(cgroup)})
    folder = _run_dir(tmp_path)
    _wait_for(lambda: len(kids_file.read_text().split()) == len(KINDS))
    kids = recorded(kids_file)
    assert run_cli(["stop", "--now", folder.name], cwd=repo).returncode == 0
    assert proc.wait(timeout=60) == 130
    assert wait_for_survivors(kids, 0) == []


def _relaunch_after_a_kill(
    tmp_path: Path,
    repo: Path,
    fake_agent: FakeAgent,
    kids_file: Path,
    kinds: tuple[str, ...],
    cgroup: str,
) -> None:
    """Kill the driver while the agent's descendants of ``kinds`` run: without a cgroup
    (or once someone killed the run's sentinel) the crash leaves every one of them, and
    ``start`` relaunching the run ends them all; in the run's cgroup, its sentinel ends
    them all at the crash."""
    env = fake_agent(
        [[{"shell": spawner(kids_file, kinds)}, {"sleep": 600}], [{"result": "COMPLETE"}]]
    )
    env.update(_cgroup_env("off" if cgroup == "off" else "on"))
    proc = _start(repo, env)
    folder = _run_dir(tmp_path)
    _wait_for(lambda: len(kids_file.read_text().split()) == len(kinds))
    kids = recorded(kids_file)
    if cgroup == "sentinel killed":
        # The driver stopped first: its heartbeat cannot start another sentinel.
        proc.send_signal(signal.SIGSTOP)
        (sentinel,) = sentinels_of(proc.pid)
        os.kill(sentinel, signal.SIGKILL)
    proc.kill()
    proc.wait()
    if cgroup != "on":
        assert len(wait_for_survivors(kids, len(kinds))) == len(kinds)  # the crash left them
    else:
        assert wait_for_survivors(kids, 0) == []  # the sentinel ended them
    done = run_cli(["start", folder.name, "--plain"], cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert wait_for_survivors(kids, 0) == []
    # The relaunch says the cut-short iteration is charged, not "0 spent" alone.
    said = f"relaunching {folder.name} after iteration 1, cut short by the driver's end"
    assert f"{said}; it counts (0 spent before it)" in done.stdout


@pytest.mark.parametrize("cgroup", ["on", "sentinel killed", "off"])
def test_no_grandchild_outlives_a_killed_driver_once_it_is_relaunched(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, kids_file: Path, cgroup: str
) -> None:
    # Without a cgroup, a grandchild with no run id, no session and no parent of ours
    # is out of reach once the driver is dead: that one needs the cgroup.
    kinds = KINDS if cgroup != "off" else KINDS[:4]
    _relaunch_after_a_kill(tmp_path, repo, fake_agent, kids_file, kinds, cgroup)


def test_a_lone_env_i_grandchild_in_the_agents_group_outlives_no_relaunch(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, kids_file: Path
) -> None:
    # No cgroup, and nothing left carries the run id: the agent's own process group
    # (its leader died with the driver) is all that names this grandchild.
    _relaunch_after_a_kill(tmp_path, repo, fake_agent, kids_file, ("env-i",), "off")


def test_no_grandchild_outlives_a_killed_daemon_its_supervisor_restarts(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, kids_file: Path
) -> None:
    # No cgroup: the grandchild that shed the run id, its session and its parent is
    # re-parented to the supervisor (a subreaper too) when the daemon dies.
    env = fake_agent(
        [[{"shell": spawner(kids_file)}, {"sleep": 600}], [{"result": "COMPLETE"}]],
        select="invocation",
    )
    env.update(_cgroup_env("off"))
    done = run_cli(["run", "--detach", "-p", "x"], cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = _run_dir(tmp_path)
    _wait_for(lambda: len(kids_file.read_text().split()) == len(KINDS), 60)
    kids = recorded(kids_file)
    os.kill(read_state_json(folder / "state.json")["pid"], signal.SIGKILL)
    _wait_for(lambda: read_state_json(folder / "state.json").get("terminated") is True, 120)
    assert read_state_json(folder / "state.json")["status"] == "completed"
    assert wait_for_survivors(kids, 0) == []


# -- git: the driver's own calls cannot be hijacked -------------------------------------


def test_an_fsmonitor_the_agent_plants_never_runs_in_the_drivers_git_calls(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    ran = tmp_path / "fsmonitor-ran"
    hook = tmp_path / "fsmonitor"
    hook.write_text(f"#!/bin/sh\ntouch {ran}\nsleep 60\n")
    hook.chmod(0o755)
    env = fake_agent(
        [
            [{"shell": f"git config core.fsmonitor {hook}"}, {"result": "step"}],
            [{"write_file": "b.txt"}, {"result": "COMPLETE"}],
        ]
    )
    done = run_cli(["run", "-p", "x", "--plain"], cwd=repo, env=env, timeout=100)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not ran.exists()


def test_a_commit_on_another_branch_is_observed_and_is_progress(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    work = (
        "git checkout -q -b side && echo x > side.txt && git add side.txt && "
        "git commit -q -m 'side work' && git checkout -q -"
    )
    env = fake_agent([[{"shell": work}, {"result": "step"}]])
    done = run_cli(["run", "-p", "x", "--max-iterations", "1", "--plain"], cwd=repo, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    events = list(read_events(_run_dir(tmp_path) / "events.jsonl"))
    assert [e["subject"] for e in events if e["type"] == "commit_observed"] == ["side work"]
    (end,) = [e for e in events if e["type"] == "iteration_end"]
    assert (end["commits"], end["progress"]) == (1, "made")
