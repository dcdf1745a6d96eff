"""Each decision's effect on a work item, and report validation (pure table tests)."""

from __future__ import annotations

import pytest

from autopilot.core.decisions import (
    MISSING_REPORTS_BEFORE_ASKING,
    answer_item,
    apply_report,
    attempts_used,
    fresh_attempts,
    limit_attempts,
    missing_report,
    reopen_for_violation,
    start_item,
)
from autopilot.core.item_report import CheckOutcome, ItemDecision, ItemReport, validate_report
from autopilot.core.workitems import (
    CompletionState,
    Criterion,
    FocusLayer,
    ItemStatus,
    Verdict,
    WorkItem,
)

RUNNING = WorkItem(
    id="unit-1",
    status=ItemStatus.RUNNING,
    prompt="do it",
    attempt=1,
    acceptance_criteria=(
        Criterion("ac1", "docs exist", plain=True),
        Criterion("tests", "tests pass", "pytest -q"),
    ),
)
OTHER = WorkItem(id="unit-2", status=ItemStatus.READY)
ITEMS = [RUNNING, OTHER]
BOTH_PASS = {"ac1": True, "tests": True}


def _report(decision: str, criteria: dict[str, bool] | None = None, *evidence: str) -> ItemReport:
    return ItemReport("unit-1", ItemDecision(decision), criteria or {}, tuple(evidence))


@pytest.mark.parametrize(
    ("report", "problems"),
    [
        (_report("continue_next", BOTH_PASS), []),
        (_report("retry_same_unit", {}, "flaky"), []),
        (_report("reopen_meso", {"tests": False}, "api wrong"), []),
        (_report("ask_user_meta", {}, "Which db?"), []),
        (_report("stop"), []),
        (
            ItemReport("nope", ItemDecision.STOP, {}),
            [
                "no work item 'nope' in .autopilot/tasks.jsonl (the running item is 'unit-1'; "
                "see autopilot tasks list)"
            ],
        ),
        (
            ItemReport("unit-2", ItemDecision.STOP, {}),
            ["work item 'unit-2' is ready, not running: report on the running item 'unit-1'"],
        ),
        (
            _report("continue_next", {**BOTH_PASS, "ac9": True}),
            [
                "criterion 'ac9' is not one of unit-1's criteria (ac1, tests); "
                "see autopilot tasks show unit-1"
            ],
        ),
        (
            _report("continue_next", {"ac1": True}),
            [
                "continue_next needs a pass for every criterion of unit-1; add "
                "--criterion tests=pass once each one holds"
            ],
        ),
        (
            _report("continue_next", {"ac1": True, "tests": False}),
            [
                "continue_next with failing criteria (tests): report reopen_micro (or "
                "retry_same_unit) with --evidence saying what fails"
            ],
        ),
        (
            _report("retry_same_unit"),
            ["retry_same_unit needs --evidence TEXT with what failed or what is left"],
        ),
        (
            _report("reopen_micro", {}, "  "),
            ["reopen_micro needs --evidence TEXT with what failed or what is left"],
        ),
        (
            _report("ask_user_meta"),
            ["ask_user_meta needs --evidence TEXT with the question for the user"],
        ),
    ],
)
def test_validate_report(report: ItemReport, problems: list[str]) -> None:
    assert validate_report(ITEMS, report) == problems


def test_validate_report_with_nothing_running() -> None:
    assert validate_report([OTHER], ItemReport("unit-2", ItemDecision.STOP, {})) == [
        "work item 'unit-2' is ready, not running: no item is running"
    ]


PASSED = CheckOutcome(True, "sha256:" + "a" * 64, ("[completion-check] tests: exit 0",))
FAILED = CheckOutcome(
    False, "sha256:" + "b" * 64, ("[completion-check] tests: exit 1",), "$ pytest -q\n1 failed"
)


