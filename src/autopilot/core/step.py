"""``conclude``: from the run before an attempt and what the attempt produced, to what
happens next — the decision, the run's new counters and the events to append.

Pure: no clock, file or process is read; the same inputs always give the same
``Step``. The foreground driver calls it after every attempt, and so does crash
recovery for an attempt whose driver died; a daemon, a Stop hook or a workflow
engine would call the same function. The order of the events and the fields of
each are ``docs/formats.md``'s ("One iteration's events").
"""

from __future__ import annotations

from msgspec import Struct

from autopilot.core.adaptive import extend_budget
from autopilot.core.attempt import Attempt, Denial
from autopilot.core.backlog_rule import backlog_rule
from autopilot.core.change import Ending, Event, LoopState, StateChange
from autopilot.core.digest import sha256_hex
from autopilot.core.ending import exit_code_for, status_for
from autopilot.core.outcome import (
    cut_short,
    digest_of,
    error_text_of,
    failure_signature,
    outcome_of,
    response_of,
)
from autopilot.core.policy import (
    Counters,
    Decision,
    IterationFacts,
    PolicyConfig,
    budget_note,
    budget_reached,
    decide,
)
from autopilot.core.spend import charge
from autopilot.core.state import LoopCounters, Spend, UsageBaseline
from autopilot.core.step_events import step_events
from autopilot.core.structs import replace
from autopilot.core.verification import awaits_verification, verify_rule
from autopilot.core.vocabulary import Action, EndedBy, EventType, Outcome, Reason


class Step(Struct, frozen=True):
    """What follows an attempt.

    Attributes:
        decision: The policy's decision (``RETRY``: the same iteration again at
            once, with a fresh session, after a failed resume).
        outcome: The attempt's outcome.
        change: The run's new state.
        events: The events to append, in order; the last is the terminal event
            when the run ends.
        awaits_verification: The agent gave the completion promise and the run's
            verify commands have not run yet: the driver runs them and concludes
            again with what they found (``core.verification``); this step, which
            goes on, is what holds if they cannot run.
    """

    decision: Decision
    outcome: Outcome
    change: StateChange
    events: tuple[Event, ...]
    awaits_verification: bool = False

    @property
    def ending(self) -> Ending | None:
        """How the run ends, if it does."""
        return self.change.ending


def conclude(state: LoopState, attempt: Attempt, config: PolicyConfig, now_ms: int) -> Step:
    """Decide what follows ``attempt`` and record it.

    Args:
        state: The run before the attempt.
        attempt: What the attempt produced.
        config: The run's limits and promises.
        now_ms: The current epoch time in ms.

    Returns:
        The ``Step``. Pure: the same inputs always give the same step.
    """
    outcome = outcome_of(attempt)
    response = response_of(attempt)
    digest = digest_of(response, outcome)
    error_text = error_text_of(outcome, attempt)
    signature = failure_signature(outcome, error_text)
    resume_failed = attempt.resumed_session is not None and outcome in (
        Outcome.AGENT_ERROR,
        Outcome.LAUNCH_FAILED,
    )
    retried = outcome is Outcome.RATE_LIMITED or resume_failed
    spend = charge(state.spend, attempt, spends_iteration=not retried)
    if resume_failed:
        decision = Decision(
            Action.RETRY,
            "resume_failed",
            stagnation_streak=state.counters.stagnation_streak,
            failure_streak=state.counters.failure_streak,
            spends_iteration=False,
            response_digest=state.counters.last_response_digest,
        )
        unverified = False
    else:
        before = _counters(state, spend)
        facts = _facts(attempt, outcome, digest, error_text, signature)
        decision = decide(before, facts, config, now_ms)
        decision = _denial_rule(decision, state, attempt)
        unverified = awaits_verification(decision, config) and attempt.verification is None
        promised = decision.action is Action.COMPLETE
        decision = verify_rule(decision, attempt, config)
        decision = backlog_rule(decision, attempt, config)
        if promised and decision.action is Action.CONTINUE:
            decision = _after_refusal(decision, before, facts, config, now_ms)
            decision = _denial_rule(decision, state, attempt)
    extension = extend_budget(
        decision,
        attempt,
        config,
        iterations_done=spend.iterations,
        previous_digest=state.counters.last_response_digest,
        digest=digest,
    )
    if extension is not None:
        decision = replace(decision, action=Action.CONTINUE, reason=None, note=extension.reason)
    counters = _new_counters(state.counters, decision, signature, attempt)
    ending = _ending(decision, state, config)
    backlog = attempt.backlog
    change = StateChange(
        iteration=attempt.number,
        iteration_open=retried and ending is None,
        spend=spend,
        counters=counters,
        session_id=_session_after(state, attempt, resume_failed),
        usage_baseline=_baseline_after(state, attempt),
        ending=ending,
        # A crash cut the attempt short: its messages go to the next attempt again.
        messages_stand=not retried and attempt.ended_by is not EndedBy.DRIVER_DIED,
        gate=backlog.question if backlog is not None and ending is None else None,
        max_iterations=extension.max_iterations if extension is not None else None,
    )
    events = step_events(state, attempt, outcome, response, error_text, decision, change, config)
    return Step(decision, outcome, change, events, awaits_verification=unverified)


def spend_counters(spend: Spend) -> Counters:
    """The policy's budget counters for ``spend`` alone (the boundary's check)."""
    return Counters(
        iterations_done=spend.iterations,
        cost_usd=spend.cost_usd,
        tokens=spend.tokens.total,
        active_ms=spend.active_ms,
    )


