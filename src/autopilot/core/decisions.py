"""What an agent's decision about a work item does to it (pure); the report that
carries the decision, and its validation, are ``core.item_report``'s.

The agent ends its work on an item with one of these decisions (``docs/backlog.md``), through
``autopilot report`` or a promoted ``.autopilot/consistency-decision.json``:

============== ==============================================================
decision        effect on the item
============== ==============================================================
continue_next   the criteria's ``check`` commands run (autopilot runs them); all
                pass: ``completed``; one fails: ``reopened`` (micro) with its output
retry_same_unit back to ``ready`` with the evidence as feedback
reopen_micro    ``reopened`` with ``reopen_target`` micro (meso, macro alike)
ask_user_meta   ``blocked`` with the question; the run waits for ``autopilot answer``
stop            ``stopped``; the run ends
============== ==============================================================

A running item with no decision at the end of its iteration stays ``running`` and is
resumed with ``pending-decision: missing``; after ``MISSING_REPORTS_BEFORE_ASKING``
in a row it is gated like ``ask_user_meta``. One whose iteration a crash of autopilot's
own process cut short stays ``running`` without counting as missing a decision, but
after ``max_attempts`` such iterations in a row it is blocked (``cut_short_item``).

An item that goes back to the queue (``ready`` or ``reopened``) after its
``max_attempts``-th attempt is ``blocked`` instead (``limit_attempts``), its reason
naming the last verdict and the failing check (or the files outside the allowed
surface, or those a merge conflicted in: autopilot's own reopens count alike), and
the run goes on with the next ready item: an agent that claims success each time
while the checks fail cannot spend the whole run on one item. Attempts count from the
last time a person unblocked, answered or reopened it (``fresh_attempts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autopilot.core.gate_answer import attempts_note
from autopilot.core.item_report import (
    CheckOutcome,
    ItemDecision,
    ItemReport,
    claimed_evidence,
)
from autopilot.core.structs import replace
from autopilot.core.workitems import (
    MAX_SURFACE_VIOLATIONS,
    Completion,
    CompletionState,
    FocusLayer,
    ItemStatus,
    Verdict,
    WorkItem,
)

REOPEN_LAYER = {
    ItemDecision.REOPEN_MICRO: FocusLayer.MICRO,
    ItemDecision.REOPEN_MESO: FocusLayer.MESO,
    ItemDecision.REOPEN_MACRO: FocusLayer.MACRO,
}

MISSING_REPORTS_BEFORE_ASKING = 3
"""Iterations in a row without a decision before the item is gated for a person."""

DEFAULT_MAX_ITEM_ATTEMPTS = 3
"""Attempts at one work item before it is blocked (``--max-item-attempts``; 0: no limit)."""

CUT_SHORT_FIELD = "cut_short"
"""The item field counting the iterations in a row a crash of autopilot's own process
cut short before a decision (``cut_short_item``); autopilot's own."""

ATTEMPTS_FROM_FIELD = "attempts_from"
"""The item field holding ``attempt`` as it was when a person last gave the item new
attempts (unblocked, answered or reopened it)."""

MAX_FEEDBACK_CHARS = 4000
"""Feedback carried into the next prompt is cut to this many characters (the tail)."""


