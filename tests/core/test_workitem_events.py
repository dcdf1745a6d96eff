"""Backlog events: the seed reader folds them, and tasks.jsonl can be rebuilt from them."""

from __future__ import annotations

from typing import Any

from autopilot.core.decisions import apply_report, start_item
from autopilot.core.item_report import ItemDecision, ItemReport
from autopilot.core.workitem_events import (
    MAX_SNAPSHOT_ITEMS,
    backlog_snapshot_fields,
    rebuild_items,
    workitem_end_fields,
    workitem_recorded_fields,
    workitem_start_fields,
)
from autopilot.core.workitems import Criterion, ItemStatus, WorkItem, item_from_json
from autopilot.store.events import parse_event_line, serialize_event
from autopilot.store.fold import fold

A = WorkItem(id="a", title="Write docs", prompt="write the docs")
B = WorkItem(
    id="b",
    prompt="Test it\nwith care",
    depends_on=("a",),
    acceptance_criteria=(Criterion("ac1", "tests pass", "true"),),
)


def _event(kind: str, ts: int, fields: dict[str, Any]) -> dict[str, Any]:
    line = serialize_event({"type": kind, "ts": ts, "runId": "r-1", **fields})
    assert line is not None
    parsed = parse_event_line(line)
    assert parsed is not None
    return parsed


def _run_log() -> list[dict[str, Any]]:
    running = start_item(A)
    done = apply_report(running, ItemReport("a", ItemDecision.CONTINUE_NEXT, {}))
    return [
        _event("armed", 1, {"label": "x"}),
        _event("workitem_recorded", 2, workitem_recorded_fields(A)),
        _event("workitem_recorded", 3, workitem_recorded_fields(B)),
        _event("backlog_snapshot", 4, backlog_snapshot_fields([A, B])),
        _event("iteration_start", 5, {"iteration": 1}),
        _event("workitem_start", 6, workitem_start_fields(running, 1)),
        _event("workitem_end", 7, workitem_end_fields(done, 1, "continue_next")),
        _event("backlog_snapshot", 8, backlog_snapshot_fields([done, B])),
    ]


def test_the_seed_fields_fold_as_the_seed_reader_folds_them() -> None:
    snap = fold(_run_log())
    assert snap.completedWorkItems == [
        {
            "kind": "issue",
            "ref": None,
            "title": "a: Write docs",
            "startedAt": 6,
            "endedAt": 7,
            "closesN": 1,
        }
    ]
    assert snap.activeWorkItem is None
    assert snap.closedByLoop == 1
    assert snap.backlog == {"redCi": None, "openPrs": None, "openIssues": 1, "closedByLoop": 1}


def test_the_fold_carries_every_item_with_its_status() -> None:
    snap = fold(_run_log())
    assert snap.workItems == [
        {"id": "a", "title": "a: Write docs", "status": "completed", "attempt": 1},
        {"id": "b", "title": "b: Test it", "status": "ready", "attempt": 0},
    ]
    running = fold(_run_log()[:6])
    assert running.workItems[0]["status"] == "running"
    assert running.activeWorkItem is not None
    assert running.activeWorkItem["title"] == "a: Write docs"


def test_the_backlog_is_rebuilt_from_the_log_alone() -> None:
    rebuilt = [item_from_json(data) for data in rebuild_items(_run_log())]
    assert [(i.id, i.status, i.attempt) for i in rebuilt] == [
        ("a", ItemStatus.COMPLETED, 1),
        ("b", ItemStatus.READY, 0),
    ]
    assert rebuilt[1].acceptance_criteria == B.acceptance_criteria
    assert rebuilt[1].depends_on == ("a",)


def test_an_item_removed_by_a_person_stays_removed_in_the_rebuild() -> None:
    log = [*_run_log(), _event("backlog_snapshot", 9, backlog_snapshot_fields([B]))]
    assert [d["id"] for d in rebuild_items(log)] == ["b"]


def test_a_long_backlog_snapshot_is_cut_and_says_so() -> None:
    items = [WorkItem(id=f"item-{n:04d}") for n in range(MAX_SNAPSHOT_ITEMS + 5)]
    fields = backlog_snapshot_fields(items)
    assert len(fields["items"]) == MAX_SNAPSHOT_ITEMS
    assert fields["itemsTruncated"] is True
    assert fields["openIssues"] == MAX_SNAPSHOT_ITEMS + 5
    assert serialize_event({"type": "backlog_snapshot", "ts": 1, "runId": "r-1", **fields})


def test_a_title_is_cut_to_200_units_without_splitting_a_surrogate_pair() -> None:
    item = WorkItem(id="a", title="\U0001f600" * 150)
    title = workitem_start_fields(item, 1)["title"]
    assert title == "a: " + "\U0001f600" * 98