def budget_ending(
    spend: Spend, config: PolicyConfig, *, iteration_open: bool, lanes: bool, restored: bool
) -> tuple[Reason, str] | None:
    """The budget ``spend`` has used up at an iteration's boundary, as the reason and
    note of the ``abort`` that ends the run, or None.

    Args:
        spend: The run's spend (a lane's: every lane's together).
        config: The policy with the budgets.
        iteration_open: An iteration is open (a retry of it spends no new one, so
            only the spend budgets count).
        lanes: ``spend`` is every lane's of a parallel run (said in the note).
        restored: ``spend`` is what the driver found, not its own (said in the note).
    """
    reached = budget_reached(spend_counters(spend), config, iterations=not iteration_open)
    if reached is None:
        return None
    reason, budget = reached
    note = budget_note(reason, budget)
    if lanes:
        note = f"{note} (every lane's spend)"
    elif restored:
        note = f"{note} (spend restored from state.json)"
    return reason, note


def _counters(state: LoopState, spend: Spend) -> Counters:
    loop = state.counters
    return replace(
        spend_counters(spend),
        stagnation_streak=loop.stagnation_streak,
        last_response_digest=loop.last_response_digest,
        failure_streak=loop.failure_streak,
        last_failure_signature=loop.last_failure_signature,
        rate_limit_waits=loop.rate_limit_waits,
        stop_requested=state.stop_requested,
        pause_requested=state.pause_requested,
    )


def _facts(
    attempt: Attempt,
    outcome: Outcome,
    digest: str | None,
    error_text: str | None,
    signature: str | None,
) -> IterationFacts:
    return IterationFacts(
        number=attempt.number,
        outcome=outcome,
        final_message=attempt.final_message,
        response_digest=digest,
        tool_calls=attempt.tool_calls,
        progress=attempt.progress,
        prompt=attempt.prompt,
        error_signature=signature,
        error_text=error_text,
        duration_ms=attempt.duration_ms,
        reset_at_ms=attempt.reset_at_ms,
        fatal=attempt.fatal,
        cut_short=cut_short(attempt),
    )


def _after_refusal(
    refused: Decision,
    counters: Counters,
    facts: IterationFacts,
    config: PolicyConfig,
    now_ms: int,
) -> Decision:
    """A completion promise the verify commands or the backlog refused ends nothing,
    and exempts nothing either: the policy's later rules (abort promise, stagnation,
    budgets) decide as if no promise had been given, so a refused promise repeated
    halts on stagnation and never outlives a budget. The refusal's warning is kept."""
    rest = decide(counters, facts, replace(config, completion_promise=None), now_ms)
    if rest.action is not Action.CONTINUE:
        return rest
    warning = "; ".join(w for w in (refused.warning, rest.warning) if w) or None
    return replace(rest, warning=warning)


def _denial_keys(denials: tuple[Denial, ...]) -> list[str]:
    return [sha256_hex(d.key.encode("utf-8", "replace"))[:16] for d in denials]


def _denial_rule(decision: Decision, state: LoopState, attempt: Attempt) -> Decision:
    """The same permission denial on consecutive iterations halts the run: the agent
    cannot get past it, and going on would spend the budget on the same refusal."""
    if decision.action in (Action.COMPLETE, Action.ABORT, Action.WAIT):
        return decision
    previous = set((state.counters.last_denial or "").split(","))
    for denial, key in zip(attempt.denials, _denial_keys(attempt.denials), strict=True):
        if key in previous:
            note = (
                f"the agent was refused {denial.describe()} on iterations "
                f"{attempt.number - 1} and {attempt.number}; allow it in the agent's "
                "permission settings (Claude Code: --allowedTools after --, or "
                "permissions.allow in .claude/settings.json) or change the prompt"
            )
            return replace(
                decision, action=Action.ABORT, reason=Reason.PERMISSION_DENIED, note=note
            )
    return decision


def _new_counters(
    before: LoopCounters,
    decision: Decision,
    signature: str | None,
    attempt: Attempt,
) -> LoopCounters:
    waiting = decision.action is Action.WAIT
    if cut_short(attempt):  # the failure the breaker counts is still the one before
        signature = before.last_failure_signature
    return LoopCounters(
        stagnation_streak=decision.stagnation_streak,
        # The policy's: None after progress, unchanged by a wait or a retry.
        last_response_digest=decision.response_digest,
        failure_streak=decision.failure_streak,
        last_failure_signature=signature if decision.failure_streak else None,
        rate_limit_waits=before.rate_limit_waits + 1 if waiting else 0,
        last_denial=",".join(_denial_keys(attempt.denials)) or None,
    )


def _ending(decision: Decision, state: LoopState, config: PolicyConfig) -> Ending | None:
    if decision.action not in (Action.COMPLETE, Action.ABORT):
        return None
    event = EventType.COMPLETE if decision.action is Action.COMPLETE else EventType.ABORT
    reason = str(decision.reason or "")
    note = decision.note
    if reason == Reason.STAGNATION:
        model = f" with model {state.model}" if state.model else ""
        note = (
            f"{note}: no diff, no commit, and the same answer or no tool call, from agent "
            f"{state.agent}{model}; check that this agent and model can work in this "
            "repository"
        )
    elif reason == Reason.USER_STOPPED and (state.stop_requested or not note):
        note = state.stop_note
    return Ending(event, reason, note, status_for(event, reason), exit_code_for(event, reason))


def _session_after(state: LoopState, attempt: Attempt, resume_failed: bool) -> str | None:
    if resume_failed:
        return None  # one fresh session is started next
    if attempt.session_id and state.continue_session:
        return attempt.session_id
    return state.session_id


def _baseline_after(state: LoopState, attempt: Attempt) -> UsageBaseline | None:
    totals = attempt.session_totals
    if totals is None:
        return state.usage_baseline
    return UsageBaseline(totals.session_id, totals.input_tokens, totals.output_tokens)
