"""The events one step appends, in order (``docs/formats.md``, "One iteration's
events"): ``commit_observed`` and ``permission_denied`` for each, ``session_attached``,
``usage_update``, ``iteration_end``, warnings and ``stagnation``, the write-ahead
``decision_applied`` record, then the terminal event when the run ends."""

from __future__ import annotations

from autopilot.core.attempt import Attempt
from autopilot.core.change import SESSION_ID_EVENT_MAX_CHARS, Event, LoopState, StateChange
from autopilot.core.outcome import cut_short
from autopilot.core.policy import Decision, PolicyConfig
from autopilot.core.text import excerpt
from autopilot.core.vocabulary import Action, EventType, Outcome


def step_events(
    state: LoopState,
    attempt: Attempt,
    outcome: Outcome,
    response: str,
    error_text: str | None,
    decision: Decision,
    change: StateChange,
    config: PolicyConfig,
) -> tuple[Event, ...]:
    """The events of a step, in the order they are appended."""
    number = attempt.number
    spend = change.spend
    events = [
        Event(
            EventType.COMMIT_OBSERVED,
            {
                "iteration": number,
                "sha": commit.sha.lower(),
                "subject": excerpt(commit.subject, 200),
                "trailers": [excerpt(t, 200) for t in commit.trailers],
            },
        )
        for commit in attempt.commits
    ]
    events += [
        Event(
            EventType.PERMISSION_DENIED,
            {"iteration": number, "tool": denial.tool, "command": denial.command},
        )
        for denial in attempt.denials
    ]
    session = attempt.session_id
    shown_session = session if session and len(session) <= SESSION_ID_EVENT_MAX_CHARS else None
    if shown_session and session != state.session_id:
        events.append(
            Event(EventType.SESSION_ATTACHED, {"iteration": number, "sessionId": shown_session})
        )
    if attempt.input_tokens is not None or attempt.cost_usd is not None:
        events.append(
            Event(
                EventType.USAGE_UPDATE,
                {"iteration": number, "tokens": spend.tokens.to_json(), "costUsd": spend.cost_usd},
            )
        )
    verification = attempt.verification
    if verification is not None:
        events.append(
            Event(
                EventType.VERIFY,
                {
                    "iteration": number,
                    "passed": verification.passed,
                    "results": [excerpt(line, 300) for line in verification.results],
                    "digest": verification.digest,
                },
            )
        )
    backlog = attempt.backlog
    if backlog is not None:
        events += [Event(EventType(kind), fields) for kind, fields in backlog.events]
    events.append(
        Event(
            EventType.ITERATION_END,
            {
                "iteration": number,
                "excerpt": excerpt(response),
                "outcome": outcome.value,
                "exitCode": attempt.exit_code,
                "endedBy": attempt.ended_by.value,
                "tokens": spend.tokens.to_json(),
                "costUsd": spend.cost_usd,
                "iterationsSpent": spend.iterations,
                "activeMs": spend.active_ms,
                "iterationTokens": {
                    "input": attempt.input_tokens or 0,
                    "output": attempt.output_tokens or 0,
                },
                "iterationCostUsd": attempt.cost_usd,
                "filesChanged": attempt.files_changed,
                "commits": len(attempt.commits),
                "toolCalls": attempt.tool_calls,
                "progress": attempt.progress.value,
                "sessionId": shown_session,
                "durationMs": attempt.duration_ms,
                "error": excerpt(error_text) if error_text else None,
                "oversizedLines": attempt.oversized_lines or None,
                "rawOutput": attempt.raw_output_note,
            },
        )
    )
    if decision.action is Action.RETRY:
        note = (
            f"resuming session {attempt.resumed_session} failed "
            f"({error_text or outcome.value}); starting a fresh session"
        )
        events.append(Event(EventType.WARNING, {"iteration": number, "note": note}))
    if decision.stagnation_streak and not cut_short(attempt):
        events.append(
            Event(
                EventType.STAGNATION,
                {
                    "iteration": number,
                    "streak": decision.stagnation_streak,
                    "limit": config.stagnation_limit,
                },
            )
        )
    if decision.warning:
        events.append(Event(EventType.WARNING, {"iteration": number, "note": decision.warning}))
    if change.max_iterations is not None:
        extended = {"iteration": number, "maxIterations": change.max_iterations}
        events.append(Event(EventType.BUDGET_EXTENDED, {**extended, "note": decision.note}))
    if change.gate is not None and backlog is not None:
        question = {"iteration": number, "itemId": backlog.item_id, "question": change.gate}
        events.append(Event(EventType.GATE, question))
    events.append(
        Event(
            EventType.DECISION_APPLIED,
            {
                "iteration": number,
                "attempt": attempt.folder,
                "action": decision.action.value,
                "reason": decision.reason,
                "change": change.to_json(),
            },
        )
    )
    ending = change.ending
    if ending is not None:
        events.append(
            Event(
                ending.event,
                {
                    "reason": ending.reason,
                    "note": ending.note,
                    "iteration": number,
                    "tokens": spend.tokens.to_json(),
                    "costUsd": spend.cost_usd,
                },
            )
        )
    return tuple(events)
