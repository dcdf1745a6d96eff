"""A Stop killed (``kill -9``, the CLI's hook timeout) while it ends an iteration, with
the real ``autopilot hook claude-stop`` process and a real check: the next Stop ends
the check's process and the iteration, once, from what the killed Stop saw."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from autopilot.core.item_report import ItemDecision, ItemReport
from autopilot.store.paths import runs_root
from autopilot.store.reports import write_report
from tests.hook.sessions import armed_session, blocks, events_of, kinds_of, state_of


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_for(path: Path, seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


@pytest.fixture
def project(repo: Path, tmp_path: Path) -> Path:
    seen, pid = tmp_path / "check.seen", tmp_path / "check.pid"
    # The first run of the check hangs in a child of its shell (its Stop is killed,
    # and the shell with it); a second one passes.
    check = f"if [ -f {seen} ]; then exit 0; fi; touch {seen}; sleep 300 & echo $! > {pid}; wait"
    items = [
        {
            "id": "a",
            "prompt": "write a.md",
            "acceptance_criteria": [{"id": "ac1", "text": "it passes", "check": check}],
        },
        {"id": "b", "prompt": "write b.md"},
    ]
    (repo / ".autopilot").mkdir(exist_ok=True)
    (repo / ".autopilot" / "tasks.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return repo


def test_a_stop_killed_during_a_check_is_ended_once_by_the_next_stop(
    tmp_path: Path, project: Path
) -> None:
    clock, run_id, session = armed_session(
        tmp_path, project, prompt=None, backlog=True, **{"max-iterations": "0"}
    )
    assert "work-item: a" in blocks(session.stop(clock, last="armed"))
    report = ItemReport("a", ItemDecision.CONTINUE_NEXT, {"ac1": True}, ("done",))
    write_report(runs_root() / run_id, report, ts_ms=1, iteration=None)
    session.say("a done")
    stop_input = {
        "session_id": session.session_id,
        "transcript_path": str(session.transcript),
        "cwd": str(project),
        "hook_event_name": "Stop",
        "stop_hook_active": True,
        "last_assistant_message": "a done",
    }
    hook = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "hook", "claude-stop"],
        cwd=project,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert hook.stdin is not None
    hook.stdin.write(json.dumps(stop_input).encode())
    hook.stdin.close()
    check_pid = int(_wait_for(tmp_path / "check.pid"))
    hook.send_signal(signal.SIGKILL)
    hook.wait(timeout=60)
    try:
        assert _alive(check_pid)  # what the killed Stop's check started runs on
        assert kinds_of(run_id, "iteration_end") == []
        session.prompt("go on")
        session.say("back")
        assert "work-item: b" in blocks(session.stop(clock, last="back"))
        assert not _alive(check_pid)
    finally:
        if _alive(check_pid):
            os.kill(check_pid, signal.SIGKILL)
    ends = [e for e in events_of(run_id) if e["type"] == "iteration_end"]
    assert [(e["iteration"], e["outcome"]) for e in ends] == [(1, "killed")]
    items = [(e["itemId"], e["status"]) for e in events_of(run_id) if e["type"] == "workitem_end"]
    assert items == [("a", "completed")]  # the claimed report was applied, once
    assert kinds_of(run_id, "iteration_start") == [("iteration_start", 1), ("iteration_start", 2)]
    assert state_of(run_id)["iter"] == 2
    assert not (runs_root() / run_id / "iter-0001" / "stop-ending.json").exists()


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _stop_killed_at(session: Any, project: Path, log: Path, lines: int) -> None:
    """A real Stop of ``session``, killed once ``log`` (the check's) has ``lines`` lines."""
    hook = subprocess.Popen(
        [sys.executable, "-m", "autopilot", "hook", "claude-stop"],
        cwd=project,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert hook.stdin is not None
    hook.stdin.write(session.stop_input(active=True, last="a done"))
    hook.stdin.close()
    deadline = time.monotonic() + 60
    while _lines(log) < lines and hook.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hook.poll() is None, "the Stop ended before its check ran"
    assert _lines(log) == lines
    hook.send_signal(signal.SIGKILL)
    hook.wait(timeout=60)


def _slow_backlog(repo: Path, check: str) -> None:
    item = {
        "id": "a",
        "prompt": "write a.md",
        "acceptance_criteria": [{"id": "ac1", "text": "it passes", "check": check}],
    }
    (repo / ".autopilot").mkdir(exist_ok=True)
    (repo / ".autopilot" / "tasks.jsonl").write_text(json.dumps(item) + "\n")


def _asked(answer: str) -> str:
    note = str(json.loads(answer)["systemMessage"])
    assert "waits for your answer: 2 Stops in a row were cut short" in note, note
    return note


def test_an_item_end_cut_short_twice_is_charged_and_asks_a_person(
    tmp_path: Path, repo: Path
) -> None:
    log = tmp_path / "check.log"
    _slow_backlog(repo, f"echo run >> {log}; sleep 20")
    clock, run_id, session = armed_session(
        tmp_path, repo, prompt=None, backlog=True, **{"max-iterations": "0"}
    )
    assert "work-item: a" in blocks(session.stop(clock, last="armed"))
    report = ItemReport("a", ItemDecision.CONTINUE_NEXT, {"ac1": True}, ("done",))
    write_report(runs_root() / run_id, report, ts_ms=1, iteration=None)
    session.say("a done")
    _stop_killed_at(session, repo, log, 1)  # ending iteration 1: a's check
    _stop_killed_at(session, repo, log, 2)  # the same, from what the first one saw
    note = _asked(session.stop(clock, active=True, last="a done"))
    assert "while ending iteration 1" in note and "a/ac1: `echo run >> " in note
    assert _lines(log) == 2  # no third try at the check
    ends = [
        (e["iteration"], e["outcome"]) for e in events_of(run_id) if e["type"] == "iteration_end"
    ]
    assert ends == [(1, "killed")]  # charged: the run's budgets apply
    state = state_of(run_id)
    assert state["status"] == "awaiting_user" and "cut short" in state["gate"]
    assert not (runs_root() / run_id / "stop-busy.json").exists()


def test_a_final_gate_cut_short_at_every_stop_asks_a_person(tmp_path: Path, repo: Path) -> None:
    log = tmp_path / "check.log"
    # Quick at the item's end, slow in the final evidence gate.
    _slow_backlog(repo, f"echo run >> {log}; [ $(wc -l < {log}) -le 1 ] || sleep 20")
    clock, run_id, session = armed_session(
        tmp_path, repo, prompt=None, backlog=True, **{"max-iterations": "0"}
    )
    assert "work-item: a" in blocks(session.stop(clock, last="armed"))
    report = ItemReport("a", ItemDecision.CONTINUE_NEXT, {"ac1": True}, ("done",))
    write_report(runs_root() / run_id, report, ts_ms=1, iteration=None)
    session.say("a done")
    _stop_killed_at(session, repo, log, 2)  # a's end passed; the gate hangs
    _stop_killed_at(session, repo, log, 3)  # iteration 1 ended; the gate again
    _stop_killed_at(session, repo, log, 4)  # the gate again
    note = _asked(session.stop(clock, active=True, last="a done"))
    assert "while starting the iteration after 1" in note
    assert _lines(log) == 4
    assert kinds_of(run_id, "complete", "abort") == []
    assert state_of(run_id)["status"] == "awaiting_user"
    # A Stop while the question waits runs nothing, and says what it waits for.
    assert "waits for your answer" in session.stop(clock, active=True, last="a done")
    assert _lines(log) == 4
