"""A backlog run ends on its work items, never on the agent's word (pure)."""

from __future__ import annotations

import pytest

from autopilot.config import RunConfig
from autopilot.core.attempt import Attempt, BacklogFacts
from autopilot.core.change import LoopState
from autopilot.core.policy import PolicyConfig
from autopilot.core.step import conclude
from autopilot.core.vocabulary import Action, EndedBy, Reason

BACKLOG = PolicyConfig(backlog=True, stagnation_limit=0)
PROMPT = PolicyConfig(stagnation_limit=0)


def _attempt(final: str, backlog: BacklogFacts | None, ended_by: EndedBy = EndedBy.EXIT) -> Attempt:
    return Attempt(
        number=1,
        folder="iter-0001",
        prompt="work-item: a",
        ended_by=ended_by,
        result_seen=True,
        final_message=final,
        backlog=backlog,
    )


@pytest.mark.parametrize(
    ("config", "final", "facts", "ended_by", "action", "reason"),
    [
        # A prompt run completes on its promise.
        (PROMPT, "COMPLETE", None, EndedBy.EXIT, Action.COMPLETE, Reason.COMPLETION_PROMISE),
        # A backlog attempt that concluded no item (a crash recovery that lost it)
        # never completes the run, however it ended.
        (BACKLOG, "COMPLETE", None, EndedBy.DRIVER_DIED, Action.CONTINUE, None),
        (BACKLOG, "COMPLETE", None, EndedBy.EXIT, Action.CONTINUE, None),
        # Items open: the promise is ignored.
        (BACKLOG, "COMPLETE", BacklogFacts("a", open_items=2), EndedBy.EXIT, Action.CONTINUE, None),
        # Every item done by autopilot's checks: backlog_done, promise or not.
        (
            BACKLOG,
            "done",
            BacklogFacts("a", done=True),
            EndedBy.DRIVER_DIED,
            Action.COMPLETE,
            Reason.BACKLOG_DONE,
        ),
        (
            BACKLOG,
            "done",
            BacklogFacts("a", stop=True, open_items=1),
            EndedBy.EXIT,
            Action.ABORT,
            Reason.USER_STOPPED,
        ),
    ],
)
def test_a_backlog_run_ends_on_its_items(
    config: PolicyConfig,
    final: str,
    facts: BacklogFacts | None,
    ended_by: EndedBy,
    action: Action,
    reason: Reason | None,
) -> None:
    step = conclude(LoopState(), _attempt(final, facts, ended_by), config, 1_000)
    assert (step.decision.action, step.decision.reason) == (action, reason)
    if action is Action.CONTINUE:
        assert step.ending is None
        assert "does not end a backlog run" in str(step.decision.warning)


def test_the_backlog_policy_comes_from_the_run_mode() -> None:
    assert RunConfig().policy("backlog").backlog is True
    assert RunConfig().policy("prompt").backlog is False
    assert RunConfig().policy("self-improve").backlog is False
