"""Pure facts derived from an attempt: its outcome, response, error text, signature."""

from __future__ import annotations

import re

from autopilot.core.attempt import Attempt
from autopilot.core.digest import sha256_hex
from autopilot.core.vocabulary import EndedBy, Outcome

_DRIVER_ENDINGS = {
    EndedBy.LAUNCH_FAILED: Outcome.LAUNCH_FAILED,
    EndedBy.KILLED: Outcome.KILLED,
    EndedBy.TIMEOUT: Outcome.TIMEOUT,
    EndedBy.IDLE_TIMEOUT: Outcome.IDLE_TIMEOUT,
}


def outcome_of(attempt: Attempt) -> Outcome:
    """The attempt's outcome: the driver's own timers first, then the agent's verdict.

    An attempt recovered after the driver died counts as ``killed`` unless its saved
    output holds the agent's final result; then the agent's verdict stands.
    """
    if attempt.ended_by in _DRIVER_ENDINGS:
        return _DRIVER_ENDINGS[attempt.ended_by]
    if attempt.ended_by is EndedBy.DRIVER_DIED and not attempt.result_seen:
        return Outcome.KILLED
    if attempt.agent_failed:
        return Outcome.RATE_LIMITED if attempt.usage_limited else Outcome.AGENT_ERROR
    return Outcome.OK


def cut_short(attempt: Attempt) -> bool:
    """Whether a crash of autopilot's own process (the driver) cut the attempt short
    before the agent gave its final result: it says nothing about the agent, so it
    leaves the stagnation streak, the failure breaker and a backlog item's
    no-decision streak as they were; its spend is charged all the same."""
    return attempt.ended_by is EndedBy.DRIVER_DIED and not attempt.result_seen


def response_of(attempt: Attempt) -> str:
    """The root response: the final message, else the last root text seen."""
    if attempt.final_message is not None:
        return attempt.final_message
    return attempt.last_root_text or ""


def digest_of(text: str, outcome: Outcome) -> str | None:
    """SHA-256 of a response, for byte-identity checks.

    An iteration that ended normally with an empty answer has the digest of the empty
    text: a second empty answer is the same answer again, and counts toward
    stagnation. A failed iteration with no text has none (None).
    """
    if not text and outcome is not Outcome.OK:
        return None
    return sha256_hex(text.encode("utf-8", "replace"))


def error_text_of(outcome: Outcome, attempt: Attempt) -> str | None:
    """A one-line account of why the attempt failed (None if it did not)."""
    if outcome is Outcome.LAUNCH_FAILED:
        return attempt.launch_error
    if attempt.agent_failed and outcome in (Outcome.AGENT_ERROR, Outcome.RATE_LIMITED):
        return attempt.agent_error
    if outcome in (Outcome.TIMEOUT, Outcome.IDLE_TIMEOUT):
        if attempt.was_stopped:
            return "agent process was stopped (T state) and made no progress"
        return f"{outcome.value.replace('_', ' ')} after {attempt.duration_ms // 1000} s"
    if attempt.ended_by is EndedBy.DRIVER_DIED:
        return (
            "the driver died during this iteration; its spend was recovered from the "
            "saved output and it counts against the budgets"
        )
    return None


def failure_signature(outcome: Outcome, error_text: str | None) -> str | None:
    """Identifies a failure for the breaker: the same signature = the same failure."""
    if outcome not in (Outcome.AGENT_ERROR, Outcome.LAUNCH_FAILED):
        return None
    # Request ids, timestamps and counters differ between otherwise identical failures.
    shape = _VARIABLE_PARTS.sub("#", error_text or "")
    return sha256_hex(f"{outcome.value}\0{shape}".encode())[:16]


_VARIABLE_PARTS = re.compile(r"[0-9a-fA-F]{8,}(?:-[0-9a-fA-F]{4,})*|\d+")
