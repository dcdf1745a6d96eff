"""Which blocked items a person's answer at a backlog run's gate goes to (pure)."""

from __future__ import annotations

from autopilot.core.decisions import answer_item, apply_report, limit_attempts, start_item
from autopilot.core.gate_answer import answer_targets, answered_note
from autopilot.core.item_report import CheckOutcome, ItemDecision, ItemReport
from autopilot.core.workitems import ItemStatus, WorkItem

FAILED = CheckOutcome(passed=False, failure="check ac1 failed")


def _spent(item_id: str, attempts: int = 3) -> WorkItem:
    running = WorkItem(id=item_id, status=ItemStatus.RUNNING, prompt="p", attempt=attempts)
    claim = ItemReport(item_id, ItemDecision.CONTINUE_NEXT, {})
    return limit_attempts(apply_report(running, claim, FAILED), attempts)


ASKED = WorkItem(id="asks", status=ItemStatus.BLOCKED, blocked_reason="Which database?")
HELD = WorkItem(id="held", status=ItemStatus.BLOCKED, blocked_reason="waiting for the vendor")


def test_at_the_no_item_gate_every_item_blocked_for_attempts_is_answered() -> None:
    items = [HELD, _spent("alpha"), ASKED, _spent("beta")]
    gate = "no work item can start: " + "; ".join(f"{i.id} is blocked: …" for i in items)
    targets = answer_targets(items, gate)
    assert [i.id for i in targets] == ["alpha", "beta"]
    assert answered_note(targets) == "alpha, beta get more attempts"
    assert answered_note(targets[:1]) == "alpha gets more attempts"


def test_a_question_is_answered_to_the_item_that_asked_it() -> None:
    items = [_spent("alpha"), ASKED]
    assert answer_targets(items, "Which database?") == [ASKED]
    assert answered_note([ASKED]) == "for asks"
    gate = "no work item can start: held is blocked: waiting; asks is blocked: Which database?"
    assert answer_targets([HELD, ASKED], gate) == [HELD]
    assert answer_targets([WorkItem(id="x")], gate) == []


def test_an_item_blocked_again_after_more_attempts_names_them() -> None:
    again = start_item(answer_item(_spent("alpha"), "try harder"))
    claim = ItemReport("alpha", ItemDecision.CONTINUE_NEXT, {})
    once = limit_attempts(apply_report(again, claim, FAILED), 1)
    assert (once.blocked_reason or "").startswith("attempt 4 did not complete it (the limit is 1)")
    for _ in range(2):
        claim_after = apply_report(start_item(answer_item(once, "again")), claim, FAILED)
        once = limit_attempts(claim_after, 1)
    assert (once.blocked_reason or "").startswith("attempt 6 did not complete it")
    three = start_item(answer_item(_spent("beta"), "x"))
    for _ in range(2):
        three = start_item(apply_report(three, claim, FAILED))
    blocked = limit_attempts(apply_report(three, claim, FAILED), 3)
    assert (blocked.blocked_reason or "").startswith("attempts 4-6 did not complete it")


def test_one_spent_attempt_and_a_check_with_no_output_read_as_such() -> None:
    running = WorkItem(id="a", status=ItemStatus.RUNNING, prompt="p", attempt=1)
    claim = ItemReport("a", ItemDecision.CONTINUE_NEXT, {})
    silent = CheckOutcome(
        passed=False, failure="check ac1 ($ false) exit 1; its output ended with:\n(nothing)"
    )
    reason = limit_attempts(apply_report(running, claim, silent), 1).blocked_reason or ""
    assert reason.startswith("1 attempt did not complete it (the limit is 1)"), reason
    assert "its output ended with: (nothing);" in reason


def test_an_answer_no_blocked_item_is_waiting_for_goes_to_an_open_item() -> None:
    """The gate was released as the answer came (the item unblocked meanwhile)."""
    from autopilot.core.gate_answer import answer_fallback

    alpha, beta = WorkItem(id="alpha", prompt="a"), WorkItem(id="beta", prompt="b")
    gate = "no work item can start: beta is blocked: waiting"
    assert answer_fallback([alpha, beta], gate) == [beta]  # the item it named
    assert answer_fallback([alpha, beta], "Which database?") == [alpha]  # the next one
    assert answer_fallback([HELD], gate) == []
