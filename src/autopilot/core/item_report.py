"""An agent's decision about its running work item, as it reports it, and what makes
a report one that can be applied (pure).

The agent reports through ``autopilot report`` or a promoted
``.autopilot/consistency-decision.json`` (``docs/backlog.md``): a decision
(``ItemDecision``), a pass or fail for each criterion, and evidence; ``validate_report``
says everything wrong with a report, each as a line telling how to fix it. What an
applied decision does to the item is ``core.decisions``'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from autopilot.core.workitems import ItemStatus, WorkItem


class ItemDecision(StrEnum):
    """The decisions an agent may report for its running work item (``docs/backlog.md``)."""

    CONTINUE_NEXT = "continue_next"
    RETRY_SAME_UNIT = "retry_same_unit"
    REOPEN_MICRO = "reopen_micro"
    REOPEN_MESO = "reopen_meso"
    REOPEN_MACRO = "reopen_macro"
    ASK_USER_META = "ask_user_meta"
    STOP = "stop"


NEEDS_EVIDENCE = frozenset(
    {
        ItemDecision.RETRY_SAME_UNIT,
        ItemDecision.REOPEN_MICRO,
        ItemDecision.REOPEN_MESO,
        ItemDecision.REOPEN_MACRO,
        ItemDecision.ASK_USER_META,
    }
)
"""Decisions that must say why (``docs/backlog.md``: they need evidence)."""


@dataclass(frozen=True)
class ItemReport:
    """An agent's decision about its running item.

    Attributes:
        item_id: The item it is about.
        decision: What the agent decided.
        criteria: Criterion id -> passed (True) or failed (False), as the agent claims.
        evidence: What the agent offers as evidence, one string each.
        source: Where it came from (``report`` or ``decision-file``).
    """

    item_id: str
    decision: ItemDecision
    criteria: Mapping[str, bool]
    evidence: tuple[str, ...] = ()
    source: str = "report"


@dataclass(frozen=True)
class CheckOutcome:
    """What autopilot's own run of an item's ``check`` commands found.

    Attributes:
        passed: True if every check exited 0 (also when there were none).
        digest: ``sha256:<64 hex>`` of what ran and what it printed, or None if
            nothing ran.
        evidence: One line per check (``[completion-check] ac1: exit 0``).
        failure: The failing checks' commands and output tails, for the next prompt.
    """

    passed: bool
    digest: str | None = None
    evidence: tuple[str, ...] = ()
    failure: str | None = None


def validate_report(items: Sequence[WorkItem], report: ItemReport) -> list[str]:
    """Everything wrong with ``report``, each as a line telling how to fix it.

    Args:
        items: The backlog as it is now.
        report: The agent's decision.

    Returns:
        The problems; empty when the report can be applied.
    """
    item = next((i for i in items if i.id == report.item_id), None)
    running = [i.id for i in items if i.status is ItemStatus.RUNNING]
    if item is None:
        hint = f"the running item is {running[0]!r}" if running else "no item is running"
        return [
            f"no work item {report.item_id!r} in .autopilot/tasks.jsonl ({hint}; "
            "see autopilot tasks list)"
        ]
    if item.status is not ItemStatus.RUNNING:
        hint = f"report on the running item {running[0]!r}" if running else "no item is running"
        return [f"work item {item.id!r} is {item.status.value}, not running: {hint}"]
    problems: list[str] = []
    known = [c.id for c in item.acceptance_criteria]
    for criterion_id in report.criteria:
        if criterion_id not in known:
            ids = ", ".join(known) if known else "none"
            problems.append(
                f"criterion {criterion_id!r} is not one of {item.id}'s criteria ({ids}); "
                f"see autopilot tasks show {item.id}"
            )
    if report.decision is ItemDecision.CONTINUE_NEXT:
        failed = [cid for cid, ok in report.criteria.items() if not ok and cid in known]
        missing = [cid for cid in known if cid not in report.criteria]
        if failed:
            problems.append(
                f"continue_next with failing criteria ({', '.join(failed)}): report "
                "reopen_micro (or retry_same_unit) with --evidence saying what fails"
            )
        if missing:
            flags = " ".join(f"--criterion {cid}=pass" for cid in missing)
            problems.append(
                f"continue_next needs a pass for every criterion of {item.id}; add {flags} "
                "once each one holds"
            )
    if report.decision in NEEDS_EVIDENCE and not any(e.strip() for e in report.evidence):
        what = (
            "the question for the user"
            if report.decision is ItemDecision.ASK_USER_META
            else "what failed or what is left"
        )
        problems.append(f"{report.decision.value} needs --evidence TEXT with {what}")
    return problems


def claimed_evidence(report: ItemReport) -> tuple[str, ...]:
    """The report's evidence with one ``claim-evidence-map`` line per criterion."""
    claims = tuple(
        f"claim-evidence-map: {cid}={'pass' if ok else 'fail'}"
        for cid, ok in report.criteria.items()
    )
    return tuple(report.evidence) + claims