@pytest.mark.parametrize(
    ("report", "checks", "status", "state", "verdict", "target", "feedback"),
    [
        (
            _report("continue_next", BOTH_PASS, "wrote docs"),
            PASSED,
            ItemStatus.COMPLETED,
            CompletionState.PASSED,
            Verdict.PASS,
            None,
            None,
        ),
        (
            _report("continue_next", BOTH_PASS),
            None,
            ItemStatus.COMPLETED,
            CompletionState.PASSED,
            Verdict.PASS,
            None,
            None,
        ),
        (
            _report("continue_next", BOTH_PASS),
            FAILED,
            ItemStatus.REOPENED,
            CompletionState.FAILED,
            Verdict.FAIL,
            FocusLayer.MICRO,
            "$ pytest -q\n1 failed",
        ),
        (
            _report("retry_same_unit", {}, "network flake"),
            None,
            ItemStatus.READY,
            CompletionState.IN_PROGRESS,
            None,
            None,
            "network flake",
        ),
        (
            _report("reopen_micro", {"tests": False}, "a test fails"),
            None,
            ItemStatus.REOPENED,
            CompletionState.FAILED,
            Verdict.FAIL,
            FocusLayer.MICRO,
            "a test fails",
        ),
        (
            _report("reopen_meso", {}, "module design"),
            None,
            ItemStatus.REOPENED,
            CompletionState.FAILED,
            Verdict.FAIL,
            FocusLayer.MESO,
            "module design",
        ),
        (
            _report("reopen_macro", {}, "wrong approach"),
            None,
            ItemStatus.REOPENED,
            CompletionState.FAILED,
            Verdict.FAIL,
            FocusLayer.MACRO,
            "wrong approach",
        ),
        (
            _report("ask_user_meta", {}, "Which database?"),
            None,
            ItemStatus.BLOCKED,
            CompletionState.AWAITING_USER,
            None,
            None,
            None,
        ),
        (_report("stop"), None, ItemStatus.STOPPED, CompletionState.STOPPED, None, None, None),
    ],
)
def test_apply_report(
    report: ItemReport,
    checks: CheckOutcome | None,
    status: ItemStatus,
    state: CompletionState,
    verdict: Verdict | None,
    target: FocusLayer | None,
    feedback: str | None,
) -> None:
    item = apply_report(RUNNING, report, checks)
    assert (
        item.status,
        item.completion.state,
        item.completion.verdict,
        item.completion.reopen_target,
        item.completion.feedback,
    ) == (status, state, verdict, target, feedback)
    assert item.attempt == RUNNING.attempt
    assert item.prompt == RUNNING.prompt


def test_continue_next_records_the_digest_and_criterion_bound_evidence() -> None:
    item = apply_report(RUNNING, _report("continue_next", BOTH_PASS, "wrote docs"), PASSED)
    assert item.completion.completion_check_digest == PASSED.digest
    assert item.completion.evidence == (
        "wrote docs",
        "claim-evidence-map: ac1=pass",
        "claim-evidence-map: tests=pass",
        "[completion-check] tests: exit 0",
    )


def test_ask_user_meta_keeps_the_question() -> None:
    item = apply_report(RUNNING, _report("ask_user_meta", {}, "Which database?"))
    assert item.blocked_reason == "Which database?"
    answered = answer_item(item, "sqlite")
    assert answered.status is ItemStatus.READY
    assert answered.blocked_reason is None
    assert answered.completion.feedback == "question: Which database?\nanswer: sqlite"


def test_feedback_keeps_the_tail_of_long_output() -> None:
    long = CheckOutcome(False, None, (), "x" * 10_000 + "THE END")
    item = apply_report(RUNNING, _report("continue_next", BOTH_PASS), long)
    assert item.completion.feedback is not None
    assert item.completion.feedback.endswith("THE END")
    assert len(item.completion.feedback) == 4000


@pytest.mark.parametrize(
    ("status", "attempt", "expected_attempt"),
    [(ItemStatus.READY, 0, 1), (ItemStatus.REOPENED, 2, 3), (ItemStatus.RUNNING, 2, 2)],
)
def test_start_item(status: ItemStatus, attempt: int, expected_attempt: int) -> None:
    started = start_item(WorkItem(id="a", status=status, attempt=attempt))
    assert started.status is ItemStatus.RUNNING
    assert started.attempt == expected_attempt
    assert started.completion.state in (CompletionState.IN_PROGRESS, CompletionState.NOT_STARTED)


def test_a_missing_report_resumes_then_asks_a_person() -> None:
    item = RUNNING
    for count in range(1, MISSING_REPORTS_BEFORE_ASKING):
        item = missing_report(item)
        assert item.status is ItemStatus.RUNNING
        assert item.extra["missing_decisions"] == count
    item = missing_report(item)
    assert item.status is ItemStatus.BLOCKED
    assert item.completion.state is CompletionState.AWAITING_USER
    assert "missing_decisions" not in item.extra
    assert item.blocked_reason is not None and "without a decision" in item.blocked_reason


def test_a_report_clears_the_missing_count() -> None:
    item = apply_report(missing_report(RUNNING), _report("stop"))
    assert "missing_decisions" not in item.extra


def test_a_surface_violation_reopens_with_the_paths() -> None:
    item = reopen_for_violation(RUNNING, ["secrets.txt", "etc/x"])
    assert item.status is ItemStatus.REOPENED
    assert item.completion.reopen_target is FocusLayer.MICRO
    assert item.completion.feedback == (
        "changed files outside the allowed surface: secrets.txt, etc/x"
    )
    assert item.completion.surface_violations == ("secrets.txt", "etc/x")
    assert item.completion.evidence == (
        "surface-violation: changed files outside the allowed surface: secrets.txt, etc/x",
    )


def test_a_surface_violation_keeps_the_attempts_own_report_as_evidence() -> None:
    said = _report("continue_next", BOTH_PASS, "wrote the docs")
    item = reopen_for_violation(RUNNING, ["secrets.txt"], said)
    assert item.completion.evidence == (
        "wrote the docs",
        "claim-evidence-map: ac1=pass",
        "claim-evidence-map: tests=pass",
        "surface-violation: changed files outside the allowed surface: secrets.txt",
    )


KEPT = "surface-violation (an earlier attempt; autopilot reverts nothing): secrets.txt"


