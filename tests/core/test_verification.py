"""``--verify``: a completion promise held to the verify commands' result (pure)."""

from __future__ import annotations

import pytest

from autopilot.core.attempt import Attempt, Verification
from autopilot.core.change import LoopState
from autopilot.core.policy import Decision, PolicyConfig
from autopilot.core.step import conclude
from autopilot.core.verification import awaits_verification, verify_notice, verify_rule
from autopilot.core.vocabulary import Action, EndedBy, Reason

VERIFY = PolicyConfig(verify=True)
PASSED = Verification(passed=True, results=("$ make test: exit 0",), digest="sha256:" + "0" * 64)
FAILED = Verification(
    passed=False,
    results=("$ make lint: exit 0", "$ make test: exit 2"),
    failing=("$ make test: exit 2",),
    failure="check verify2 ($ make test) exit 2; its output ended with:\n1 failed",
)
PROMISE = Decision(Action.COMPLETE, Reason.COMPLETION_PROMISE)


def _attempt(verification: Verification | None, final: str = "Done.\n\nCOMPLETE") -> Attempt:
    return Attempt(
        number=1,
        folder="iter-0001",
        prompt="work",
        ended_by=EndedBy.EXIT,
        result_seen=True,
        final_message=final,
        verification=verification,
    )


@pytest.mark.parametrize(
    ("decision", "config", "verification", "action", "warning"),
    [
        # Without verify commands the promise stands as before.
        (PROMISE, PolicyConfig(), None, Action.COMPLETE, None),
        (PROMISE, VERIFY, PASSED, Action.COMPLETE, None),
        (
            PROMISE,
            VERIFY,
            FAILED,
            Action.CONTINUE,
            "completion promise refused: $ make test: exit 2; the run goes on",
        ),
        # A driver that died before running them: never completed on the word alone.
        (
            PROMISE,
            VERIFY,
            None,
            Action.CONTINUE,
            "completion promise refused: the verify commands did not run; the run goes on",
        ),
        # Other decisions are not the verify commands' business.
        (Decision(Action.CONTINUE), VERIFY, FAILED, Action.CONTINUE, None),
        (Decision(Action.ABORT, Reason.ABORT_PROMISE), VERIFY, FAILED, Action.ABORT, None),
        (Decision(Action.COMPLETE, Reason.BACKLOG_DONE), VERIFY, None, Action.COMPLETE, None),
    ],
)
def test_verify_rule(
    decision: Decision,
    config: PolicyConfig,
    verification: Verification | None,
    action: Action,
    warning: str | None,
) -> None:
    ruled = verify_rule(decision, _attempt(verification), config)
    assert (ruled.action, ruled.warning) == (action, warning)
    if action is Action.CONTINUE and warning:
        assert ruled.reason is None


def test_awaits_verification_only_for_a_promise_with_verify_commands() -> None:
    assert awaits_verification(PROMISE, VERIFY)
    assert not awaits_verification(PROMISE, PolicyConfig())
    assert not awaits_verification(Decision(Action.CONTINUE), VERIFY)


def test_conclude_records_the_verify_commands_and_goes_on_when_one_failed() -> None:
    step = conclude(LoopState(), _attempt(FAILED), VERIFY, 1_000)
    assert step.decision.action is Action.CONTINUE and step.ending is None
    kinds = [event.type.value for event in step.events]
    assert kinds.index("verify") < kinds.index("iteration_end")
    verify = next(e.fields for e in step.events if e.type.value == "verify")
    assert verify == {
        "iteration": 1,
        "passed": False,
        "results": ["$ make lint: exit 0", "$ make test: exit 2"],
        "digest": None,
    }
    warnings = [e.fields["note"] for e in step.events if e.type.value == "warning"]
    assert warnings == ["completion promise refused: $ make test: exit 2; the run goes on"]


def test_conclude_completes_when_every_verify_command_passed() -> None:
    step = conclude(LoopState(), _attempt(PASSED), VERIFY, 1_000)
    assert step.ending is not None and step.ending.reason == Reason.COMPLETION_PROMISE


def test_the_notice_carries_the_failing_output() -> None:
    notice = verify_notice(FAILED)
    assert "$ make test) exit 2" in notice and "1 failed" in notice
    assert "completion promise again only once they pass" in notice


def test_a_promise_not_yet_verified_asks_the_driver_to_run_the_commands() -> None:
    unverified = conclude(LoopState(), _attempt(None), VERIFY, 1_000)
    assert unverified.awaits_verification and unverified.ending is None
    assert not conclude(LoopState(), _attempt(FAILED), VERIFY, 1_000).awaits_verification
    assert not conclude(LoopState(), _attempt(None), PolicyConfig(), 1_000).awaits_verification
