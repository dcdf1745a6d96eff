"""The decision policy as a pure function, in ``core.policy``'s order (GitHub issues
frankbria/ralph-claude-code#141, agrimsingh/ralph-wiggum-cursor#15,
anthropics/claude-code#18646, mikeyobrien/ralph-orchestrator#369 and #244,
umputun/ralphex#156)."""

from __future__ import annotations

import pytest

from autopilot.core.policy import (
    Action,
    Counters,
    Decision,
    IterationFacts,
    Outcome,
    PolicyConfig,
    Progress,
    Reason,
    decide,
    is_stagnant,
)
from autopilot.core.structs import replace

NOW = 1_800_000_000_000
CONFIG = PolicyConfig(max_iterations=5, stagnation_limit=3)


def facts(**kw: object) -> IterationFacts:
    base: dict[str, object] = {
        "number": 1,
        "outcome": Outcome.OK,
        "final_message": "working on it",
        "response_digest": "a",
        "tool_calls": 2,
        "progress": Progress.MADE,
    }
    base.update(kw)
    return IterationFacts(**base)  # type: ignore[arg-type]


def counters(**kw: object) -> Counters:
    base: dict[str, object] = {"iterations_done": 1}
    base.update(kw)
    return Counters(**base)  # type: ignore[arg-type]


def test_continue_by_default() -> None:
    decision = decide(counters(), facts(), CONFIG, NOW)
    assert decision.action is Action.CONTINUE
    assert decision.stagnation_streak == 0


def test_completion() -> None:
    decision = decide(counters(), facts(final_message="done. COMPLETE"), CONFIG, NOW)
    assert (decision.action, decision.reason) == (Action.COMPLETE, Reason.COMPLETION_PROMISE)


def test_completion_on_the_last_allowed_iteration_is_completion() -> None:
    # Issue mikeyobrien/ralph-orchestrator#369: --max-iterations 1 and the agent says the token.
    config = replace(CONFIG, max_iterations=1, completion_promise="LOOP_COMPLETE")
    decision = decide(
        counters(iterations_done=1), facts(final_message="LOOP_COMPLETE"), config, NOW
    )
    assert decision.action is Action.COMPLETE


def test_max_iterations_after_completion_check() -> None:
    decision = decide(counters(iterations_done=5), facts(), CONFIG, NOW)
    assert (decision.action, decision.reason) == (Action.ABORT, Reason.MAX_ITERATIONS)


def test_unlimited_iterations() -> None:
    config = replace(CONFIG, max_iterations=None)
    assert decide(counters(iterations_done=10_000), facts(), config, NOW).action is Action.CONTINUE


def test_min_iterations_defers_promises() -> None:
    config = replace(CONFIG, min_iterations=3)
    message = facts(final_message="COMPLETE")
    assert decide(counters(iterations_done=2), message, config, NOW).action is Action.CONTINUE
    assert decide(counters(iterations_done=3), message, config, NOW).action is Action.COMPLETE


def test_stop_beats_completion() -> None:
    decision = decide(counters(stop_requested=True), facts(final_message="COMPLETE"), CONFIG, NOW)
    assert (decision.action, decision.reason) == (Action.ABORT, Reason.USER_STOPPED)


def test_pause_beats_completion() -> None:
    decision = decide(counters(pause_requested=True), facts(final_message="COMPLETE"), CONFIG, NOW)
    assert decision.action is Action.PAUSE


def test_completion_beats_abort_promise_and_budget() -> None:
    config = replace(CONFIG, abort_promise="GIVE_UP")
    decision = decide(
        counters(iterations_done=5, cost_usd=100.0),
        facts(final_message="GIVE_UP\nCOMPLETE"),
        replace(config, max_cost_usd=1.0),
        NOW,
    )
    assert decision.action is Action.COMPLETE


def test_abort_promise() -> None:
    config = replace(CONFIG, abort_promise="ABORT_NO_IMPROVEMENTS")
    decision = decide(counters(), facts(final_message="ABORT_NO_IMPROVEMENTS"), config, NOW)
    assert (decision.action, decision.reason) == (Action.ABORT, Reason.ABORT_PROMISE)


def test_failed_iteration_never_completes() -> None:
    decision = decide(
        counters(), facts(outcome=Outcome.TIMEOUT, final_message="COMPLETE"), CONFIG, NOW
    )
    assert decision.action is Action.CONTINUE


@pytest.mark.parametrize(
    ("reason", "counter_kw", "config_kw"),
    [
        (Reason.MAX_COST, {"cost_usd": 2.5}, {"max_cost_usd": 2.5}),
        (Reason.MAX_TOKENS, {"tokens": 1000}, {"max_tokens": 999}),
        (Reason.MAX_DURATION, {"active_ms": 7_200_000}, {"max_duration_ms": 7_200_000}),
    ],
)
def test_spend_budgets(
    reason: Reason, counter_kw: dict[str, object], config_kw: dict[str, object]
) -> None:
    config = replace(CONFIG, **config_kw)  # type: ignore[arg-type]
    decision = decide(counters(**counter_kw), facts(), config, NOW)
    assert (decision.action, decision.reason) == (Action.ABORT, reason)


