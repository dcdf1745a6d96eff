"""A backlog run's last word on its completed items, and attempts that never go down (pure).

**The final evidence gate.** A backlog run never ends ``backlog_done`` on the records
alone: before it does, autopilot runs the ``check`` commands of every ``completed`` item
that has any again (``loop.backlog_verify``). ``reopen_unverified`` is what a failing
check does to its item: ``reopened`` (``reopen_target`` micro, verdict ``fail``, the
checks' digest, the failing checks' output as the next attempt's feedback), blocked
instead at the run's attempt limit (``decisions.limit_attempts``): the attempt whose
completion did not hold counts. So a completion the agent wrote into ``tasks.jsonl``
and the run's log itself, and an item a later one broke, are found before the run ends.

**Attempts are monotone.** The attempt count of an item is the highest any record of
the run holds (every line of its log, its own copy, ``tasks.jsonl``): an agent that
writes or appends a lower one cannot give itself attempts back
(``--max-item-attempts``). ``highest_attempts`` reads the log; ``raise_attempts``
applies a floor and names what it raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autopilot.core.decisions import MAX_FEEDBACK_CHARS, limit_attempts
from autopilot.core.item_bounds import fit_item
from autopilot.core.item_report import CheckOutcome
from autopilot.core.structs import replace
from autopilot.core.workitems import (
    Completion,
    CompletionState,
    FocusLayer,
    ItemStatus,
    Verdict,
    WorkItem,
)

VERIFIED_DECISION = "backlog_verified"
"""The ``decision`` of the ``workitem_end`` of an item the final evidence gate reopened."""


def to_verify(
    items: Sequence[WorkItem], settled: frozenset[str] = frozenset()
) -> tuple[WorkItem, ...]:
    """The ``completed`` items that have a criterion with a ``check``, in file order,
    but for the ``settled`` ids (``settled_before``)."""
    return tuple(
        item
        for item in items
        if item.status is ItemStatus.COMPLETED
        and item.id not in settled
        and any(c.check is not None for c in item.acceptance_criteria)
    )


def settled_before(events: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The ids of the items that were completed before the run started and stayed so:
    the first ``workitem_recorded`` of the item (the file as the run first read it,
    logged before its first ``iteration_start``) says ``completed``, and no later line
    of the log ends the item (``workitem_end``) or records it with another status.
    Lines appended to the log can only take an item out of this set."""
    first: dict[str, str] = {}
    touched: set[str] = set()
    started = False
    for event in events:
        kind, item_id = event.get("type"), event.get("itemId")
        if kind == "iteration_start":
            started = True
        if not isinstance(item_id, str):
            continue
        if kind == "workitem_end":
            touched.add(item_id)
        elif kind == "workitem_recorded":
            data = event.get("item")
            status = data.get("status") if isinstance(data, dict) else None
            if item_id not in first and not started:
                first[item_id] = str(status)
            elif status != ItemStatus.COMPLETED.value:
                touched.add(item_id)
    return frozenset(i for i, status in first.items() if status == "completed") - touched


def reopen_unverified(item: WorkItem, outcome: CheckOutcome, max_attempts: int) -> WorkItem:
    """The completed ``item`` after the final evidence gate ran its checks and one
    failed (``outcome``): reopened (micro) with the failing checks' output as feedback,
    or blocked at ``max_attempts`` (0: no limit); cut to its line cap."""
    failure = outcome.failure or "a completion check failed"
    feedback = "when the run checked its completed items again before ending: " + failure
    if len(feedback) > MAX_FEEDBACK_CHARS:
        feedback = "…" + feedback[-(MAX_FEEDBACK_CHARS - 1) :]
    completion = Completion(
        state=CompletionState.FAILED,
        verdict=Verdict.FAIL,
        evidence=tuple(f"[backlog-verified] {line}" for line in outcome.evidence),
        completion_check_digest=outcome.digest,
        reopen_target=FocusLayer.MICRO,
        feedback=feedback,
        surface_violations=item.completion.surface_violations,
        extra=item.completion.extra,
    )
    reopened = item.with_status(ItemStatus.REOPENED, completion=completion)
    return fit_item(limit_attempts(reopened, max_attempts))


