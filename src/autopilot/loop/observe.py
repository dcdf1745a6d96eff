"""From what an attempt left behind — the process's end, the adapter's report and
classification, the work tree's marks — to the core's ``Attempt``.

This is where agent-specific facts become plain ones: the adapter classifies the
output, and whether a failure is a usage limit, or fatal (a refused login, no credit
left), is read from its classification here, so ``core`` never sees a vendor rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from msgspec import Struct, field

from autopilot.agents.base import (
    AgentAdapter,
    Classification,
    IterationReport,
    SessionUsage,
    apply_usage_baseline,
)
from autopilot.core.attempt import Attempt, CommitSeen, Denial, SessionTotals
from autopilot.core.state import UsageBaseline
from autopilot.core.structs import replace
from autopilot.core.vocabulary import EndedBy, ErrorKind
from autopilot.loop.process import ProcessResult
from autopilot.workspace.marks import TreeMark, Workspace, progress_between

LIMIT_ERROR_KINDS = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.USAGE_LIMIT})


class Observed(Struct):
    """What the driver saw while the agent ran (root text and tool calls).

    Attributes:
        texts: The last root assistant text, if any.
        tool_calls: Root tool calls seen (one ``substage`` each).
    """

    texts: list[str] = field(default_factory=list)
    tool_calls: int = 0


def classify(
    adapter: AgentAdapter, report: IterationReport, result: ProcessResult
) -> Classification | None:
    """The adapter's classification of an attempt (None: the agent never ran).

    An agent that gave its final result and lingered until the driver ended it
    succeeded: ending it was the driver's doing, not a failure.
    """
    exit_code = result.exit_code or 0
    if result.ended_by is EndedBy.RESULT_GRACE and result.ended_by_driver and report.result_seen:
        exit_code = 0
    if result.ended_by is EndedBy.LAUNCH_FAILED:
        return None
    return adapter.classify(report, exit_code, result.stderr_tail)


class Verdict(Struct, frozen=True):
    """What the adapter's classification of an attempt means for the decision.

    Attributes:
        failed: The agent said the attempt failed.
        usage_limited: It failed on a rate or usage limit that resets.
        fatal: It failed in a way no retry mends (a refused login, no credit left:
            not a limit that resets, so waiting would never end).
        message: The agent's own error text, when it failed.
    """

    failed: bool = False
    usage_limited: bool = False
    fatal: bool = False
    message: str | None = None


def verdict_of(classification: Classification | None, report: IterationReport) -> Verdict:
    """The ``Verdict`` of ``classification`` (None: the agent never ran or gave no
    result), for an attempt whose sane report is ``report``."""
    if classification is None or classification.ok:
        return Verdict()
    from autopilot.agents.failures import needs_payment  # only once an attempt failed

    limited = classification.error_kind in LIMIT_ERROR_KINDS
    out_of_credit = report.reset_at_ms is None and needs_payment(classification.message)
    return Verdict(
        failed=True,
        usage_limited=limited and not out_of_credit,
        fatal=classification.error_kind is ErrorKind.AUTH or out_of_credit,
        message=classification.message,
    )


def attempt_of(
    *,
    adapter: AgentAdapter,
    number: int,
    folder: str,
    prompt: str,
    result: ProcessResult,
    raw_report: IterationReport,
    baseline: UsageBaseline | None,
    now_ms: int,
    workspace: Workspace,
    before: TreeMark,
    after: TreeMark,
    started_monotonic: float,
    now_monotonic: Callable[[], float],
    resumed_session: str | None,
    last_root_text: str | None,
) -> Attempt:
    """The core's ``Attempt`` for one finished attempt (see ``core.attempt``): the
    adapter's classification of its output, its report with session totals turned
    into this attempt's and absurd numbers dropped, and the work tree's two marks compared.

    Args:
        adapter: The agent's adapter (it classifies the output).
        number: The iteration.
        folder: The attempt's folder name.
        prompt: The prompt sent.
        result: How the process ended.
        raw_report: The adapter's parser's report.
        baseline: Session totals after the previous iteration, if stored.
        now_ms: The current epoch time in ms.
        workspace: The work tree (its commits and changed files between the marks).
        before: Its mark before the attempt.
        after: Its mark after the attempt.
        started_monotonic: When the attempt started (``Clock.monotonic``).
        now_monotonic: ``Clock.monotonic``.
        resumed_session: The session resumed, if any.
        last_root_text: The last root text seen.
    """
    classification = classify(adapter, raw_report, result)
    # After classify, which may read a reset time from the agent's error text.
    report = sane_report(with_baseline(raw_report, baseline), now_ms)
    commits = workspace.new_commits(before, after)
    totals = report.session_usage
    denials = getattr(report, "permission_denials", ())
    reported = reported_attempt(number, folder, prompt, result.ended_by, report, classification)
    return replace(
        reported,
        exit_code=result.exit_code,
        launch_error=result.launch_error,
        last_root_text=last_root_text or report.last_root_text,
        session_totals=SessionTotals(totals.session_id, totals.input_tokens, totals.output_tokens)
        if totals is not None
        else None,
        reset_at_ms=report.reset_at_ms,
        resumed_session=resumed_session,
        denials=tuple(Denial(d.tool, d.command) for d in denials),
        progress=progress_between(before, after),
        uncommitted_changes=None
        if after.entries is None
        else any(not path.startswith(".autopilot/") for path in after.entries),
        commits=tuple(CommitSeen(c.sha, c.subject, c.trailers) for c in commits),
        files_changed=workspace.changed_files(before, after),
        duration_ms=int((now_monotonic() - started_monotonic) * 1000),
        was_stopped=result.was_stopped,
        oversized_lines=result.oversized_lines,
        raw_output_note=result.write_error or ("truncated" if result.raw_truncated else None),
    )


def reported_attempt(
    number: int,
    folder: str,
    prompt: str,
    ended_by: EndedBy,
    report: IterationReport,
    classification: Classification | None,
) -> Attempt:
    """The ``Attempt`` as far as the agent's (sane) ``report`` and the adapter's
    ``classification`` of it tell (no exit code, no reset time, no work-tree facts):
    what ``attempt_of`` and a recovery from saved output (``loop.cut_short``) share."""
    verdict = verdict_of(classification, report)
    return Attempt(
        number=number,
        folder=folder,
        prompt=prompt,
        ended_by=ended_by,
        exit_code=None,
        result_seen=report.result_seen,
        agent_failed=verdict.failed,
        usage_limited=verdict.usage_limited,
        fatal=verdict.fatal,
        agent_error=verdict.message,
        final_message=report.final_message,
        last_root_text=report.last_root_text,
        tool_calls=report.tool_calls,
        session_id=report.session_id,
        input_tokens=report.input_tokens,
        output_tokens=report.output_tokens,
        cost_usd=report.cost_usd,
    )


def with_baseline(report: IterationReport, baseline: UsageBaseline | None) -> IterationReport:
    """``report`` with per-iteration tokens for agents that report session totals."""
    stored = (
        SessionUsage(baseline.session_id, baseline.input_tokens, baseline.output_tokens)
        if baseline is not None
        else None
    )
    return apply_usage_baseline(report, stored)


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
    return replace(
        report,
        input_tokens=tokens(report.input_tokens),
        output_tokens=tokens(report.output_tokens),
        cost_usd=cost,
        reset_at_ms=reset,
    )
