"""The continuation message of a backlog iteration (pure)."""

from __future__ import annotations

from autopilot.core.continuation import continuation_message
from autopilot.core.decisions import apply_report, reopen_for_violation
from autopilot.core.decisions import start_item as start
from autopilot.core.item_report import CheckOutcome, ItemDecision, ItemReport
from autopilot.core.workitems import Criterion, FocusLayer, ItemStatus, WorkItem

ITEM = WorkItem(
    id="unit-1",
    status=ItemStatus.RUNNING,
    prompt="Implement unit 1\nwith care",
    attempt=1,
    allowed_surface=("src/unit1/**",),
    acceptance_criteria=(
        Criterion("ac1", "docs\nexist", plain=True),
        Criterion("tests", "tests pass", "pytest -q"),
    ),
)


def test_the_seed_shape_for_a_first_attempt() -> None:
    message = continuation_message("demo-1", ITEM)
    head, _, rest = message.partition("before-stop:\n")
    assert head == (
        "[autopilot]\n"
        "run: demo-1\n"
        "work-item: unit-1\n"
        "focus-layer: micro\n"
        "attempt: 1\n"
        "allowed-surface:\n"
        "- src/unit1/**\n"
        "acceptance-criteria:\n"
        "- ac1: docs exist\n"
        "- tests: tests pass [check: pytest -q]\n"
    )
    assert rest.endswith("prompt:\nImplement unit 1\nwith care\n")
    assert (
        "autopilot report continue_next --item unit-1 --criterion ac1=pass "
        '--criterion tests=pass --evidence "<what shows it>"' in rest
    )
    assert "autopilot report reopen_micro --item unit-1" in rest
    assert "autopilot report ask_user_meta --item unit-1" in rest
    assert "pending-decision" not in message
    assert "reopen-target" not in message


def test_a_reopened_item_carries_the_failing_check_output() -> None:
    failed = CheckOutcome(
        False,
        None,
        (),
        "check tests ($ pytest -q) exit 1; its output ended with:\nE   assert 2 == 3\n\n1 failed",
    )
    report = ItemReport("unit-1", ItemDecision.CONTINUE_NEXT, {"ac1": True, "tests": True})
    reopened = apply_report(ITEM, report, failed)
    message = continuation_message("demo-1", start(reopened))
    assert "attempt: 2\n" in message
    assert (
        "reopen-target: micro\n"
        "previous-attempt:\n"
        "- verdict: fail\n"
        "- check tests ($ pytest -q) exit 1; its output ended with:\n"
        "- E   assert 2 == 3\n"
        "-\n"
        "- 1 failed\n"
        "before-stop:\n"
    ) in message


def test_a_missing_decision_and_the_runs_surface() -> None:
    item = WorkItem(id="b", status=ItemStatus.RUNNING, prompt="p", focus_layer=FocusLayer.MESO)
    message = continuation_message("r-1", item, pending_missing=True, run_surface=("docs/**",))
    assert "focus-layer: meso\nattempt: 0\npending-decision: missing\n" in message
    assert "allowed-surface:\n- docs/**\n" in message
    assert "acceptance-criteria:\n- (none given: the prompt says what done means)\n" in message
    bare = continuation_message("r-1", item)
    assert "allowed-surface:\n- any path\n" in bare
    assert "autopilot report continue_next --item b --evidence" in bare


def test_a_reopened_item_has_a_short_notice_and_others_none() -> None:
    from autopilot.core.continuation import reopened_notice
    from autopilot.core.decisions import reopen_for_violation

    reopened = reopen_for_violation(ITEM, ["deploy/prod.yaml"])
    assert reopened_notice(reopened) == (
        "Work item unit-1 was reopened (micro) after attempt 1: changed files outside the "
        "allowed surface: deploy/prod.yaml. It is back in the queue; when it is your work "
        "item, its prompt says what to fix."
    )
    assert reopened_notice(ITEM) is None
    long = reopen_for_violation(ITEM, [f"src/some/deep/folder/file-{n}.txt" for n in range(20)])
    notice = reopened_notice(long)
    assert notice is not None and "…. It is back in the queue" in notice


def test_a_surface_violation_is_in_every_later_prompt_of_the_item() -> None:
    violated = reopen_for_violation(ITEM, ["secrets.txt"])
    second = continuation_message("demo-1", start(violated))
    assert second.partition("previous-attempt:\n")[2].partition("before-stop:")[0] == (
        "- verdict: fail\n- changed files outside the allowed surface: secrets.txt\n"
    )
    # The next attempt's own decision replaces the feedback, not the violation.
    retried = apply_report(
        start(violated),
        ItemReport("unit-1", ItemDecision.RETRY_SAME_UNIT, {}, ("half the tests pass",)),
    )
    third = continuation_message("demo-1", start(retried))
    assert third.partition("previous-attempt:\n")[2].partition("before-stop:")[0] == (
        "- verdict: fail\n"
        "- half the tests pass\n"
        "- an earlier attempt changed files outside the allowed surface (autopilot reverts "
        "nothing; undo what the item does not need): secrets.txt\n"
    )
