"""What an adversarial review found: lingering agents, crashes mid-iteration, limits
that outlive budgets, leftover processes, bad agent JSON, torn logs, odd prompt files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.cli.test_control import (
    _events,
    _run_dir,
    _sleeping_run,
    _start,
    _state,
    _terminals,
    _types,
    _wait_for,
)
from tests.conftest import FakeAgent, read_jsonl, run_cli


def test_agent_lingering_after_its_result_is_a_success(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # Issue anthropics/claude-code#61416: the CLI prints its result, then never exits (and ignores TERM).
    env = fake_agent(
        [
            [
                {"ignore_sigterm": True},
                {"write_file": "a.txt"},
                {"result": "finished. COMPLETE"},
                {"sleep": 600},
            ]
        ]
    )
    done = run_cli(["run", "-p", "x", "--result-grace", "1s", "--plain"], cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = _run_dir(tmp_path)
    ends = [e for e in _events(folder) if e["type"] == "iteration_end"]
    assert [(e["outcome"], e["endedBy"]) for e in ends] == [("ok", "result_grace")]
    assert _terminals(folder) == [("complete", "completion_promise")]


def test_crash_mid_iteration_charges_the_attempt(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [
            [
                {"shell": "date +%N >> p.txt"},
                {
                    "result": "expensive",
                    "cost_usd": 1.0,
                    "input_tokens": 1500,
                    "output_tokens": 500,
                },
                {"sleep": 600},
            ]
        ]
    )
    proc = _start(repo, env, "--max-cost", "1.5", "--result-grace", "60s")
    folder = _run_dir(tmp_path)
    _wait_for(
        lambda: (
            (folder / "iter-0001" / "stdout.log").exists()
            and b'"type":"result"' in (folder / "iter-0001" / "stdout.log").read_bytes()
        )
    )
    proc.kill()
    proc.wait()
    done = run_cli(["start", folder.name, "--plain"], cwd=repo, env={**env})
    assert done.returncode == 3, done.stdout + done.stderr
    ends = [e for e in _events(folder) if e["type"] == "iteration_end"]
    assert ends[0]["endedBy"] == "driver_died" and ends[0]["iterationCostUsd"] == 1.0
    state = _state(folder)
    assert state["spend"]["costUsd"] == 2.0  # type: ignore[index]
    assert state["spend"]["tokens"] == {"input": 3000, "output": 1000}  # type: ignore[index]
    assert _terminals(folder) == [("abort", "max_cost")]


def test_rate_limited_attempts_still_spend_against_budgets(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [
            [
                {"assistant_error": "rate_limit", "text": "API Error: Request rejected (429)"},
                {
                    "result": "API Error: Request rejected (429)",
                    "is_error": True,
                    "api_error_status": 429,
                    "cost_usd": 0.5,
                },
                {"exit": 1},
            ]
        ]
    )
    done = run_cli(["run", "-p", "x", "--max-cost", "1", "--plain"], cwd=repo, env=env, timeout=60)
    assert done.returncode == 3, done.stdout + done.stderr
    folder = _run_dir(tmp_path)
    assert _types(folder).count("rate_limited") == 1
    assert _terminals(folder) == [("abort", "max_cost")]
    assert _state(folder)["spend"]["iterations"] == 0  # type: ignore[index]


def test_billing_error_halts_at_once(tmp_path: Path, repo: Path, fake_agent: FakeAgent) -> None:
    env = fake_agent(
        [
            [
                {"assistant_error": "billing_error", "text": "Credit balance is too low"},
                {"result": "Credit balance is too low", "is_error": True},
                {"exit": 1},
            ]
        ]
    )
    done = run_cli(["run", "-p", "x", "--plain"], cwd=repo, env=env, timeout=60)
    assert done.returncode == 1
    folder = _run_dir(tmp_path)
    ((kind, reason),) = _terminals(folder)
    assert (kind, reason) == ("abort", "agent_failing")
    assert "Credit balance is too low" in str(_events(folder)[-1]["note"])
    assert len([e for e in _events(folder) if e["type"] == "iteration_end"]) == 1


def test_restart_during_a_limit_wait_keeps_waiting(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    resets = int(time.time()) + 3600
    env = fake_agent(
        [
            [
                {
                    "rate_limit_event": {
                        "status": "rejected",
                        "resetsAt": resets,
                        "rateLimitType": "five_hour",
                    }
                },
                {"result": "You've hit your limit", "is_error": True},
                {"exit": 1},
            ]
        ],
        select="invocation",
    )
    proc = _start(repo, env)
    folder = _run_dir(tmp_path)
    _wait_for(lambda: "rate_limited" in _types(folder))
    assert _state(folder)["waitingUntil"] == resets * 1000
    proc.kill()
    proc.wait()
    restarted = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "start", folder.name, "--plain"],
        cwd=repo,
        env=dict(os.environ, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_for(lambda: _types(folder).count("rate_limited") == 2)
    time.sleep(1.5)
    counter = Path(env["FAKE_AGENT_SCRIPT"] + ".count")
    assert counter.read_text() == "1"  # the agent was not launched again
    assert run_cli(["stop", folder.name], cwd=repo).returncode == 0
    assert restarted.wait(timeout=30) == 130
    assert _terminals(folder) == [("abort", "user_stopped")]


def test_leftover_agent_children_are_ended_when_the_run_is_stopped(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent(
        [[{"shell": "sleep 1000 > /dev/null 2>&1 & echo $! > ../child.pid"}, {"sleep": 600}]]
    )
    proc = _start(repo, env)
    folder = _run_dir(tmp_path)
    pid_file = repo.parent / "child.pid"
    _wait_for(pid_file.exists)
    _wait_for(lambda: bool(pid_file.read_text().strip()))
    child = int(pid_file.read_text())
    proc.kill()
    proc.wait()
    time.sleep(0.5)
    assert psutil.pid_exists(child)  # the parent-death signal reaches only the leader
    assert run_cli(["stop", folder.name], cwd=repo).returncode == 0
    _wait_for(lambda: not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie")


def test_lone_surrogates_in_agent_json_do_not_crash_the_driver(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    bad = json.dumps(
        {
            "type": "assistant",
            "message": {
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "Bash",
                        "input": {"command": "echo \\ud83d truncated"},
                    }
                ]
            },
            "parent_tool_use_id": None,
            "session_id": "s\\ud83d",
        }
    ).replace("\\\\ud83d", "\\ud83d")
    env = fake_agent([[{"raw": bad}, {"result": "done \\ud83d. COMPLETE".replace("\\\\", "\\")}]])
    done = run_cli(["run", "-p", "x", "--plain", "--continue"], cwd=repo, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    folder = _run_dir(tmp_path)
    assert _terminals(folder) == [("complete", "completion_promise")]
    json.loads((folder / "state.json").read_text())


def test_second_run_refused_leaves_no_trace(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env, proc, folder = _sleeping_run(tmp_path, repo, fake_agent)
    second = run_cli(["run", "-p", "other"], cwd=repo, env=env)
    assert second.returncode == 4
    assert folder.name in second.stderr and "active" in second.stderr
    runs = [p for p in (tmp_path / "runs").iterdir() if p.name.startswith("repo-")]
    assert runs == [folder]
    status = run_cli(["status"], cwd=repo)
    assert folder.name in status.stdout  # RUN omitted still means the real run
    assert run_cli(["stop", "--now", folder.name], cwd=repo).returncode == 0
    assert proc.wait(timeout=30) == 130


def test_torn_log_then_stop_keeps_the_log_readable(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    _env, proc, folder = _sleeping_run(tmp_path, repo, fake_agent)
    proc.kill()
    proc.wait()
    with (folder / "events.jsonl").open("ab") as log:
        log.write(b'{"type":"iteration_end","ts":1,"runId":"x","iterat')
    assert run_cli(["stop", folder.name], cwd=repo).returncode == 0
    replay = run_cli(["replay", folder.name, "--json"], cwd=repo)
    assert json.loads(replay.stdout)["status"] == "aborted"


def test_prompt_file_replaced_by_a_fifo_uses_the_last_copy(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    (repo / "PROMPT.md").write_text("the prompt\n")
    env = fake_agent(
        [
            [{"shell": "rm PROMPT.md && mkfifo PROMPT.md"}, {"result": "step"}],
            [{"echo_prompt": True}, {"result": "COMPLETE"}],
        ]
    )
    done = run_cli(["run", "-f", "PROMPT.md", "--plain"], cwd=repo, env=env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = _run_dir(tmp_path)
    assert (folder / "iter-0002" / "prompt.md").read_text().startswith("the prompt\n\n---")
    assert any(e["type"] == "warning" and "PROMPT.md" in str(e["note"]) for e in _events(folder))


def test_bare_autopilot_repairs_a_half_written_ending(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # A crash after the terminal event, before state.json said so.
    env = fake_agent([[{"result": "COMPLETE"}]])
    assert run_cli(["run", "-p", "x", "--plain"], cwd=repo, env=env).returncode == 0
    folder = next((tmp_path / "runs").glob("repo-*"))
    state = json.loads((folder / "state.json").read_text())
    state.update(terminated=False, status="running", terminationReason=None, pid=None)
    (folder / "state.json").write_text(json.dumps(state))
    done = run_cli([], cwd=repo, env=env)
    assert done.returncode == 0, done.stderr
    assert f"run {folder.name} had ended" in done.stdout
    repaired = json.loads((folder / "state.json").read_text())
    assert (repaired["terminated"], repaired["status"]) == (True, "completed")
    assert repaired["terminationReason"] == "completion_promise"
    events = read_jsonl(folder / "events.jsonl")
    assert [e["type"] for e in events].count("complete") == 1
    assert [e["type"] for e in events].count("iteration_start") == 1  # nothing ran again


_RESET_SPEND = (
    "import json, os, pathlib; "
    "p = pathlib.Path(os.environ['AUTOPILOT_RUNS_DIR'], os.environ['AUTOPILOT_RUN_ID'], "
    "'state.json'); s = json.loads(p.read_text()); "
    "s['spend'] = {'iterations': 0, 'costUsd': 0, 'tokens': {'input': 0, 'output': 0}}; "
    "s['iter'] = 0; p.write_text(json.dumps(s))"
)


def test_an_agent_that_resets_spend_in_state_json_still_stops_at_the_budget(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    step = [
        {
            "shell": f'env > ../agent-env.txt; date +%N >> p.txt; "{sys.executable}" -c "{_RESET_SPEND}"'
        },
        {"result": "step done"},
    ]
    env = fake_agent([step])
    done = run_cli(["run", "-p", "x", "--max-iterations", "3", "--plain"], cwd=repo, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    folder = next((tmp_path / "runs").glob("repo-*"))
    events = read_jsonl(folder / "events.jsonl")
    assert [e["type"] for e in events].count("iteration_start") == 3
    state = json.loads((folder / "state.json").read_text())
    assert state["spend"]["iterations"] == 3 and state["terminationReason"] == "max_iterations"
    assert any(e["type"] == "warning" and "spend" in e.get("outsideChange", []) for e in events)
    # The agent is told its run and iteration, not its run folder.
    agent_env = (repo.parent / "agent-env.txt").read_text().splitlines()
    assert any(line.startswith("AUTOPILOT_RUN_ID=") for line in agent_env)
    assert not [line for line in agent_env if line.startswith("AUTOPILOT_RUN_DIR=")]
