"""The final evidence gate's reopening and attempt counts that never go down
(``core.backlog_verify``)."""

from __future__ import annotations

from autopilot.core.backlog_verify import (
    highest_attempts,
    raise_attempts,
    reopen_unverified,
    settled_before,
    to_verify,
)
from autopilot.core.item_report import CheckOutcome
from autopilot.core.workitems import ItemStatus, item_from_json

CHECKED = {
    "id": "a",
    "status": "completed",
    "attempt": 2,
    "acceptance_criteria": [{"id": "ac1", "text": "ok", "check": "true"}],
    "completion": {"state": "passed", "verdict": "pass"},
}


def test_only_completed_items_with_a_check_are_verified() -> None:
    items = [
        item_from_json(CHECKED),
        item_from_json({**CHECKED, "id": "b", "acceptance_criteria": ["no check"]}),
        item_from_json({**CHECKED, "id": "c", "status": "ready"}),
    ]
    assert [i.id for i in to_verify(items)] == ["a"]


def test_a_failing_check_reopens_the_item_with_its_output_or_blocks_it_at_the_limit() -> None:
    failed = CheckOutcome(False, "sha256:" + "1" * 64, ("[completion-check] ac1: exit 1",), "boom")
    item = item_from_json(CHECKED)
    reopened = reopen_unverified(item, failed, max_attempts=3)
    assert reopened.status is ItemStatus.REOPENED
    assert reopened.completion.verdict is not None and reopened.completion.verdict.value == "fail"
    assert reopened.completion.feedback is not None and "boom" in reopened.completion.feedback
    assert reopened.completion.evidence == ("[backlog-verified] [completion-check] ac1: exit 1",)
    assert reopen_unverified(item, failed, max_attempts=2).status is ItemStatus.BLOCKED


def test_the_highest_attempt_any_record_holds_is_kept() -> None:
    log = [
        {"type": "workitem_start", "itemId": "a", "attempt": 3},
        {"type": "workitem_recorded", "itemId": "a", "item": {"id": "a", "attempt": 0}},
        {"type": "backlog_snapshot", "items": [{"id": "b", "attempt": 1}]},
        {"type": "workitem_end", "itemId": "b", "attempt": True},
    ]
    assert highest_attempts(log) == {"a": 3, "b": 1}
    raised = raise_attempts([item_from_json({"id": "a", "attempt": 1})], {"a": 3})
    assert raised.items[0].attempt == 3 and raised.lowered == (("a", 1, 3),)
    assert raise_attempts(raised.items, {"a": 2}).lowered == ()


def test_only_items_completed_before_the_run_and_left_so_are_settled() -> None:
    def recorded(item_id: str, status: str) -> dict[str, object]:
        return {"type": "workitem_recorded", "itemId": item_id, "item": {"status": status}}

    events = [
        recorded("a", "completed"),
        recorded("b", "completed"),
        recorded("c", "completed"),
        recorded("d", "ready"),
        recorded("e", "completed"),
        {"type": "iteration_start", "iteration": 1},
        recorded("b", "reopened"),
        recorded("b", "completed"),
        {"type": "workitem_end", "itemId": "c", "status": "completed"},
        recorded("d", "completed"),
        recorded("f", "completed"),
    ]
    assert settled_before(events) == {"a", "e"}
    items = [item_from_json({**CHECKED, "id": i}) for i in "abcdef"]
    assert [i.id for i in to_verify(items, settled_before(events))] == ["b", "c", "d", "f"]