@pytest.mark.parametrize(
    ("report", "checks", "status"),
    [
        (_report("continue_next", BOTH_PASS, "done"), None, ItemStatus.COMPLETED),
        (
            _report("continue_next", BOTH_PASS, "done"),
            CheckOutcome(passed=False, failure="exit 1"),
            ItemStatus.REOPENED,
        ),
        (_report("retry_same_unit", {}, "flaky"), None, ItemStatus.READY),
        (_report("reopen_meso", {}, "module design"), None, ItemStatus.REOPENED),
        (_report("ask_user_meta", {}, "Which db?"), None, ItemStatus.BLOCKED),
        (_report("stop", {}, "enough"), None, ItemStatus.STOPPED),
    ],
)
def test_a_surface_violation_stays_on_the_record_whatever_comes_next(
    report: ItemReport, checks: CheckOutcome | None, status: ItemStatus
) -> None:
    violated = start_item(reopen_for_violation(RUNNING, ["secrets.txt"]))
    after = apply_report(violated, report, checks)
    assert after.status is status
    assert after.completion.surface_violations == ("secrets.txt",)
    assert KEPT in after.completion.evidence
    # ... and a later violation adds its paths to it.
    again = reopen_for_violation(start_item(after), ["etc/x", "secrets.txt"])
    assert again.completion.surface_violations == ("secrets.txt", "etc/x")


def test_a_merge_conflict_reopens_the_item_naming_the_files() -> None:
    from autopilot.core.decisions import reopen_for_conflict
    from autopilot.core.workitems import Completion, CompletionState, FocusLayer, Verdict

    done = WorkItem(
        id="a",
        status=ItemStatus.COMPLETED,
        completion=Completion(CompletionState.PASSED, Verdict.PASS, evidence=("tests pass",)),
    )
    reopened = reopen_for_conflict(done, ["src/x.py", "README.md"])
    assert reopened.status is ItemStatus.REOPENED
    assert reopened.completion.verdict is Verdict.FAIL
    assert reopened.completion.reopen_target is FocusLayer.MICRO
    note = "merging into the run branch conflicted in: src/x.py, README.md"
    assert reopened.completion.evidence == ("tests pass", note)
    assert reopened.completion.feedback is not None
    assert reopened.completion.feedback.startswith(note)


FAILED_CHECK = CheckOutcome(
    passed=False,
    digest="sha256:" + "1" * 64,
    evidence=("[completion-check] ac1: exit 1",),
    failure="check ac1 ($ pytest -q) exit 1; its output ended with:\n1 failed",
)


@pytest.mark.parametrize(
    ("attempt", "max_attempts", "status"),
    [
        (1, 3, ItemStatus.REOPENED),
        (2, 3, ItemStatus.REOPENED),
        (3, 3, ItemStatus.BLOCKED),
        (7, 0, ItemStatus.REOPENED),  # 0: no limit
        (1, 1, ItemStatus.BLOCKED),
    ],
)
def test_an_item_that_keeps_failing_is_blocked_at_its_attempt_limit(
    attempt: int, max_attempts: int, status: ItemStatus
) -> None:
    running = RUNNING.with_status(ItemStatus.RUNNING, attempt=attempt)
    claim = ItemReport("unit-1", ItemDecision.CONTINUE_NEXT, {"ac1": True})
    after = limit_attempts(apply_report(running, claim, FAILED_CHECK), max_attempts)
    assert after.status is status
    if status is ItemStatus.BLOCKED:
        assert after.blocked_reason == (
            f"{attempt} attempt{'s' if attempt > 1 else ''} did not complete it (the limit is "
            f"{max_attempts}); last verdict fail: check ac1 ($ pytest -q) exit 1; its output "
            "ended with: 1 failed; "
            f"autopilot tasks unblock unit-1 gives it {max_attempts} more"
        )
        assert after.completion.completion_check_digest == FAILED_CHECK.digest


def test_completed_stopped_and_asking_items_are_never_limited() -> None:
    running = RUNNING.with_status(ItemStatus.RUNNING, attempt=9)
    done = apply_report(
        running, ItemReport("unit-1", ItemDecision.CONTINUE_NEXT, {"ac1": True}), None
    )
    asked = apply_report(
        running, ItemReport("unit-1", ItemDecision.ASK_USER_META, {}, ("?",)), None
    )
    assert limit_attempts(done, 3) == done
    assert limit_attempts(asked, 3) == asked


def test_a_person_gives_an_item_fresh_attempts() -> None:
    tried = RUNNING.with_status(ItemStatus.BLOCKED, attempt=3, blocked_reason="3 attempts…")
    assert attempts_used(tried) == 3
    answered = answer_item(tried, "try the other API")
    assert attempts_used(answered) == 0 and answered.attempt == 3
    again = start_item(answered)
    assert attempts_used(again) == 1
    assert attempts_used(fresh_attempts(again)) == 0
    # A hand-edited count that makes no sense counts every attempt.
    odd = WorkItem(id="x", prompt="p", attempt=2, extra={"attempts_from": 5})
    assert attempts_used(odd) == 2