def verified_fields(
    results: Sequence[tuple[WorkItem, CheckOutcome]], reopened: Sequence[WorkItem]
) -> dict[str, Any]:
    """``backlog_verified``'s fields: ``passed``, ``items`` (``itemId``, ``passed``,
    ``completionCheckDigest``, ``checks`` — one ``<criterion>: <status>`` line each — of
    at most 100 items, in order) and ``reopened`` (the ids reopened or blocked)."""
    listed = [
        {
            "itemId": item.id,
            "passed": outcome.passed,
            "completionCheckDigest": outcome.digest,
            "checks": [line.removeprefix("[completion-check] ") for line in outcome.evidence][:20],
        }
        for item, outcome in results[:100]
    ]
    return {
        "passed": all(outcome.passed for _, outcome in results),
        "items": listed,
        "reopened": [item.id for item in reopened],
    }


def _whole(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def highest_attempts(events: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The highest ``attempt`` every record in the run's log holds of each item:
    ``workitem_recorded`` items, ``workitem_start``/``workitem_end`` and the items of
    ``backlog_snapshot`` (a value that is not a whole number is skipped)."""
    highest: dict[str, int] = {}

    def note(item_id: object, attempt: object) -> None:
        value = _whole(attempt)
        if isinstance(item_id, str) and value is not None:
            highest[item_id] = max(highest.get(item_id, 0), value)

    for event in events:
        kind = event.get("type")
        if kind == "workitem_recorded":
            item = event.get("item")
            if isinstance(item, dict):
                note(item.get("id"), item.get("attempt"))
        elif kind in ("workitem_start", "workitem_end"):
            note(event.get("itemId"), event.get("attempt"))
        elif kind == "backlog_snapshot":
            listed = event.get("items")
            for entry in listed if isinstance(listed, list) else ():
                if isinstance(entry, dict):
                    note(entry.get("id"), entry.get("attempt"))
    return highest


@dataclass(frozen=True)
class Raised:
    """Items with their attempt counts raised to a floor.

    Attributes:
        items: The items, each ``attempt`` at least its floor.
        lowered: ``(item id, the lower count seen, the count kept)`` for each raised.
    """

    items: tuple[WorkItem, ...]
    lowered: tuple[tuple[str, int, int], ...] = ()


def raise_attempts(items: Sequence[WorkItem], floor: Mapping[str, int]) -> Raised:
    """``items`` with each ``attempt`` raised to ``floor``'s count of its id (the
    highest the run has on record); an item above it or without one is kept."""
    out: list[WorkItem] = []
    lowered: list[tuple[str, int, int]] = []
    for item in items:
        least = floor.get(item.id, 0)
        if item.attempt < least:
            lowered.append((item.id, item.attempt, least))
        out.append(replace(item, attempt=least) if item.attempt < least else item)
    return Raised(tuple(out), tuple(lowered))


def lowered_note(lowered: tuple[str, int, int], where: str) -> str:
    """The ``warning`` for an attempt count lower than the run's record of it."""
    item_id, seen, kept = lowered
    return (
        f"{where} gave work item {item_id} attempt {seen}, lower than the {kept} the run has "
        f"on record; {kept} is kept (an attempt count never goes down)"
    )


def items_from_log(events: Sequence[Mapping[str, Any]]) -> Raised:
    """The work items a run's log last recorded (``rebuild_items``; a malformed one is
    left out), each with the highest attempt count any line of the log holds for it
    (``highest_attempts``): a lower count appended last is listed in ``lowered``."""
    from autopilot.core.workitem_events import rebuild_items
    from autopilot.core.workitems import ItemFormatError, item_from_json

    rebuilt: list[WorkItem] = []
    for data in rebuild_items(events):
        try:
            rebuilt.append(item_from_json(data))
        except ItemFormatError:
            continue
    return raise_attempts(rebuilt, highest_attempts(events))
