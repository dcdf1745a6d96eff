"""A run whose ``state.json`` cannot be read: ``stop`` still stops it through the driver
its ``driver.lock`` names, and ``doctor --repair`` rebuilds the file from the event log,
keeping the corrupt one aside, so that ``start`` goes on with the run as it was armed;
each answer is one line, never a traceback."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from autopilot.errors import StateFileError
from autopilot.store.state import read_state
from tests.cli.test_control import _run_dir, _sleeping_run, _state, _terminals, _wait_for
from tests.conftest import FakeAgent, read_jsonl, run_cli

TORN = '{"runId": "torn'


def test_stop_reaches_the_driver_of_a_run_whose_state_is_corrupt(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    _env, proc, folder = _sleeping_run(tmp_path, repo, fake_agent, agent_started=True)
    try:
        # The driver reads state.json once a second and rewrites a corrupt one from
        # memory: held still, it cannot mend the file before `send` and `stop` read it.
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            (folder / "state.json").write_text(TORN)
            sent = run_cli(["send", folder.name, "note this"], cwd=repo)
            done = run_cli(["stop", folder.name], cwd=repo)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert sent.returncode == 0, sent.stderr
        assert "queued" in sent.stdout and "doctor" not in sent.stdout  # its driver lives
        [queued] = [e for e in read_jsonl(folder / "events.jsonl") if e["type"] == "message_queued"]
        assert queued["excerpt"] == "note this" and queued["autopilotOn"] is True
        assert done.returncode == 0, done.stderr
        [line] = done.stdout.strip().splitlines()
        assert f"driver (pid {proc.pid}) was told to stop, and stops at the next boundary" in line
        # Now it stops at the boundary. Once it has mended the file (it reads it once a
        # second), `stop --now` asks it through the file to end the sleeping agent.
        _wait_for(lambda: _readable(folder / "state.json"))
        now = run_cli(["stop", folder.name, "--now"], cwd=repo)
        assert now.returncode == 0, now.stderr
        assert proc.wait(timeout=60) == 130
        assert _terminals(folder) == [("abort", "user_stopped")]
        state = read_state(folder / "state.json")  # the driver wrote it again
        assert state.terminated and state.termination_reason == "user_stopped"
        assert [p.read_text() for p in folder.glob("state.json.corrupt-*")] == [TORN]
    finally:
        proc.kill()
        proc.wait()


def _forget_launch(folder: Path) -> None:
    """Rewrite the run's log as a version that did not record the launch would have."""
    events = read_jsonl(folder / "events.jsonl")
    for event in events:
        event.pop("launch", None)
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_doctor_repair_rebuilds_a_corrupt_state_from_a_log_without_its_launch(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    _env, proc, folder = _sleeping_run(tmp_path, repo, fake_agent, agent_started=True)
    proc.kill()
    proc.wait()
    _forget_launch(folder)
    (folder / "state.json").write_text(TORN)
    refused = run_cli(["stop", folder.name], cwd=repo)
    assert refused.returncode == 4
    [line] = refused.stderr.strip().splitlines()
    assert "autopilot doctor --repair" in line and "Traceback" not in refused.stderr
    assert run_cli(["doctor"], cwd=repo).stdout.count("doctor --repair") == 1
    repaired = run_cli(["doctor", "--repair"], cwd=repo)
    assert "Traceback" not in repaired.stderr
    [said] = [s for s in repaired.stdout.splitlines() if "rebuilt" in s]
    assert f"{folder.name}: state.json rebuilt from its event log" in said
    [kept] = folder.glob("state.json.corrupt-*")
    assert kept.read_text() == TORN and kept.name in said
    state = read_state(folder / "state.json")
    assert state.cwd == str(repo) and state.agent == "claude" and state.iteration == 1
    assert state.paused and not state.terminated
    started = run_cli(["start", folder.name], cwd=repo)
    assert started.returncode == 2 and "rebuilt from its event log" in started.stderr
    stopped = run_cli(["stop", folder.name], cwd=repo)
    assert stopped.returncode == 0, stopped.stderr
    assert _terminals(folder) == [("abort", "user_stopped")]
    assert read_state(folder / "state.json").termination_reason == "user_stopped"
    # Nothing left to repair: a second pass changes nothing.
    assert "rebuilt" not in run_cli(["doctor", "--repair"], cwd=repo).stdout


PROMPT = "Tidy the changelog; the prompt of this run and no other"


def test_a_run_rebuilt_by_doctor_repair_goes_on_with_its_prompt_and_budgets(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    env = fake_agent([[{"sleep": 600}], [{"echo_prompt": True}, {"result": "COMPLETE"}]])
    budgets = ["--max-iterations", "7", "--max-cost", "3.5", "--stagnation-limit", "5"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "run", "-p", PROMPT, *budgets],
        cwd=repo,
        env=dict(os.environ, **env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    folder = _run_dir(tmp_path)
    _wait_for(lambda: _state(folder).get("agentPid") is not None)
    agent_pid = _state(folder)["agentPid"]
    assert isinstance(agent_pid, int)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with contextlib.suppress(ProcessLookupError):  # it may have died with its driver
        os.killpg(agent_pid, signal.SIGKILL)  # as a reboot would
    (folder / "state.json").unlink()
    sent = run_cli(["send", folder.name, "Mind the release notes"], cwd=repo)
    assert sent.returncode == 0, sent.stderr
    assert "autopilot doctor --repair" in sent.stdout  # no driver writes it again

    # Bare autopilot (after a reboot) relaunches nothing it cannot read, but says so.
    bare = run_cli([], cwd=repo, env=env)
    [said] = [s for s in bare.stdout.splitlines() if folder.name in s]
    assert said.startswith(f"autopilot: not relaunching {folder.name}: its state.json")
    assert "autopilot doctor --repair" in said and not (folder / "state.json").exists()
    repaired = run_cli(["doctor", "--repair"], cwd=repo)
    [said] = [s for s in repaired.stdout.splitlines() if "state.json rebuilt" in s]
    assert f"go on with autopilot start {folder.name}" in said and "it was missing" in said
    assert list(folder.glob("state.json.corrupt-*")) == []
    state = read_state(folder / "state.json")
    assert state.prompt.text == PROMPT and state.prompt.path is None
    assert (state.config.max_iterations, state.config.max_cost_usd) == (7, 3.5)
    assert state.config.stagnation_limit == 5 and state.paused

    started = run_cli(["start", folder.name, "--plain"], cwd=repo, env=env)
    assert started.returncode == 0, started.stderr
    assert "Traceback" not in started.stderr
    assert _terminals(folder) == [("complete", "completion_promise")]
    # Iteration 1, cut short by the crash, was charged; iteration 2 had the same prompt.
    prompt = (folder / "iter-0002" / "prompt.md").read_text()
    assert PROMPT in prompt and "Mind the release notes" in prompt
    state = read_state(folder / "state.json")
    assert state.spend.iterations == 2 and state.config.max_cost_usd == 3.5


def _readable(path: Path) -> bool:
    try:
        read_state(path)
    except StateFileError:
        return False
    return True
