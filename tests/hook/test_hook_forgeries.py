"""What an agent in a hook run's session forges in the run's folder, and what the next
Stop (a new process that rebuilds what autopilot knew from the log) makes of it: a
completion written into ``tasks.jsonl`` and the log, an attempt count written lower,
its item's marks rewritten. The same in a driver run: ``tests/loop/test_backlog_forgeries.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autopilot.hook.tree_mark import mark_now, write_tree_mark
from autopilot.store.paths import runs_root
from tests.hook.sessions import armed_session, blocks, events_of, state_of
from tests.hook.test_hook_backlog import ITEMS, _report, _tasks
from tests.loop.test_backlog_forgeries import forged_completion


def _only(project: Path, *items: dict[str, Any]) -> None:
    (project / ".autopilot").mkdir(exist_ok=True)
    tasks = project / ".autopilot" / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(i) + "\n" for i in items))


def _append(run_id: str, *events: dict[str, Any]) -> None:
    with (runs_root() / run_id / "events.jsonl").open("a") as log:
        for event in events:
            log.write(json.dumps({**event, "ts": 1, "runId": run_id}) + "\n")


def _write_item(project: Path, item: dict[str, Any]) -> None:
    rows = [item if i["id"] == item["id"] else i for i in _tasks(project).values()]
    _only(project, *rows)


def _notes(run_id: str) -> list[str]:
    return [str(e.get("note")) for e in events_of(run_id) if e["type"] == "warning"]


def test_a_completion_forged_in_tasks_jsonl_and_the_log_is_checked_before_the_run_ends(
    tmp_path: Path, project: Path
) -> None:
    _only(project, ITEMS[0])
    clock, run_id, session = armed_session(tmp_path, project, prompt=None, backlog=True)
    assert "work-item: a" in blocks(session.stop(clock, last="armed"))
    forged = forged_completion(ITEMS[0], attempt=1)  # a.md is never written
    _write_item(project, forged)
    _append(
        run_id,
        {"type": "workitem_recorded", "itemId": "a", "iteration": 1, "item": forged},
        {"type": "workitem_end", "itemId": "a", "iteration": 1, "status": "completed"},
    )
    again = blocks(session.stop(clock, active=True, last="all done"))
    assert "work-item: a" in again and "test -f a.md" in again
    assert state_of(run_id)["status"] != "completed"
    verified = [e for e in events_of(run_id) if e["type"] == "backlog_verified"]
    assert [(e["passed"], e["reopened"]) for e in verified] == [(False, ["a"])]
    assert _tasks(project)["a"]["status"] == "running"  # taken up again at once
    (project / "a.md").write_text("a\n")
    _report(run_id, "a", "continue_next", ac1=True)
    ended = json.loads(session.stop(clock, active=True, last="a done"))
    assert "ended: completed (backlog_done)" in ended["systemMessage"]
    verified = [e for e in events_of(run_id) if e["type"] == "backlog_verified"]
    assert [e["passed"] for e in verified] == [False, True]
    assert not [n for n in _notes(run_id) if "item-marks" in n]


def test_an_attempt_count_forged_lower_in_the_log_and_tasks_jsonl_is_not_taken(
    tmp_path: Path, project: Path
) -> None:
    _only(project, ITEMS[0])
    clock, run_id, session = armed_session(
        tmp_path, project, prompt=None, backlog=True, **{"max-item-attempts": "1"}
    )
    blocks(session.stop(clock, last="armed"))
    running = {**_tasks(project)["a"], "attempt": 0}
    _write_item(project, running)
    _append(run_id, {"type": "workitem_recorded", "itemId": "a", "iteration": 1, "item": running})
    _report(run_id, "a", "continue_next", ac1=True)  # a.md is never written: its check fails
    held = json.loads(session.stop(clock, active=True, last="done"))
    assert held.get("decision") != "block", held
    a = _tasks(project)["a"]
    assert (a["status"], a["attempt"]) == ("blocked", 1)
    assert any(
        "gave work item a attempt 0, lower than the 1 the run has on record" in n
        for n in _notes(run_id)
    ), _notes(run_id)


def test_an_items_marks_rewritten_in_the_run_folder_do_not_hide_a_surface_violation(
    tmp_path: Path, project: Path
) -> None:
    _only(project, {**ITEMS[0], "allowed_surface": ["a.md"]}, ITEMS[1])
    clock, run_id, session = armed_session(tmp_path, project, prompt=None, backlog=True)
    blocks(session.stop(clock, last="armed"))
    (project / "a.md").write_text("a\n")
    (project / "secrets.txt").write_text("x\n")
    _report(run_id, "a", "continue_next", ac1=True)
    assert "work-item: a" in blocks(session.stop(clock, active=True, last="a done"))
    assert not [n for n in _notes(run_id) if "item-marks" in n]
    # The agent rewrites its item's marks, and its iteration's, as if it had started now.
    now = mark_now(project, lambda _: None)
    folder = runs_root() / run_id
    marks = {"itemId": "a", "start": now.to_json(), "since": now.to_json(), "outside": []}
    (folder / "item-marks" / "a.json").write_text(json.dumps(marks))
    write_tree_mark(folder / "iter-0002", now)
    _report(run_id, "a", "continue_next", ac1=True)
    assert "work-item: a" in blocks(session.stop(clock, active=True, last="a done again"))
    violations = [e["paths"] for e in events_of(run_id) if e["type"] == "surface_violation"]
    assert violations == [["secrets.txt"], ["secrets.txt"]]
    assert any("item-marks/a.json" in n for n in _notes(run_id)), _notes(run_id)