def _tail(text: str, limit: int = MAX_FEEDBACK_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def start_item(item: WorkItem) -> WorkItem:
    """The item as an iteration starts working on it: ``running``, ``attempt`` + 1.

    A running item (resumed after a missing decision) keeps its attempt count.
    """
    if item.status is ItemStatus.RUNNING:
        return item
    completion = replace(item.completion, state=CompletionState.IN_PROGRESS)
    extra = {k: v for k, v in item.extra.items() if k != CUT_SHORT_FIELD}
    return item.with_status(
        ItemStatus.RUNNING, attempt=item.attempt + 1, completion=completion, extra=extra
    )


def apply_report(
    item: WorkItem, report: ItemReport, checks: CheckOutcome | None = None
) -> WorkItem:
    """The item after its running iteration's decision (see the module's table).

    Args:
        item: The running item.
        report: A report for it that ``validate_report`` accepted.
        checks: For ``continue_next``, autopilot's run of the item's checks (None
            means there were none to run, which passes).

    Returns:
        The changed item; ``missing_decisions`` in ``extra`` is cleared; paths an
        earlier attempt changed outside the allowed surface stay on the record and
        in its evidence.
    """
    extra = {k: v for k, v in item.extra.items() if k not in ("missing_decisions", CUT_SHORT_FIELD)}
    item = replace(item, extra=extra)
    evidence = claimed_evidence(report) + still_violated(item)
    decision = report.decision
    if decision is ItemDecision.CONTINUE_NEXT:
        outcome = checks or CheckOutcome(passed=True)
        if not outcome.passed:
            return item.with_status(
                ItemStatus.REOPENED,
                completion=Completion(
                    state=CompletionState.FAILED,
                    verdict=Verdict.FAIL,
                    evidence=evidence + outcome.evidence,
                    completion_check_digest=outcome.digest,
                    reopen_target=FocusLayer.MICRO,
                    feedback=_tail(outcome.failure or "a completion check failed"),
                    surface_violations=item.completion.surface_violations,
                    extra=item.completion.extra,
                ),
            )
        return item.with_status(
            ItemStatus.COMPLETED,
            blocked_reason=None,
            completion=Completion(
                state=CompletionState.PASSED,
                verdict=Verdict.PASS,
                evidence=(*evidence, *outcome.evidence),
                completion_check_digest=outcome.digest,
                surface_violations=item.completion.surface_violations,
                extra=item.completion.extra,
            ),
        )
    said = _tail("\n".join(e for e in report.evidence if e.strip()))
    if decision is ItemDecision.RETRY_SAME_UNIT:
        completion = replace(
            item.completion,
            state=CompletionState.IN_PROGRESS,
            evidence=evidence,
            feedback=said,
            reopen_target=None,
        )
        return item.with_status(ItemStatus.READY, completion=completion)
    if decision in REOPEN_LAYER:
        completion = replace(
            item.completion,
            state=CompletionState.FAILED,
            verdict=Verdict.FAIL,
            evidence=evidence,
            feedback=said,
            reopen_target=REOPEN_LAYER[decision],
        )
        return item.with_status(ItemStatus.REOPENED, completion=completion)
    if decision is ItemDecision.ASK_USER_META:
        completion = replace(
            item.completion, state=CompletionState.AWAITING_USER, evidence=evidence
        )
        return item.with_status(ItemStatus.BLOCKED, completion=completion, blocked_reason=said)
    completion = replace(item.completion, state=CompletionState.STOPPED, evidence=evidence)
    return item.with_status(ItemStatus.STOPPED, completion=completion)


def missing_report(item: WorkItem) -> WorkItem:
    """The running item after an iteration that reported no decision.

    It stays ``running`` (resumed next time with ``pending-decision: missing``);
    after ``MISSING_REPORTS_BEFORE_ASKING`` in a row it is ``blocked`` with a
    question for a person.
    """
    item = replace(item, extra={k: v for k, v in item.extra.items() if k != CUT_SHORT_FIELD})
    count = _count(item, "missing_decisions") + 1
    if count >= MISSING_REPORTS_BEFORE_ASKING:
        extra = {k: v for k, v in item.extra.items() if k != "missing_decisions"}
        completion = replace(item.completion, state=CompletionState.AWAITING_USER)
        return item.with_status(
            ItemStatus.BLOCKED,
            completion=completion,
            extra=extra,
            blocked_reason=(
                f"{count} iterations in a row ended without a decision about {item.id}; "
                "how should it go on?"
            ),
        )
    return replace(item, extra={**item.extra, "missing_decisions": count})


def _count(item: WorkItem, name: str) -> int:
    count = item.extra.get(name, 0)
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0


def cut_short_item(item: WorkItem, max_attempts: int) -> WorkItem:
    """The running item after an iteration a crash of autopilot's own process cut short
    before a decision about it.

    It stays ``running`` (resumed at the next iteration, not counted as a missing
    decision: the crash may not be the agent's doing), its ``cut_short`` count one
    higher; at ``max_attempts`` in a row (0: no limit) it is ``blocked`` instead, with
    no question, so an agent that ends its driver every time cannot spend the run on
    it. A decision, a missing one, or the item's next start clears the count.
    """
    count = _count(item, CUT_SHORT_FIELD) + 1
    if max_attempts <= 0 or count < max_attempts:
        return replace(item, extra={**item.extra, CUT_SHORT_FIELD: count})
    extra = {k: v for k, v in item.extra.items() if k != CUT_SHORT_FIELD}
    return item.with_status(
        ItemStatus.BLOCKED,
        extra=extra,
        blocked_reason=(
            f"{count} iterations in a row were cut short by a crash of autopilot's process "
            f"before a decision about {item.id} (the limit is {max_attempts}); "
            f"{attempts_note(item.id, max_attempts)}"
        ),
    )


def answer_item(item: WorkItem, answer: str) -> WorkItem:
    """A blocked item after a person's answer: ``ready`` again, the answer as feedback."""
    question = item.blocked_reason
    feedback = f"question: {question}\nanswer: {answer}" if question else f"answer: {answer}"
    completion = replace(item.completion, state=CompletionState.IN_PROGRESS, feedback=feedback)
    item = fresh_attempts(item)
    return item.with_status(ItemStatus.READY, completion=completion, blocked_reason=None)


def note_answer(item: WorkItem, question: str | None, answer: str) -> WorkItem:
    """An open item with a person's answer to ``question`` as feedback for its next
    attempt; its status and attempts as they are (``gate_answer.answer_fallback``)."""
    feedback = f"question: {question}\nanswer: {answer}" if question else f"answer: {answer}"
    return replace(item, completion=replace(item.completion, feedback=feedback))


def fresh_attempts(item: WorkItem) -> WorkItem:
    """The item with its attempt limit counted afresh from now (a person unblocked,
    answered or reopened it)."""
    if not item.attempt:
        return item
    return replace(item, extra={**item.extra, ATTEMPTS_FROM_FIELD: item.attempt})


def attempts_used(item: WorkItem) -> int:
    """Attempts since a person last gave the item new ones (``fresh_attempts``)."""
    start = item.extra.get(ATTEMPTS_FROM_FIELD, 0)
    if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start <= item.attempt:
        start = 0
    return item.attempt - start


def limit_attempts(item: WorkItem, max_attempts: int) -> WorkItem:
    """The item after an attempt: blocked if it goes back to the queue (``ready`` or
    ``reopened``) having used ``max_attempts`` attempts (0: no limit).

    The reason names the attempts, the last verdict and what failed (the first line of
    the feedback for the next attempt: a failing check, the files outside the allowed
    surface, the files a merge conflicted in), and how to try again.
    """
    if max_attempts <= 0 or item.status not in (ItemStatus.READY, ItemStatus.REOPENED):
        return item
    used = attempts_used(item)
    if used < max_attempts:
        return item
    first = item.attempt - used + 1
    if first == 1:
        counted = "1 attempt" if used == 1 else f"{used} attempts"
    else:  # a person gave it more: the attempts since, by number
        counted = f"attempt {first}" if used == 1 else f"attempts {first}-{item.attempt}"
    verdict = item.completion.verdict.value if item.completion.verdict else "none"
    lines = [ln.strip() for ln in (item.completion.feedback or "").splitlines() if ln.strip()]
    last = lines[0] if lines else ""
    if last.endswith(":") and len(lines) > 1:  # "its output ended with:" and that output
        last = f"{last} {lines[1]}"
    failing = f": {last[:300]}" if last else ""
    return item.with_status(
        ItemStatus.BLOCKED,
        blocked_reason=(
            f"{counted} did not complete it (the limit is {max_attempts}); last "
            f"verdict {verdict}{failing}; {attempts_note(item.id, max_attempts)}"
        ),
    )


def surface_feedback(paths: Sequence[str]) -> str:
    """``changed files outside the allowed surface: a, b and 3 more``."""
    limit = MAX_SURFACE_VIOLATIONS
    more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
    return f"changed files outside the allowed surface: {', '.join(paths[:limit])}{more}"


def reopen_for_violation(
    item: WorkItem, paths: Sequence[str], report: ItemReport | None = None
) -> WorkItem:
    """The item after it changed files outside its allowed surface: reopened (micro).

    Nothing in the work tree is reverted. The paths join the record's
    ``surface_violations`` (kept from then on, whatever later attempts decide) and
    its evidence, after the attempt's own report (``report``, when it made one);
    the next prompt names them.
    """
    said = claimed_evidence(report) if report is not None else ()
    recorded = tuple(dict.fromkeys((*item.completion.surface_violations, *paths)))
    return _reopened_micro(
        item,
        evidence=(*said, f"surface-violation: {surface_feedback(paths)}"),
        feedback=surface_feedback(paths),
        surface_violations=recorded[:MAX_SURFACE_VIOLATIONS],
    )


UNVERIFIED_SURFACE = (
    "the work tree's mark from when this item started is gone (item-marks/ and the "
    "iteration's tree-start.json in the run's folder) and the run's log holds only its "
    "digest, so what the item changed outside its allowed surface cannot be checked"
)


def reopen_for_unverified_surface(item: WorkItem, report: ItemReport | None) -> WorkItem:
    """The item after an attempt claimed it complete when its surface could not be
    checked (``UNVERIFIED_SURFACE``): reopened (micro), the completion not accepted."""
    said = claimed_evidence(report) if report is not None else ()
    return _reopened_micro(
        item,
        evidence=(*said, f"surface-unverified: {UNVERIFIED_SURFACE}"),
        feedback=f"completion not accepted: {UNVERIFIED_SURFACE}",
    )


def still_violated(item: WorkItem) -> tuple[str, ...]:
    """The record's evidence line for paths an earlier attempt changed outside the
    allowed surface (none: no line), for a record that starts afresh."""
    paths = item.completion.surface_violations
    if not paths:
        return ()
    return (
        f"surface-violation (an earlier attempt; autopilot reverts nothing): {', '.join(paths)}",
    )


def reopen_for_conflict(item: WorkItem, paths: Sequence[str]) -> WorkItem:
    """The item after its work conflicted with the run branch: reopened (micro).

    A lane of a parallel run merges a completed item into the run branch; when that
    merge conflicts, the item is done again on top of the run branch's latest work,
    and the next prompt (and ``completion.evidence``) name the conflicting files.
    """
    shown = ", ".join(paths[:20]) + (f" and {len(paths) - 20} more" if len(paths) > 20 else "")
    note = f"merging into the run branch conflicted in: {shown}"
    return _reopened_micro(
        item,
        evidence=(*item.completion.evidence, note),
        feedback=f"{note}; the work tree now holds the run branch's latest work: do the "
        "item again on top of it",
    )


def _reopened_micro(item: WorkItem, **completion_fields: Any) -> WorkItem:
    """``item`` reopened (micro) with a failed completion: its record's other fields,
    with ``completion_fields`` (``evidence``, ``feedback``, …) in place."""
    completion = replace(
        item.completion,
        state=CompletionState.FAILED,
        verdict=Verdict.FAIL,
        reopen_target=FocusLayer.MICRO,
        **completion_fields,
    )
    return item.with_status(ItemStatus.REOPENED, completion=completion)