def test_stagnation_counts_no_progress_and_no_tool_calls() -> None:
    stuck = facts(progress=Progress.NONE, tool_calls=0, response_digest="x")
    first = decide(counters(), stuck, CONFIG, NOW)
    assert (first.action, first.stagnation_streak) == (Action.CONTINUE, 1)
    second = decide(counters(stagnation_streak=1), stuck, CONFIG, NOW)
    assert second.stagnation_streak == 2
    assert second.warning is not None  # warns one iteration before it halts
    third = decide(counters(stagnation_streak=2), stuck, CONFIG, NOW)
    assert (third.action, third.reason) == (Action.ABORT, Reason.STAGNATION)


def test_stagnation_overrides_min_iterations() -> None:
    config = replace(CONFIG, min_iterations=10, max_iterations=20)
    stuck = facts(progress=Progress.NONE, tool_calls=0)
    decision = decide(counters(iterations_done=3, stagnation_streak=2), stuck, config, NOW)
    assert decision.reason == Reason.STAGNATION


def test_a_commit_is_progress() -> None:
    # Issue frankbria/ralph-claude-code#141: the tree is clean because the agent committed; HEAD moved.
    committed = facts(progress=Progress.MADE, tool_calls=0, response_digest="same")
    decision = decide(
        counters(stagnation_streak=2, last_response_digest="same"), committed, CONFIG, NOW
    )
    assert (decision.action, decision.stagnation_streak) == (Action.CONTINUE, 0)


def test_same_answer_to_different_tasks_with_progress_is_not_stagnation() -> None:
    streak = 0
    for _ in range(6):
        decision = decide(
            counters(stagnation_streak=streak, last_response_digest="task done."),
            facts(final_message="task done.", response_digest="task done.", progress=Progress.MADE),
            replace(CONFIG, max_iterations=None),
            NOW,
        )
        streak = decision.stagnation_streak
        assert decision.action is Action.CONTINUE
    assert streak == 0


def test_no_op_looping_is_stagnation() -> None:
    # Issue agrimsingh/ralph-wiggum-cursor#15: exit 0, no tool calls, no diff, different words each time.
    idle = facts(progress=Progress.NONE, tool_calls=0)
    assert is_stagnant(idle, last_digest="other") is True


def test_outside_git_only_identical_responses_count() -> None:
    unknown = facts(progress=Progress.UNKNOWN, tool_calls=0, response_digest="r1")
    assert is_stagnant(unknown, last_digest="r0") is False
    assert is_stagnant(unknown, last_digest="r1") is True


def test_stagnation_disabled() -> None:
    config = replace(CONFIG, stagnation_limit=0)
    stuck = facts(progress=Progress.NONE, tool_calls=0)
    decision = decide(counters(stagnation_streak=50), stuck, config, NOW)
    assert decision.action is Action.CONTINUE
    # No streak, so the driver logs no stagnation event and no warning.
    assert (decision.stagnation_streak, decision.warning) == (0, None)
    repeated = facts(progress=Progress.NONE, response_digest="same")
    decision = decide(counters(last_response_digest="same"), repeated, config, NOW)
    assert (decision.stagnation_streak, decision.warning) == (0, None)


def _run_of(responses: list[tuple[str, Progress]], limit: int = 3) -> list[Decision]:
    """Decide each iteration in turn, carrying the counters as the driver does."""
    config = replace(CONFIG, stagnation_limit=limit, max_iterations=None)
    streak, digest, decisions = 0, None, []
    for number, (response, progress) in enumerate(responses, start=1):
        decision = decide(
            counters(iterations_done=number, stagnation_streak=streak, last_response_digest=digest),
            facts(number=number, response_digest=response, tool_calls=2, progress=progress),
            config,
            NOW,
        )
        decisions.append(decision)
        streak, digest = decision.stagnation_streak, decision.response_digest
    return decisions


def test_three_identical_responses_halt_at_the_third() -> None:
    # N identical responses in a row are a streak of N, N = 3: the first of them counts.
    decisions = _run_of([("same", Progress.NONE)] * 3)
    assert [d.stagnation_streak for d in decisions] == [0, 2, 3]
    assert decisions[1].warning == "2 of 3 iterations without progress; one more halts the run"
    assert (decisions[2].action, decisions[2].reason) == (Action.ABORT, Reason.STAGNATION)
    assert decisions[2].note == "3 iterations in a row without progress"


@pytest.mark.parametrize("limit", [1, 2, 4, 5])
def test_n_identical_responses_halt_at_the_nth(limit: int) -> None:
    decisions = _run_of([("same", Progress.NONE)] * 6, limit=limit)
    halts = [n for n, d in enumerate(decisions, start=1) if d.action is Action.ABORT]
    # One response alone is never "identical": a limit of 1 halts at the second.
    assert halts[0] == max(limit, 2)
    assert decisions[halts[0] - 1].note == f"{max(limit, 2)} iterations in a row without progress"


