"""One backlog iteration before and after the agent (pure table tests)."""

from __future__ import annotations

from autopilot.core.backlog_step import (
    backlog_gate,
    choose_report,
    conclude_item,
    plan_iteration,
    reconcile,
)
from autopilot.core.item_report import CheckOutcome, ItemDecision, ItemReport
from autopilot.core.workitems import (
    Completion,
    CompletionState,
    Criterion,
    ItemStatus,
    Verdict,
    WorkItem,
)

A = WorkItem(id="a", prompt="do a", acceptance_criteria=(Criterion("ac1", "x", "true"),))
B = WorkItem(id="b", prompt="do b", depends_on=("a",))
PASSED = Completion(state=CompletionState.PASSED, verdict=Verdict.PASS)


def test_the_first_ready_item_is_started_with_its_prompt() -> None:
    plan = plan_iteration("r-1", [A, B], 1)
    assert plan.item is not None and plan.item.id == "a"
    assert (plan.item.status, plan.item.attempt) == (ItemStatus.RUNNING, 1)
    assert [i.status for i in plan.items] == [ItemStatus.RUNNING, ItemStatus.READY]
    assert plan.prompt is not None and plan.prompt.startswith("[autopilot]\nrun: r-1\n")
    assert "pending-decision" not in plan.prompt
    assert [e["type"] for e in plan.events] == ["workitem_recorded", "workitem_start"]


def test_a_running_item_is_resumed_with_pending_decision_missing() -> None:
    running = A.with_status(ItemStatus.RUNNING, attempt=1)
    plan = plan_iteration("r-1", [running, B], 2)
    assert plan.item is not None and plan.item.attempt == 1
    assert plan.prompt is not None and "pending-decision: missing" in plan.prompt


def test_done_only_when_every_completed_item_passed() -> None:
    done = [
        A.with_status(ItemStatus.COMPLETED, completion=PASSED),
        B.with_status(ItemStatus.NOT_APPLICABLE),
    ]
    assert plan_iteration("r-1", done, 3).done
    by_hand = [A.with_status(ItemStatus.COMPLETED), B.with_status(ItemStatus.STOPPED)]
    plan = plan_iteration("r-1", by_hand, 3)
    assert not plan.done
    assert plan.question == (
        "work item a is completed without passing evidence; reopen it (autopilot tasks "
        "reopen ID) or mark it not_applicable (autopilot tasks edit ID --status "
        "not_applicable)"
    )
    both = [A.with_status(ItemStatus.COMPLETED), B.with_status(ItemStatus.COMPLETED)]
    assert str(plan_iteration("r-1", both, 3).question).startswith(
        "work items a, b are completed without passing evidence; reopen them"
    )
    assert backlog_gate(str(plan.question))
    assert backlog_gate(str(plan_iteration("r-1", both, 3).question))
    assert not backlog_gate("Which format?")


def test_a_person_is_asked_when_nothing_can_start() -> None:
    blocked = A.with_status(ItemStatus.BLOCKED, blocked_reason="Which database?")
    plan = plan_iteration("r-1", [blocked, B], 1)
    assert plan.item is None and not plan.done
    assert plan.question == "no work item can start: a is blocked: Which database?"
    cycle = [WorkItem(id="x", depends_on=("y",)), WorkItem(id="y", depends_on=("x",))]
    assert plan_iteration("r-1", cycle, 1).question == (
        "no work item can start: dependency cycle: x -> y -> x"
    )


def test_choose_report_takes_the_newest_valid_one() -> None:
    running = A.with_status(ItemStatus.RUNNING)
    items = [running, B]
    bad = ItemReport("a", ItemDecision.CONTINUE_NEXT, {})
    other = ItemReport("b", ItemDecision.STOP, {})
    first = ItemReport("a", ItemDecision.REOPEN_MICRO, {}, ("x",))
    last = ItemReport("a", ItemDecision.CONTINUE_NEXT, {"ac1": True})
    chosen, problems = choose_report(items, "a", [first, bad, other, last])
    assert chosen == last
    assert problems == [
        "a continue_next report was refused: continue_next needs a pass for every criterion "
        "of a; add --criterion ac1=pass once each one holds",
        "a report about 'b' was ignored: a was running",
    ]


def test_conclude_applies_the_decision_and_snapshots_the_backlog() -> None:
    running = A.with_status(ItemStatus.RUNNING, attempt=1)
    report = ItemReport("a", ItemDecision.CONTINUE_NEXT, {"ac1": True})
    done = conclude_item([running, B], running, report, CheckOutcome(True, "sha256:" + "0" * 64), 1)
    assert done.item.status is ItemStatus.COMPLETED
    assert (done.decision, done.question, done.stop) == (ItemDecision.CONTINUE_NEXT, None, False)
    end, recorded, snapshot = done.events
    assert end["type"] == "workitem_end" and end["closesN"] == 1
    assert recorded["type"] == "workitem_recorded"
    assert snapshot["counts"] == {"ready": 1, "completed": 1}
    # b's dependency is now met: it is next.
    nxt = plan_iteration("r-1", done.items, 2)
    assert nxt.item is not None and nxt.item.id == "b"


def test_conclude_without_a_report_keeps_the_item_running() -> None:
    running = A.with_status(ItemStatus.RUNNING, attempt=1)
    missing = conclude_item([running], running, None, None, 1)
    assert missing.item.status is ItemStatus.RUNNING
    assert missing.decision is None
    assert missing.events[0]["decision"] is None


