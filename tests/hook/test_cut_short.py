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
