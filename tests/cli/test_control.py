"""Control from another terminal, signals, crashes and restarts, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.conftest import FakeAgent, read_jsonl, run_cli

SLOW_ITERATION = [{"shell": "date +%N >> progress.txt"}, {"sleep": 1.0}, {"result": "step done"}]


def _start(repo: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "autopilot", "run", "-p", "work", *args],
        cwd=repo,
        env=dict(os.environ, **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def _run_dir(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    _wait_for(lambda: root.exists() and any(p.name.startswith("repo-") for p in root.iterdir()))
    return next(p for p in root.iterdir() if p.name.startswith("repo-"))


def _events(folder: Path) -> list[dict[str, object]]:
    path = folder / "events.jsonl"
    return read_jsonl(path) if path.exists() else []


def _types(folder: Path) -> list[object]:
    return [e["type"] for e in _events(folder)]


def _state(folder: Path) -> dict[str, object]:
    try:
        loaded: dict[str, object] = json.loads((folder / "state.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return loaded


def _terminals(folder: Path) -> list[tuple[object, object]]:
    return [(e["type"], e["reason"]) for e in _events(folder) if e["type"] in ("complete", "abort")]


def _sleeping_run(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, *, agent_started: bool = False
) -> tuple[dict[str, str], subprocess.Popen[str], Path]:
    """A run in ``repo`` whose agent sleeps for 10 minutes, once its first iteration has
    started (``agent_started``: once its agent's pid is recorded): the agent's
    environment, the driver's process and the run's folder."""
    env = fake_agent([[{"sleep": 600}]])
    proc = _start(repo, env)
    folder = _run_dir(tmp_path)
    if agent_started:
        _wait_for(lambda: _state(folder).get("agentPid") is not None)
    else:
        _wait_for(lambda: "iteration_start" in _types(folder))
    return env, proc, folder


def test_pause_resume_stop_from_another_terminal(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([SLOW_ITERATION])
    proc = _start(repo, env, "--max-iterations", "50", "--stagnation-limit", "0")
    folder = _run_dir(tmp_path)
    _wait_for(lambda: "iteration_start" in _types(folder))
    assert run_cli(["pause"], cwd=repo).returncode == 0  # RUN omitted: this project's newest
    _wait_for(lambda: _state(folder).get("status") == "paused")
    iterations = _types(folder).count("iteration_start")
    time.sleep(2.0)
    assert _types(folder).count("iteration_start") == iterations  # nothing starts while paused
    assert run_cli(["resume", folder.name[:12]], cwd=tmp_path).returncode == 0
    _wait_for(lambda: "resume" in _types(folder))
    done = run_cli(["stop", folder.name], cwd=tmp_path)
    assert done.returncode == 0 and "stop requested" in done.stdout
    assert proc.wait(timeout=30) == 130
    assert _terminals(folder) == [("abort", "user_stopped")]
    state = _state(folder)
    assert state["terminated"] is True and state["status"] == "stopped"
    assert isinstance(state["totalPausedMs"], int) and state["totalPausedMs"] >= 1500
    # The agent finished its iteration; its step was recorded, then the run ended.
    last = _events(folder)[-3:]
    assert [e["type"] for e in last] == ["iteration_end", "decision_applied", "abort"]
    assert last[0]["outcome"] == "ok"


def test_first_sigint_stops_at_the_boundary_second_ends_the_agent(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"shell": "date +%N >> p.txt"}, {"sleep": 3}, {"result": "ok"}]])
    proc = _start(repo, env, "--max-iterations", "20")
    folder = _run_dir(tmp_path)
    _wait_for(lambda: "iteration_start" in _types(folder))
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    ends = [e for e in _events(folder) if e["type"] == "iteration_end"]
    assert [e["outcome"] for e in ends] == ["ok"]
    assert _terminals(folder) == [("abort", "user_stopped")]

    env = fake_agent([[{"sleep": 600}]])
    proc = _start(repo, env, "--max-iterations", "20")
    _wait_for(lambda: len(list((tmp_path / "runs").glob("repo-*"))) == 2)
    folder = max((tmp_path / "runs").glob("repo-*"), key=lambda p: p.name)
    _wait_for(lambda: _state(folder).get("agentPid") is not None)
    agent_pid = _state(folder)["agentPid"]
    assert isinstance(agent_pid, int)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert [e["outcome"] for e in _events(folder) if e["type"] == "iteration_end"] == ["killed"]
    assert not psutil.pid_exists(agent_pid) or psutil.Process(agent_pid).status() == "zombie"


def test_stop_now_ends_the_agent(tmp_path: Path, repo: Path, fake_agent: FakeAgent) -> None:
    _env, proc, folder = _sleeping_run(tmp_path, repo, fake_agent, agent_started=True)
    assert run_cli(["stop", "--now"], cwd=repo).returncode == 0
    assert proc.wait(timeout=30) == 130
    assert [e["outcome"] for e in _events(folder) if e["type"] == "iteration_end"] == ["killed"]
    assert _terminals(folder) == [("abort", "user_stopped")]


def test_kill_9_then_restart_keeps_budgets(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Issue mikeyobrien/ralph-orchestrator#244: counters live in state.json and survive a crash of the driver.
    env = fake_agent(
        [[{"shell": "date +%N >> p.txt"}, {"result": "step", "cost_usd": 0.5}, {"sleep": 0.2}]]
    )
    proc = _start(repo, env, "--max-iterations", "5", "--max-cost", "100")
    folder = _run_dir(tmp_path)
    _wait_for(lambda: _types(folder).count("iteration_end") >= 2)
    # Two iterations in state.json (which follows the log), and the next one running.
    _wait_for(lambda: _spent(folder) >= 2 and _state(folder).get("agentPid") is not None)
    agent_pid = _state(folder)["agentPid"]
    proc.kill()
    proc.wait()
    assert isinstance(agent_pid, int)
    _wait_for(
        lambda: not psutil.pid_exists(agent_pid) or psutil.Process(agent_pid).status() == "zombie"
    )
    spent_before = _state(folder)["spend"]["iterations"]  # type: ignore[index]
    assert spent_before >= 2
    status = run_cli(["status", folder.name], cwd=repo)
    assert "driver     gone" in status.stdout
    done = run_cli(["start", folder.name, "--foreground"], cwd=repo, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    state = _state(folder)
    assert state["spend"]["iterations"] == 5  # type: ignore[index]
    ends = [e for e in _events(folder) if e["type"] == "iteration_end"]
    charged = sum(float(e.get("iterationCostUsd") or 0) for e in ends)  # type: ignore[arg-type]
    # The attempt the kill interrupted counts; its cost only if it printed its result.
    assert state["spend"]["costUsd"] == pytest.approx(charged)  # type: ignore[index]
    assert charged in (2.0, 2.5)
    assert _terminals(folder) == [("abort", "max_iterations")]
    assert _types(folder).count("driver_start") == 2


def test_stop_without_a_driver_ends_the_run(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    _env, proc, folder = _sleeping_run(tmp_path, repo, fake_agent)
    proc.kill()
    proc.wait()
    done = run_cli(["stop", folder.name], cwd=repo)
    assert done.returncode == 0 and "no driver" in done.stdout
    assert _terminals(folder) == [("abort", "user_stopped")]
    again = run_cli(["stop", folder.name], cwd=repo)
    assert again.returncode == 2 and "already ended" in again.stderr
    assert _terminals(folder) == [("abort", "user_stopped")]


def test_concurrent_pause_and_stop_lose_nothing(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # The iteration lasts until every command has returned, however slow the machine.
    held = [{"shell": "while [ ! -e release ]; do sleep 0.05; done"}, {"result": "step done"}]
    env = fake_agent([held])
    proc = _start(repo, env, "--stagnation-limit", "0")
    folder = _run_dir(tmp_path)
    _wait_for(lambda: "iteration_start" in _types(folder))
    version = _state(folder)["version"]
    others = [
        subprocess.Popen(
            [sys.executable, "-m", "autopilot", cmd, folder.name],
            cwd=repo,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for cmd in ("pause", "stop", "pause", "resume", "pause")
    ]
    codes = [p.wait(timeout=60) for p in others]
    (repo / "release").touch()
    assert codes == [0] * 5
    state = _state(folder)
    assert state["stopRequested"] is True
    assert isinstance(version, int) and isinstance(state["version"], int)
    assert state["version"] >= version + 5
    assert proc.wait(timeout=30) == 130


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "-p", "x", "--bogus"], "No such option"),
        (["run", "-p", "x", "--max-iterations", "ten"], "--max-iterations must be a whole number"),
        (["run", "-p", "x", "--max-iterations", "-3"], "--max-iterations must be"),
        (["run", "-p", "x", "--max-duration", "soon"], "--max-duration must be a duration"),
        (["run", "-p", "x", "--max-cost", "nan"], "--max-cost must be a non-negative number"),
        (["run", "-p", "x", "fix", "the", "bug"], "unexpected extra argument"),
        (["run"], "exactly one of -p TEXT, -f FILE, --backlog, --self-improve or --grow-project"),
        (["run", "-f", "missing.md"], "cannot read prompt file"),
        (["run", "-p", "x", "--agent", "nobody"], "unknown agent"),
        (["status", "no-such-run"], "no run matches"),
        (["replay", "../etc"], "invalid run reference"),
        (["list", "--limit", "0"], "--limit must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, repo: Path, args: list[str], message: str
) -> None:
    done = run_cli(args, cwd=repo)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert message.lower() in done.stderr.lower()
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("repo-*"))


def test_corrupt_state_is_reported_and_left_alone(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"result": "COMPLETE"}]])
    assert run_cli(["run", "-p", "x"], cwd=repo, env=env).returncode == 0
    folder = next((tmp_path / "runs").glob("repo-*"))
    (folder / "state.json").write_text('{"runId": "torn')
    for command in (["status", folder.name], ["pause", folder.name], ["start", folder.name]):
        done = run_cli(command, cwd=repo)
        assert done.returncode == 4, done.stderr
        assert done.stderr.count("\n") == 1 and "corrupt" in done.stderr
    assert (folder / "state.json").read_text() == '{"runId": "torn'


def test_unusable_runs_root(tmp_path: Path, repo: Path, fake_agent: FakeAgent) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    env = {**fake_agent([[{"result": "COMPLETE"}]]), "AUTOPILOT_RUNS_DIR": str(blocker)}
    done = run_cli(["run", "-p", "x"], cwd=repo, env=env)
    assert done.returncode == 4
    assert done.stderr.count("\n") == 1 and "not a directory" in done.stderr


def test_project_config_is_data_never_executed(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Issue frankbria/ralph-claude-code#346: a payload in the project's config is never run.
    marker = tmp_path / "pwned"
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "config.toml").write_text(f"touch {marker}\n")
    done = run_cli(["run", "-p", "x"], cwd=repo, env=fake_agent([[{"result": "COMPLETE"}]]))
    assert done.returncode == 2 and "not valid TOML" in done.stderr
    assert not marker.exists()
    (repo / ".autopilot" / "config.toml").write_text(
        'max_iterations = "$(touch ' + str(marker) + ')"\n'
    )
    done = run_cli(["run", "-p", "x"], cwd=repo)
    assert done.returncode == 2 and "must be a whole number" in done.stderr
    assert not marker.exists()
    (repo / ".autopilot" / "config.toml").write_text("max_iterations = 2\nbogus = 1\n")
    done = run_cli(["run", "-p", "x"], cwd=repo)
    assert done.returncode == 2 and "unknown setting 'bogus'" in done.stderr


def test_config_precedence_flag_env_file(tmp_path: Path, repo: Path, fake_agent: FakeAgent) -> None:
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "config.toml").write_text("max_iterations = 2\nstagnation_limit = 7\n")
    env = {**fake_agent([[{"result": "COMPLETE"}]]), "AUTOPILOT_STAGNATION_LIMIT": "5"}
    done = run_cli(["run", "-p", "x", "--min-iterations", "1"], cwd=repo, env=env)
    assert done.returncode == 0
    assert "iterations 1..2" in done.stdout and "stagnation limit 5" in done.stdout


def test_list_status_replay_where(tmp_path: Path, repo: Path, fake_agent: FakeAgent) -> None:
    env = fake_agent([[{"result": "COMPLETE", "cost_usd": 0.25}]])
    assert run_cli(["run", "-p", "x"], cwd=repo, env=env).returncode == 0
    assert run_cli(["run", "-p", "y"], cwd=repo, env=env).returncode == 0
    rows = [json.loads(line) for line in run_cli(["list", "--json"], cwd=repo).stdout.splitlines()]
    assert len(rows) == 2 and rows[0]["ts"] > rows[1]["ts"]  # newest first
    assert all(row["status"] == "completed" for row in rows)
    listed = run_cli(["list", "--limit", "1"], cwd=repo).stdout.splitlines()
    assert len(listed) == 2  # a header and one run
    assert rows[0]["runId"] in listed[1] and "completed (completion_promise)" in listed[1]
    status = json.loads(run_cli(["status", "--json"], cwd=repo).stdout)
    assert status["state"]["runId"] == rows[0]["runId"]
    assert status["snapshot"]["status"] == "complete" and status["snapshot"]["costUsd"] == 0.25
    replay = run_cli(["replay", rows[1]["runId"]], cwd=repo)
    assert replay.returncode == 0 and "complete reason=completion_promise" in replay.stdout
    assert run_cli(["where"], cwd=repo).stdout.strip() == str((tmp_path / "runs").resolve())
    version = run_cli(["--version"], cwd=repo)
    assert version.returncode == 0 and version.stdout.startswith("autopilot ")


def _spent(folder: Path) -> int:
    spend = _state(folder).get("spend")
    iterations = spend.get("iterations") if isinstance(spend, dict) else None
    return iterations if isinstance(iterations, int) else 0


@pytest.mark.parametrize(
    ("limit_args", "step", "reason", "expected_iterations"),
    [
        (["--max-cost", "1.0"], {"result": "step", "cost_usd": 0.4}, "max_cost", 3),
        (
            ["--max-tokens", "250"],
            {"result": "step", "input_tokens": 60, "output_tokens": 40},
            "max_tokens",
            3,
        ),
    ],
)
def test_spend_budget_holds_across_kill_9(
    tmp_path: Path,
    repo: Path,
    fake_agent: FakeAgent,
    limit_args: list[str],
    step: dict[str, object],
    reason: str,
    expected_iterations: int,
) -> None:
    env = fake_agent([[{"shell": "date +%N >> p.txt"}, step, {"sleep": 0.5}]])
    proc = _start(repo, env, "--max-iterations", "50", *limit_args)
    folder = _run_dir(tmp_path)
    # The log gets a step's events before state.json gets its spend: wait for both.
    _wait_for(lambda: _types(folder).count("iteration_end") >= 1)
    _wait_for(lambda: _spent(folder) >= 1)
    proc.kill()
    proc.wait()
    assert _spent(folder) in (1, 2)
    done = run_cli(["start", folder.name, "--foreground"], cwd=repo, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    state = _state(folder)
    ends = [e for e in _events(folder) if e["type"] == "iteration_end"]
    # Every attempt counts, the one the crash interrupted included.
    assert state["spend"]["iterations"] == len(ends) >= expected_iterations  # type: ignore[index]
    assert _terminals(folder) == [("abort", reason)]
    spend = state["spend"]
    assert isinstance(spend, dict)
    if reason == "max_cost":
        assert spend["costUsd"] >= 1.0 and spend["costUsd"] - 0.5 < 1.0
    else:
        total = spend["tokens"]["input"] + spend["tokens"]["output"]
        assert total >= 250 and total - 100 < 250


def test_duration_budget_excludes_paused_time_and_survives_restart(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"shell": "date +%N >> p.txt"}, {"sleep": 1.0}, {"result": "step"}]])
    proc = _start(repo, env, "--max-iterations", "50", "--max-duration", "4s")
    folder = _run_dir(tmp_path)
    _wait_for(lambda: _types(folder).count("iteration_end") >= 1)
    assert run_cli(["pause", folder.name], cwd=repo).returncode == 0
    _wait_for(lambda: _state(folder).get("status") == "paused")
    time.sleep(3)  # paused time does not count
    proc.kill()
    proc.wait()
    active = _state(folder)["spend"]["activeMs"]  # type: ignore[index]
    assert isinstance(active, int) and active < 4000
    assert run_cli(["resume", folder.name], cwd=repo).returncode == 0
    done = run_cli(["start", folder.name, "--foreground"], cwd=repo, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    state = _state(folder)
    assert _terminals(folder) == [("abort", "max_duration")]
    assert 4000 <= state["spend"]["activeMs"] < 9000  # type: ignore[index,operator]


def test_the_first_sigint_of_a_plain_run_is_answered_at_once(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    go = tmp_path / "go"
    held = {"shell": f"while [ ! -f {go} ]; do sleep 0.05; done"}
    env = fake_agent([[held, {"result": "ok"}]])
    err_path = tmp_path / "stderr.txt"
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "autopilot", "run", "--plain", "-p", "work"],
            cwd=repo,
            env=dict(os.environ, **env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        folder = _run_dir(tmp_path)
        _wait_for(lambda: _state(folder).get("agentPid") is not None)
        proc.send_signal(signal.SIGINT)
        # The agent cannot finish its iteration until `go` exists.
        _wait_for(lambda: "stop heard" in err_path.read_text())
        assert err_path.read_text().splitlines()[-1] == (
            "autopilot: stop heard: the run stops when this iteration ends; "
            "Ctrl-C again ends the agent now"
        )
    finally:
        go.write_text("")
        code = proc.wait(timeout=60)
    assert code == 130
    assert _terminals(folder) == [("abort", "user_stopped")]
