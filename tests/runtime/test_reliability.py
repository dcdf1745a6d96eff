"""Reliability, measured: ``kill -9`` of a detached run's daemon at each point of an
iteration, with the supervisor bringing it back. Each time: no event lost (every
``iteration_start`` closed), exactly one terminal event, no budget overrun, state.json
agreeing with the folded log, and a message queued before the crash delivered once.

The kill comes from inside the daemon (``crashpoints/sitecustomize.py``), so it lands
at exactly the named point of the real driver."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from autopilot.config import RunConfig
from autopilot.errors import StateFileError
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.loop.messages import queue_message
from autopilot.runtime import liveness
from autopilot.runtime.detach import spawn_supervisor
from autopilot.runtime.liveness import process_alive
from autopilot.store.events import read_events
from autopilot.store.fold import fold
from autopilot.store.paths import runs_root
from autopilot.store.run_state import PromptSource, decode_state
from autopilot.store.state import read_state_json
from tests.cli.test_control import _wait_for
from tests.conftest import FakeAgent, assert_one_end_per_attempt, run_cli

TIMEOUT = 120.0
CRASHPOINTS = Path(__file__).with_name("crashpoints")
MAX_ITERATIONS = 3

STEP_ONE = [
    {"tool": "Bash", "input": {"command": "ls"}, "output": "README.md"},
    {"write_file": "one.txt", "content": "1"},
    {"sleep": 0.5},
    {"result": "step one", "cost_usd": 0.1, "input_tokens": 100, "output_tokens": 10},
]
DONE = [{"echo_prompt": True}, {"result": "COMPLETE", "cost_usd": 0.1, "input_tokens": 100}]


def supervisor_alive(state: dict[str, Any]) -> bool | None:
    return liveness.supervisor_alive(decode_state(state))


def _state(folder: Path) -> dict[str, Any]:
    try:
        return read_state_json(folder / "state.json")
    except StateFileError:
        return {}


def crash_at(point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make the daemons started from now on kill themselves at ``point`` (once: the
    returned marker file says it happened)."""
    marker = tmp_path / "crashed"
    monkeypatch.setenv("CRASH_AT", point)
    monkeypatch.setenv("CRASH_MARKER", str(marker))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(CRASHPOINTS), os.environ.get("PYTHONPATH", "")])
    )
    return marker


def end_run_processes(folders: list[Path]) -> None:
    """Kill the supervisor and the driver a test left running in each run folder."""
    for folder in folders:
        state = _state(folder)
        for key, when in (("supervisorPid", "supervisorStartTime"), ("pid", "pidStartTime")):
            if process_alive(state.get(key), state.get(when)):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(state[key]), signal.SIGKILL)


def _check(folder: Path) -> dict[str, Any]:
    """The invariants every crash must keep; returns the final state."""
    events = list(read_events(folder / "events.jsonl"))
    types = [e["type"] for e in events]
    terminals = [e for e in events if e["type"] in ("complete", "abort")]
    assert len(terminals) == 1, terminals  # never two, never none
    assert types.count("iteration_start") == types.count("iteration_end"), types
    assert_one_end_per_attempt(events)
    state = _state(folder)
    snapshot = fold(events)
    assert state["terminated"] is True and snapshot.status in ("complete", "aborted", "abort")
    spend = state["spend"]
    assert spend["iterations"] <= MAX_ITERATIONS  # no budget overrun
    assert snapshot.tokens == spend["tokens"]
    assert snapshot.costUsd == pytest.approx(spend["costUsd"])
    assert snapshot.iteration == state["iter"]
    assert state.get("agentPid") is None and state.get("iterationOpen") is False
    return state


