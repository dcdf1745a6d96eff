"""An attempt a crash of autopilot's own process cut short is not the agent's doing:
it leaves the stagnation streak, the failure breaker and a work item's no-decision
streak as they were, and is still charged (pure)."""

from __future__ import annotations

from autopilot.core.attempt import Attempt
from autopilot.core.backlog_step import conclude_item
from autopilot.core.change import LoopState
from autopilot.core.decisions import start_item
from autopilot.core.policy import PolicyConfig
from autopilot.core.state import LoopCounters
from autopilot.core.step import conclude
from autopilot.core.structs import replace
from autopilot.core.vocabulary import Action, EndedBy, EventType, Outcome, Progress
from autopilot.core.workitems import ItemStatus, WorkItem

CONFIG = PolicyConfig(stagnation_limit=3, breaker_threshold=3)
NOW_MS = 1_700_000_000_000


def _crashed(number: int) -> Attempt:
    """What recovery makes of an attempt whose driver was killed mid-stream."""
    return Attempt(
        number=number,
        folder=f"iter-{number:04d}",
        prompt="work",
        ended_by=EndedBy.DRIVER_DIED,
        result_seen=False,
        tool_calls=0,
        progress=Progress.NONE,
        cost_usd=0.25,
        duration_ms=90_000,
    )


def test_three_crashes_in_a_row_never_halt_the_run_on_stagnation() -> None:
    state = LoopState()
    for number in (1, 2, 3, 4):
        step = conclude(state, _crashed(number), CONFIG, NOW_MS)
        assert step.outcome is Outcome.KILLED
        assert step.decision.action is Action.CONTINUE
        assert step.change.counters.stagnation_streak == 0
        assert [e.type for e in step.events if e.type is EventType.STAGNATION] == []
        state = replace(state, spend=step.change.spend, counters=step.change.counters)
    # The spend is charged all the same: four iterations, their cost and time.
    assert state.spend.iterations == 4
    assert state.spend.cost_usd == 1.0


def test_a_crash_keeps_the_streaks_the_agent_built() -> None:
    before = LoopCounters(
        stagnation_streak=2,
        last_response_digest="d" * 64,
        failure_streak=2,
        last_failure_signature="f" * 16,
    )
    step = conclude(LoopState(counters=before), _crashed(5), CONFIG, NOW_MS)
    assert step.decision.action is Action.CONTINUE
    assert step.decision.warning is None
    assert step.change.counters == replace(before, last_denial=None)


def test_a_crash_after_progress_still_resets_the_stagnation_streak() -> None:
    before = LoopCounters(stagnation_streak=2, last_response_digest="d" * 64)
    attempt = replace(_crashed(5), progress=Progress.MADE)
    step = conclude(LoopState(counters=before), attempt, CONFIG, NOW_MS)
    assert step.change.counters.stagnation_streak == 0
    assert step.change.counters.last_response_digest is None


def test_a_crash_still_ends_the_run_on_its_budget() -> None:
    config = replace(CONFIG, max_iterations=2)
    state = LoopState()
    first = conclude(state, _crashed(1), config, NOW_MS)
    state = replace(state, spend=first.change.spend, counters=first.change.counters)
    second = conclude(state, _crashed(2), config, NOW_MS)
    assert second.decision.action is Action.ABORT
    assert second.decision.reason == "max_iterations"


def test_an_item_whose_attempt_a_crash_cut_short_does_not_count_a_missing_decision() -> None:
    item = WorkItem(id="task-4", prompt="do it").with_status(ItemStatus.RUNNING, attempt=1)
    for iteration in (1, 2, 3):
        ended = conclude_item([item], item, None, None, iteration, cut_short=True)
        assert ended.item.status is ItemStatus.RUNNING and ended.question is None
        item = ended.item
    assert "missing_decisions" not in item.extra
    # The agent's own silence still counts: three in a row ask a person.
    for iteration in (4, 5, 6):
        ended = conclude_item([item], item, None, None, iteration)
        item = ended.item
    assert item.status is ItemStatus.BLOCKED
    assert (
        ended.question
        == "3 iterations in a row ended without a decision about task-4; how should it go on?"
    )


def test_iterations_cut_short_in_a_row_block_the_item_at_the_attempt_limit() -> None:
    item = WorkItem(id="task-4", prompt="do it").with_status(ItemStatus.RUNNING, attempt=1)
    for iteration in (1, 2):
        item = conclude_item([item], item, None, None, iteration, 3, cut_short=True).item
    assert (item.status, item.extra) == (ItemStatus.RUNNING, {"cut_short": 2})
    # An iteration the crash did not cut short breaks the row.
    item = conclude_item([item], item, None, None, 3, 3).item
    assert item.extra == {"missing_decisions": 1}
    for iteration in (4, 5):
        item = conclude_item([item], item, None, None, iteration, 3, cut_short=True).item
    assert item.status is ItemStatus.RUNNING
    ended = conclude_item([item], item, None, None, 6, 3, cut_short=True)
    assert ended.item.status is ItemStatus.BLOCKED
    assert ended.question is None  # an attempt limit asks no one: the run goes on
    assert ended.item.blocked_reason == (
        "3 iterations in a row were cut short by a crash of autopilot's process before a "
        "decision about task-4 (the limit is 3); autopilot tasks unblock task-4 gives it 3 more"
    )
    assert "cut_short" not in ended.item.extra
    # A new attempt starts the count afresh.
    counted = replace(item.with_status(ItemStatus.READY), extra={"cut_short": 2})
    assert "cut_short" not in start_item(counted).extra
