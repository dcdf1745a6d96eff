"""A backlog run survives ``kill -9`` of its daemon at every point of an iteration:
the attempt a crash cut short is concluded with the work item it was on, an item is
completed only once autopilot's own checks passed, and the run completes
(``backlog_done``) only when every item did — never on the agent's completion promise.

Real processes: a detached run (supervisor, daemon), the fake agent reporting through
the real ``autopilot report``, the criteria's checks run by autopilot. The kill comes
from inside the daemon at a named point (``crashpoints/sitecustomize.py``)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from autopilot.config import RunConfig
from autopilot.loop.arming import arm_run
from autopilot.loop.clock import SystemClock
from autopilot.runtime.detach import spawn_supervisor
from autopilot.store.events import read_events
from autopilot.store.fold import fold
from autopilot.store.paths import runs_root
from autopilot.store.run_state import PromptSource
from tests.cli.test_control import _wait_for
from tests.conftest import FakeAgent, read_jsonl, run_cli
from tests.runtime.test_reliability import (
    TIMEOUT,
    _finished,
    _state,
    crash_at,
    end_run_processes,
)

ITEMS = [
    {
        "id": "a",
        "prompt": "write a.txt",
        "acceptance_criteria": [{"id": "ac1", "text": "a.txt exists", "check": "test -f a.txt"}],
    },
    {
        "id": "b",
        "prompt": "write b.txt",
        "depends_on": ["a"],
        "acceptance_criteria": [{"id": "ac1", "text": "b.txt exists", "check": "test -f b.txt"}],
    },
]

_RUNNING_ITEM = (
    "import json; print(next(i['id'] for i in map(json.loads, open('.autopilot/tasks.jsonl')) "
    "if i.get('status') == 'running'))"
)
WORK_AND_REPORT = {
    # What an agent does: find its item, do the work, report through autopilot.
    "shell": (
        f'item=$({sys.executable} -c "{_RUNNING_ITEM}") && echo done > "$item.txt" && '
        f'{sys.executable} -m autopilot report continue_next --item "$item" '
        '--criterion ac1=pass --evidence "$item.txt written"'
    )
}
# The agent's word alone: a completion promise with an item still open.
FALSE_PROMISE = {"result": "COMPLETE", "cost_usd": 0.1, "input_tokens": 100}
WORK = [WORK_AND_REPORT, {"sleep": 0.3}, FALSE_PROMISE, {"sleep": 0.3}]


@pytest.fixture
def backlog_crash(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> Any:
    started: list[Path] = []

    def start(
        point: str,
        invocations: list[list[dict[str, Any]]],
        items: list[dict[str, Any]] = ITEMS,
    ) -> tuple[Path, Path]:
        for key, value in fake_agent(invocations, select="invocation").items():
            monkeypatch.setenv(key, value)
        marker = crash_at(point, tmp_path, monkeypatch)
        (repo / ".autopilot").mkdir()
        (repo / ".autopilot" / "tasks.jsonl").write_text(
            "".join(json.dumps(item) + "\n" for item in items)
        )
        root = runs_root()
        config = RunConfig(max_iterations=6, stagnation_limit=0, max_cost_usd=5.0)
        run_id = arm_run(
            root, config, PromptSource(text="backlog"), repo, SystemClock(), mode="backlog"
        )
        folder = root / run_id
        started.append(folder)
        spawn_supervisor(root, run_id)
        return folder, marker

    yield start
    end_run_processes(started)


def _drained(folder: Path, repo: Path, marker: Path) -> list[dict[str, Any]]:
    """The invariants after the run: one terminal event, ``backlog_done``; every item
    completed once, with passing evidence autopilot gathered; the log, state.json and
    tasks.jsonl agree. Returns the events."""
    _wait_for(marker.exists, TIMEOUT)
    _wait_for(lambda: _finished(folder), TIMEOUT)
    events = list(read_events(folder / "events.jsonl"))
    types = [e["type"] for e in events]
    terminals = [(e["type"], e.get("reason")) for e in events if e["type"] in ("complete", "abort")]
    assert terminals == [("complete", "backlog_done")], terminals
    assert "supervisor_restart" in types
    assert types.count("iteration_start") == types.count("iteration_end"), types
    assert not any(e.get("reason") == "completion_promise" for e in events)
    items = {item["id"]: item for item in read_jsonl(repo / ".autopilot" / "tasks.jsonl")}
    for item_id in ("a", "b"):
        item = items[item_id]
        assert item["status"] == "completed"
        assert item["completion"]["verdict"] == "pass"
        assert str(item["completion"]["completion_check_digest"]).startswith("sha256:")
        completed = [
            e
            for e in events
            if e["type"] == "workitem_end" and e["itemId"] == item_id and e["status"] == "completed"
        ]
        assert len(completed) == 1, completed  # concluded once, crash or not
        folder_of = f"iter-{completed[0]['iteration']:04d}"
        assert (folder / folder_of / "check-ac1.log").exists()  # autopilot ran the check
    state = _state(folder)
    snapshot = fold(events)
    assert state["terminated"] is True and state["status"] == "completed"
    assert state["terminationReason"] == "backlog_done"
    assert state.get("agentPid") is None and state.get("iterationOpen") is False
    assert state["spend"]["iterations"] == snapshot.iterationsSpent
    assert {w["id"]: w["status"] for w in snapshot.workItems} == {
        "a": "completed",
        "b": "completed",
    }
    return events


@pytest.mark.parametrize(
    "point",
    [
        "spawn",  # the agent started, its pid not yet recorded
        "mid_stream",  # the agent running (it has reported; the report waits)
        "agent_exited",  # the agent ended, its item not yet concluded
        "checks",  # the report claimed, the checks not yet run
        "item_concluded",  # the item concluded, the step not yet logged
        "after_iteration_end",  # the step logged, state.json not yet written
        "state_write",  # state.json's write torn
    ],
)
def test_kill_9_of_a_backlog_run_at_each_point(backlog_crash: Any, repo: Path, point: str) -> None:
    folder, marker = backlog_crash(point, [WORK])
    _drained(folder, repo, marker)


def test_a_completion_promise_cut_short_by_a_crash_does_not_complete_the_run(
    backlog_crash: Any, repo: Path
) -> None:
    # The agent says COMPLETE without reporting, then the daemon dies while it lingers:
    # the relaunch concludes item a as unreported (resumed later), not the run.
    promise_then_linger = [
        FALSE_PROMISE,
        {"tool": "Bash", "input": {"command": "ls"}},
        {"sleep": 30},
    ]
    folder, marker = backlog_crash("mid_stream", [promise_then_linger, WORK])
    events = _drained(folder, repo, marker)
    first = [e for e in events if e["type"] == "workitem_end" and e["iteration"] == 1]
    assert [(e["itemId"], e["status"], e.get("decision")) for e in first] == [
        ("a", "running", None)
    ]
    ended = next(e for e in events if e["type"] == "iteration_end" and e["iteration"] == 1)
    assert ended["endedBy"] == "driver_died"
    assert any(
        e["type"] == "warning" and "does not end a backlog run" in str(e.get("note"))
        for e in events
    )


def test_a_check_left_running_by_a_dead_driver_is_ended_on_relaunch(
    tmp_path: Path, repo: Path, fake_agent: FakeAgent
) -> None:
    # A foreground run: the first time, a's check kills its driver and goes on running
    # (a check that hangs). ``autopilot start`` ends it, runs the checks again, and
    # they pass.
    hanging = "sleep 611"
    check = (
        f"if [ ! -f ../crashed ]; then touch ../crashed; kill -9 $PPID; {hanging}; fi; "
        "test -f a.txt"
    )
    items = [
        {**ITEMS[0], "acceptance_criteria": [{"id": "ac1", "text": "a", "check": check}]},
        ITEMS[1],
    ]
    (repo / ".autopilot").mkdir()
    (repo / ".autopilot" / "tasks.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    env = fake_agent([WORK])
    killed = run_cli(["run", "--backlog", "--plain", "--max-iterations", "6"], cwd=repo, env=env)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    folder = next(p for p in (tmp_path / "runs").iterdir() if p.name.startswith("repo-"))
    done = run_cli(["start", folder.name, "--plain"], cwd=repo, env=env)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        # The report the dead driver had claimed is checked again at the relaunch:
        # iteration 1 concludes item a, its report not lost to the crash.
        events = list(read_events(folder / "events.jsonl"))
        first = [
            (e["itemId"], e["status"], e.get("decision"))
            for e in events
            if e["type"] == "workitem_end" and e["iteration"] == 1
        ]
        assert first == [("a", "completed", "continue_next")], first
        assert (folder / "iter-0001" / "check-ac1.log").exists()  # the check ran there
        assert list((folder / "reports").glob("*.json")) == []
        items_after = read_jsonl(repo / ".autopilot" / "tasks.jsonl")
        assert [(i["id"], i["status"]) for i in items_after] == [
            ("a", "completed"),
            ("b", "completed"),
        ]
    finally:
        left = [
            p
            for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"] and " ".join(p.info["cmdline"]) == hanging
        ]
        for process in left:
            with contextlib.suppress(psutil.Error):
                process.kill()
    assert left == []