@pytest.fixture
def crash_run(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> Any:
    started: list[Path] = []

    def start(point: str, invocations: list[list[dict[str, Any]]]) -> tuple[Path, Path]:
        for key, value in fake_agent(invocations, select="invocation").items():
            monkeypatch.setenv(key, value)
        marker = crash_at(point, tmp_path, monkeypatch)
        root = runs_root()
        config = RunConfig(max_iterations=MAX_ITERATIONS, stagnation_limit=0, max_cost_usd=5.0)
        run_id = arm_run(root, config, PromptSource(text="work"), repo, SystemClock())
        folder = root / run_id
        started.append(folder)
        queue_message(folder, "MSG-BEFORE-SPAWN", SystemClock())
        spawn_supervisor(root, run_id)
        return folder, marker

    yield start
    end_run_processes(started)


def _finished(folder: Path) -> bool:
    state = _state(folder)
    return bool(state.get("terminated")) and not supervisor_alive(state)


def _restart_after(folder: Path, marker: Path) -> None:
    _wait_for(marker.exists, TIMEOUT)
    _wait_for(
        lambda: any(
            e["type"] == "supervisor_restart" for e in read_events(folder / "events.jsonl")
        ),
        TIMEOUT,
    )


def _delivered_once(folder: Path) -> None:
    events = list(read_events(folder / "events.jsonl"))
    delivered = [e for e in events if e["type"] == "message_delivered" and e["source"] == "user"]
    assert len(delivered) == 1, delivered
    prompts = [p.read_text() for p in sorted(folder.glob("iter-*/prompt.md"))]
    assert any("MSG-BEFORE-SPAWN" in p for p in prompts)


@pytest.mark.parametrize("point", ["spawn", "mid_stream", "after_iteration_end", "state_write"])
def test_kill_9_of_the_daemon_during_an_iteration(crash_run: Any, point: str) -> None:
    folder, marker = crash_run(point, [STEP_ONE, DONE])
    _restart_after(folder, marker)
    _wait_for(lambda: _finished(folder), TIMEOUT)
    state = _check(folder)
    assert state["status"] == "completed"
    _delivered_once(folder)
    # An attempt cut short is announced to the next one; a finished one is not (at
    # after_iteration_end and state_write its decision is already on the log).
    notices = [
        e
        for e in read_events(folder / "events.jsonl")
        if e["type"] == "message_delivered" and e["kind"] == "supervisor_notice"
    ]
    assert len(notices) == (0 if point in ("after_iteration_end", "state_write") else 1)


def test_kill_9_of_the_daemon_during_a_limit_wait(crash_run: Any) -> None:
    import time

    # The limit resets in an hour: the restarted daemon always finds the wait still on
    # (the crash points end that wait once it has been logged again).
    limited = [
        {"rate_limit_event": {"status": "rejected", "resetsAt": int(time.time()) + 3600}},
        {"result": "You've hit your limit", "is_error": True},
        {"exit": 1},
    ]
    folder, marker = crash_run("limit_wait", [limited, DONE])
    _restart_after(folder, marker)
    _wait_for(lambda: _finished(folder), TIMEOUT)
    state = _check(folder)
    assert state["status"] == "completed"
    events = list(read_events(folder / "events.jsonl"))
    # The wait went on after the restart, to the same reset time: the limited attempt
    # spent no iteration.
    waits = [e for e in events if e["type"] == "rate_limited"]
    assert len(waits) == 2
    assert waits[1]["waitingUntil"] == waits[0]["waitingUntil"]
    assert waits[1]["note"] == "resuming the wait after a restart"
    assert state["spend"]["iterations"] == 1
    _delivered_once(folder)


def test_kill_9_of_the_daemon_while_paused(crash_run: Any, repo: Path) -> None:
    waiting = [{"shell": "while [ ! -f go ]; do sleep 0.05; done"}, *STEP_ONE]
    folder, marker = crash_run("paused", [waiting, DONE])
    _wait_for(lambda: isinstance(_state(folder).get("agentPid"), int), TIMEOUT)
    assert run_cli(["pause", folder.name], cwd=repo).returncode == 0
    (repo / "go").write_text("")
    _restart_after(folder, marker)
    _wait_for(lambda: _state(folder).get("status") == "paused", TIMEOUT)  # paused again
    assert run_cli(["resume", folder.name], cwd=repo).returncode == 0
    _wait_for(lambda: _finished(folder), TIMEOUT)
    state = _check(folder)
    assert state["status"] == "completed"
    _delivered_once(folder)
