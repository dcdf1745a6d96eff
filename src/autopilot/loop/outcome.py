"""Pure helpers that turn what happened in an iteration into the policy's facts."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re

from autopilot.agents.base import Classification, ErrorKind, IterationReport
from autopilot.loop import git
from autopilot.loop.policy import Outcome, Progress
from autopilot.loop.process import EndedBy, ProcessResult

LIMIT_ERROR_KINDS = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.USAGE_LIMIT})


def outcome_of(ended_by: EndedBy, classification: Classification | None) -> Outcome:
    """The iteration's outcome: the driver's own timers first, then the agent's verdict."""
    if ended_by is EndedBy.LAUNCH_FAILED:
        return Outcome.LAUNCH_FAILED
    if ended_by is EndedBy.KILLED:
        return Outcome.KILLED
    if ended_by is EndedBy.TIMEOUT:
        return Outcome.TIMEOUT
    if ended_by is EndedBy.IDLE_TIMEOUT:
        return Outcome.IDLE_TIMEOUT
    if classification is not None and not classification.ok:
        if classification.error_kind in LIMIT_ERROR_KINDS:
            return Outcome.RATE_LIMITED
        return Outcome.AGENT_ERROR
    return Outcome.OK


def progress_of(before: git.TreeMark, after: git.TreeMark) -> Progress:
    """HEAD moved or the work tree changed: progress; outside a repository: unknown."""
    if after.fingerprint is None:
        return Progress.UNKNOWN
    if after.head != before.head or after.fingerprint != before.fingerprint:
        return Progress.MADE
    return Progress.NONE


def response_of(report: IterationReport, last_root_text: str | None) -> str:
    """The root response: the final message, else the last root text seen."""
    if report.final_message is not None:
        return report.final_message
    return last_root_text or report.last_root_text or ""


def digest_of(text: str) -> str | None:
    """SHA-256 of a response, for byte-identity checks (None for no response)."""
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest() if text else None


def error_text_of(
    outcome: Outcome,
    result: ProcessResult,
    classification: Classification | None,
    duration_ms: int,
) -> str | None:
    """A one-line account of why the iteration failed (None if it did not)."""
    if outcome is Outcome.LAUNCH_FAILED:
        return result.launch_error
    if classification is not None and not classification.ok:
        return classification.message
    if outcome in (Outcome.TIMEOUT, Outcome.IDLE_TIMEOUT):
        if result.was_stopped:
            return "agent process was stopped (T state) and made no progress"
        return f"{outcome.value.replace('_', ' ')} after {duration_ms // 1000} s"
    return None


def failure_signature(outcome: Outcome, error_text: str | None) -> str | None:
    """Identifies a failure for the breaker: the same signature = the same failure."""
    if outcome not in (Outcome.AGENT_ERROR, Outcome.LAUNCH_FAILED):
        return None
    # Request ids, timestamps and counters differ between otherwise identical failures.
    shape = _VARIABLE_PARTS.sub("#", error_text or "")
    return hashlib.sha256(f"{outcome.value}\0{shape}".encode()).hexdigest()[:16]


_VARIABLE_PARTS = re.compile(r"[0-9a-fA-F]{8,}(?:-[0-9a-fA-F]{4,})*|\d+")


_MAX_TOKENS_PER_ITERATION = 10**10
_MAX_COST_PER_ITERATION_USD = 10_000.0
_MAX_WAIT_MS = 31 * 24 * 3600 * 1000


def sane_report(report: IterationReport, now_ms: int) -> IterationReport:
    """The report with agent-supplied numbers that cannot be true dropped.

    Tokens must be whole and below 10^10, cost finite and below $10,000, a reset
    time within 31 days; anything else is treated as not reported, so absurd output
    (``Infinity``, ``1e300``) can never corrupt spend or ``state.json``.
    """

    def tokens(value: int | None) -> int | None:
        ok = isinstance(value, int) and 0 <= value < _MAX_TOKENS_PER_ITERATION
        return value if ok else None

    cost = report.cost_usd
    if cost is not None and not (math.isfinite(cost) and 0 <= cost < _MAX_COST_PER_ITERATION_USD):
        cost = None
    reset = report.reset_at_ms
    if reset is not None and not (isinstance(reset, int) and reset - now_ms < _MAX_WAIT_MS):
        reset = None
    return dataclasses.replace(
        report,
        input_tokens=tokens(report.input_tokens),
        output_tokens=tokens(report.output_tokens),
        cost_usd=cost,
        reset_at_ms=reset,
    )
