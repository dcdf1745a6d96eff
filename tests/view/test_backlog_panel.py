"""The live view's work-items panel for a backlog run."""

from __future__ import annotations

from autopilot.store.fold import Snapshot
from autopilot.view.present import backlog_counts, backlog_item_lines, work_item_lines

ITEMS = [
    {"id": "a", "title": "a: Write docs", "status": "completed", "attempt": 1},
    {"id": "b", "title": "b: Fix parser", "status": "reopened", "attempt": 2},
    {"id": "c", "title": "c: Release", "status": "ready", "attempt": 0},
    {"id": "d", "title": None, "status": "running", "attempt": 1},
    {"id": "e", "title": "e: Old", "status": "stopped", "attempt": 1},
]


def test_open_items_first_then_the_newest_closed() -> None:
    assert backlog_item_lines(ITEMS) == [
        ("a Write docs", "completed"),
        ("e Old", "stopped"),
        ("d", "running"),
        ("b Fix parser (attempt 2)", "reopened"),
        ("c Release", "ready"),
    ]
    assert backlog_item_lines(ITEMS, limit=2) == [
        ("d", "running"),
        ("b Fix parser (attempt 2)", "reopened"),
    ]


def test_the_panel_uses_the_folded_items_with_their_counts() -> None:
    snapshot = Snapshot(workItems=ITEMS)
    assert work_item_lines(snapshot)[2] == ("d", "running")
    assert backlog_counts(ITEMS) == "1 completed · 1 ready · 1 reopened · 1 running · 1 stopped"
    assert work_item_lines(Snapshot()) == []


def test_the_timeline_describes_backlog_events() -> None:
    from autopilot.view.describe import describe_event

    start = {
        "type": "workitem_start",
        "kind": "issue",
        "title": "a: Docs",
        "itemId": "a",
        "attempt": 2,
    }
    assert describe_event(start) == "a: Docs (running, attempt 2)"
    end = {
        "type": "workitem_end",
        "kind": "issue",
        "title": "a: Docs",
        "itemId": "a",
        "status": "completed",
        "attempt": 1,
    }
    assert describe_event(end) == "a: Docs (completed, attempt 1)"
    assert describe_event({"type": "workitem_end", "kind": "issue", "title": "x"}) == "issue x"
    assert describe_event({"type": "gate", "state": "waiting", "question": "Which?"}) == (
        "waiting: Which?"
    )
    violation = {"type": "surface_violation", "itemId": "a", "paths": ["x", "y"]}
    assert describe_event(violation) == "a changed x, y outside its surface"


def test_verify_events_read_as_one_line() -> None:
    from autopilot.view.describe import describe_event

    failed = {"type": "verify", "passed": False, "results": ["$ make test: exit 2"]}
    assert describe_event(failed) == "failed: $ make test: exit 2"
    passed = {"type": "verify", "passed": True, "results": ["$ a: exit 0", "$ b: exit 0"]}
    assert describe_event(passed) == "passed: $ a: exit 0; $ b: exit 0"
    assert describe_event({"type": "verify", "passed": "x", "results": 3}) == "failed: "


def test_an_extended_budget_shows_its_new_ceiling_and_why() -> None:
    from autopilot.store.fold import fold
    from autopilot.view.describe import describe_event
    from autopilot.view.present import iteration_text

    note = "extended to 15 iterations (at most 50): uncommitted changes"
    events = [
        {"type": "armed", "ts": 1, "runId": "r", "maxIterations": 10},
        {"type": "budget_extended", "ts": 2, "runId": "r", "maxIterations": 15, "note": note},
    ]
    snapshot = fold(events)
    assert snapshot.maxIterations == 15
    assert iteration_text(None, snapshot) == "iteration 0 of 15"
    assert describe_event(events[1]) == note


def test_a_parallel_runs_events_read_as_one_line() -> None:
    from autopilot.view.describe import describe_event

    lane = {"type": "lane", "lane": 2, "laneRun": "r-lane2-1", "state": "item", "itemId": "b"}
    assert describe_event(lane) == "lane 2 r-lane2-1 on b"
    ended = {**lane, "state": "ended", "reason": "backlog_done"}
    assert describe_event(ended) == "lane 2 r-lane2-1 ended (backlog_done)"
    assert describe_event({**lane, "state": "started", "agent": "codex"}) == (
        "lane 2 r-lane2-1 started (codex)"
    )
    merged = {"type": "lane_merged", "itemId": "b", "runBranch": "autopilot/r-1", "sha": "ab"}
    assert describe_event(merged) == "b merged into autopilot/r-1"
    conflict = {"type": "merge_conflict", "itemId": "b", "runBranch": "autopilot/r", "files": ["x"]}
    assert describe_event(conflict) == "b conflicts with autopilot/r in x"
    verified = {"type": "backlog_verified", "passed": False, "items": [], "reopened": ["a"]}
    assert describe_event(verified) == "checks failed: reopened a"
    assert describe_event({**verified, "reopened": []}) == "completed items' checks pass"