def test_an_identical_response_after_progress_starts_a_new_streak() -> None:
    # The iteration that made progress is not stagnant, whatever it said.
    decisions = _run_of([("same", Progress.MADE), ("same", Progress.NONE), ("same", Progress.NONE)])
    assert [d.stagnation_streak for d in decisions] == [0, 0, 2]
    assert decisions[2].action is Action.CONTINUE


def test_a_usage_limit_wait_keeps_the_streak_and_the_response() -> None:
    limited = facts(outcome=Outcome.RATE_LIMITED, response_digest=None, reset_at_ms=NOW + 1)
    decision = decide(counters(stagnation_streak=2, last_response_digest="r"), limited, CONFIG, NOW)
    assert (decision.action, decision.stagnation_streak) == (Action.WAIT, 2)
    assert decision.response_digest == "r"


def test_breaker_trips_on_identical_immediate_failures() -> None:
    # Issue umputun/ralphex#156: every launch fails at once with the same error.
    failing = facts(
        outcome=Outcome.LAUNCH_FAILED,
        final_message=None,
        error_signature="sig",
        error_text="claude: cannot be launched inside another Claude Code session",
        duration_ms=100,
        progress=Progress.NONE,
    )
    first = decide(counters(), failing, CONFIG, NOW)
    assert (first.action, first.failure_streak) == (Action.BACKOFF, 1)
    assert first.wait_until_ms == NOW + CONFIG.backoff_base_ms
    second = decide(counters(failure_streak=1, last_failure_signature="sig"), failing, CONFIG, NOW)
    assert (second.action, second.failure_streak) == (Action.BACKOFF, 2)
    assert second.wait_until_ms == NOW + 2 * CONFIG.backoff_base_ms
    third = decide(counters(failure_streak=2, last_failure_signature="sig"), failing, CONFIG, NOW)
    assert (third.action, third.reason) == (Action.ABORT, Reason.AGENT_FAILING)
    assert third.note is not None and "another Claude Code session" in third.note


def test_different_failures_do_not_trip_the_breaker() -> None:
    failing = facts(outcome=Outcome.AGENT_ERROR, error_signature="new", duration_ms=100)
    decision = decide(
        counters(failure_streak=2, last_failure_signature="old"), failing, CONFIG, NOW
    )
    assert (decision.action, decision.failure_streak) == (Action.BACKOFF, 1)


def test_failed_launches_count_against_the_iteration_budget() -> None:
    failing = facts(outcome=Outcome.LAUNCH_FAILED, error_signature="s", duration_ms=10)
    decision = decide(counters(iterations_done=5), failing, CONFIG, NOW)
    assert decision.reason == Reason.MAX_ITERATIONS


def test_usage_limit_waits_without_spending_the_iteration() -> None:
    limited = facts(outcome=Outcome.RATE_LIMITED, reset_at_ms=NOW + 3_600_000)
    decision = decide(counters(iterations_done=5), limited, CONFIG, NOW)
    assert decision.action is Action.WAIT
    assert decision.wait_until_ms == NOW + 3_600_000
    assert decision.spends_iteration is False


def test_usage_limit_with_past_or_unknown_reset_backs_off_with_no_give_up() -> None:
    past = facts(outcome=Outcome.RATE_LIMITED, reset_at_ms=NOW - 1000)
    decision = decide(counters(rate_limit_waits=50), past, CONFIG, NOW)
    assert decision.action is Action.WAIT
    assert decision.wait_until_ms == NOW + CONFIG.backoff_max_ms


def test_decide_is_pure() -> None:
    args = (counters(stagnation_streak=1), facts(progress=Progress.NONE, tool_calls=0), CONFIG, NOW)
    assert decide(*args) == decide(*args)


def test_auth_failure_halts_at_once() -> None:
    refused = facts(
        outcome=Outcome.AGENT_ERROR,
        error_text="Invalid API key · Fix external API key",
        error_signature="auth",
        fatal=True,
        duration_ms=500,
    )
    decision = decide(counters(), refused, CONFIG, NOW)
    assert (decision.action, decision.reason) == (Action.ABORT, Reason.AGENT_FAILING)
    assert decision.note == "Invalid API key · Fix external API key"


def test_promise_before_min_iterations_is_reported_not_honoured() -> None:
    config = replace(CONFIG, min_iterations=3)
    decision = decide(counters(iterations_done=2), facts(final_message="COMPLETE"), config, NOW)
    assert decision.action is Action.CONTINUE
    assert decision.warning is not None and "before --min-iterations 3" in decision.warning


@pytest.mark.parametrize(
    ("reason", "budget", "note"),
    [
        (Reason.MAX_COST, 2.5, "reached max_cost=$2.5"),
        (Reason.MAX_DURATION, 3000, "reached max_duration=3s"),
        (Reason.MAX_ITERATIONS, 5, "reached max_iterations=5"),
    ],
)
def test_budget_notes_carry_units(reason: Reason, budget: float, note: str) -> None:
    from autopilot.core.policy import budget_note

    assert budget_note(reason, budget) == note