def test_ask_user_meta_and_stop() -> None:
    running = A.with_status(ItemStatus.RUNNING, attempt=1)
    asked = conclude_item(
        [running],
        running,
        ItemReport("a", ItemDecision.ASK_USER_META, {}, ("Which db?",)),
        None,
        1,
    )
    assert asked.question == "Which db?"
    stopped = conclude_item([running], running, ItemReport("a", ItemDecision.STOP, {}), None, 1)
    assert stopped.stop and stopped.item.status is ItemStatus.STOPPED


def test_reconcile_undoes_what_the_agent_changed_but_keeps_new_items() -> None:
    ours = [A.with_status(ItemStatus.RUNNING), B]
    weakened = A.with_status(ItemStatus.COMPLETED, acceptance_criteria=())
    new = WorkItem(id="c", prompt="found while working")
    result = reconcile(ours, [weakened, new], agent_worked=True)
    assert [i.id for i in result.items] == ["a", "b", "c"]
    assert result.items[0] == ours[0]
    assert result.rewrite
    assert result.notes == (
        "work items a were changed while the agent worked; undone (pause the run to edit "
        ".autopilot/tasks.jsonl)",
        "work items b were removed while the agent worked; restored",
    )
    assert [e["itemId"] for e in result.events] == ["c"]


def test_reconcile_accepts_a_persons_edit_between_iterations() -> None:
    edited = B.with_status(ItemStatus.BLOCKED, blocked_reason="later")
    result = reconcile([A, B], [A, edited], agent_worked=False)
    assert result.items == (A, edited)
    assert not result.rewrite and result.notes == ()
    assert [e["itemId"] for e in result.events] == ["b"]


def test_reconcile_writes_a_deleted_file_again() -> None:
    result = reconcile([A, B], None, agent_worked=True)
    assert result.items == (A, B) and result.rewrite
    assert result.notes == (".autopilot/tasks.jsonl was deleted; written again from the run's log",)
    assert reconcile([], None, agent_worked=False).rewrite is False


C = WorkItem(id="c", prompt="do c")


def test_a_lane_skips_items_other_lanes_hold_and_claims_its_own() -> None:
    held = A.with_status(ItemStatus.RUNNING, attempt=1)
    plan = plan_iteration("lane-2", [held, B, C], 4, taken={"a"}, claim=True)
    assert plan.item is not None and plan.item.id == "c"  # b waits for a; a is held
    assert plan.item.extra == {"claimed_by": "lane-2"}
    assert plan.item.to_json()["claimed_by"] == "lane-2"
    assert [i.status for i in plan.items] == [
        ItemStatus.RUNNING,
        ItemStatus.READY,
        ItemStatus.RUNNING,
    ]


def test_a_lane_waits_when_only_held_items_and_their_dependents_are_left() -> None:
    held = A.with_status(ItemStatus.RUNNING, attempt=1)
    plan = plan_iteration("lane-2", [held, B], 4, taken={"a"}, claim=True)
    assert (plan.item, plan.done, plan.question) == (None, False, None)
    assert plan.wait == "waiting for work items other lanes are running: a"
    assert plan.items == (held, B)


def test_a_running_item_nobody_holds_is_resumed_by_a_lane() -> None:
    orphan = A.with_status(ItemStatus.RUNNING, attempt=1, extra={"claimed_by": "gone"})
    plan = plan_iteration("lane-1", [orphan, C], 2, taken=set(), claim=True)
    assert plan.item is not None and plan.item.id == "a"
    assert plan.item.extra == {"claimed_by": "lane-1"}
    assert plan.prompt is not None and "pending-decision: missing" in plan.prompt
    # Taken over from a lane that ended: a new attempt counts toward the limit.
    assert (plan.item.status, plan.item.attempt) == (ItemStatus.RUNNING, 2)
    own = orphan.with_status(ItemStatus.RUNNING, extra={"claimed_by": "lane-1", "cut_short": 1})
    resumed = plan_iteration("lane-1", [own, C], 3, taken=set(), claim=True).item
    assert resumed is not None and resumed.attempt == 1  # its own lane resumes it


def test_a_repeated_id_is_never_next_and_its_later_line_is_never_compared() -> None:
    # Neither item of an id used twice is next (the run holds until a person fixes
    # it); a person's repeat added while the agent works is neither "undone" nor
    # recorded: the file keeps that line as written.
    repeat = WorkItem(id="a", prompt="a second a")
    plan = plan_iteration("r-1", [A, repeat, C], 1)
    assert plan.item is not None and plan.item.id == "c"
    assert plan_iteration("r-1", [A, repeat, B], 1).item is None
    running = A.with_status(ItemStatus.RUNNING, attempt=1)
    ended = reconcile([running, C], [running, C, repeat], agent_worked=True)
    assert ended.items == (running, C) and ended.notes == () and ended.events == ()
    assert not ended.rewrite
    seen = reconcile([A, C], [A, repeat, C], agent_worked=False)
    assert seen.items == (A, repeat, C) and seen.events == ()


def test_an_item_blocked_at_its_attempt_limit_asks_nothing_and_the_next_one_starts() -> None:
    c = WorkItem(id="c", prompt="do c")
    running = A.with_status(ItemStatus.RUNNING, attempt=3)
    claim = ItemReport("a", ItemDecision.CONTINUE_NEXT, {"ac1": True})
    failed = CheckOutcome(False, "sha256:" + "2" * 64, (), "check ac1 ($ false) exit 1")
    ended = conclude_item([running, B, c], running, claim, failed, 3, max_attempts=3)
    assert ended.item.status is ItemStatus.BLOCKED and ended.question is None
    assert ended.events[0]["status"] == "blocked"
    nxt = plan_iteration("r-1", ended.items, 4)
    assert nxt.item is not None and nxt.item.id == "c"
