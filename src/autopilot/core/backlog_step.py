"""One backlog iteration, before and after the agent (pure).

Before: ``plan_iteration`` picks the item (a running one is resumed, else the first
ready one), marks it ``running`` and composes the prompt; or says the backlog is done,
or that a person is needed. A lane of a parallel run skips the items other lanes hold,
claims its item (``claimed_by``), and waits when only held items are left. After:
``conclude_item`` applies the agent's decision (``choose_report`` picks it from what
was reported) or notes that none came.
``reconcile`` compares ``tasks.jsonl`` as found with autopilot's own copy: while an
agent works, autopilot owns the file, so what the iteration changed in it other than
adding items is undone (an agent cannot complete, drop or weaken its own work item);
a deleted file is written again.

Each function returns the events to append (``type`` plus fields, no ``ts``/``runId``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from autopilot.core.continuation import continuation_message
from autopilot.core.decisions import (
    apply_report,
    cut_short_item,
    limit_attempts,
    missing_report,
    start_item,
)
from autopilot.core.gate_answer import NO_ITEM_CAN_START
from autopilot.core.item_bounds import bound_report, fit_item
from autopilot.core.item_report import CheckOutcome, ItemDecision, ItemReport, validate_report
from autopilot.core.ready_queue import backlog_problems, next_item, open_items
from autopilot.core.structs import replace
from autopilot.core.workitem_events import (
    backlog_snapshot_fields,
    workitem_end_fields,
    workitem_recorded_fields,
    workitem_start_fields,
)
from autopilot.core.workitems import ItemStatus, Verdict, WorkItem

Event = dict[str, object]

CLAIM_FIELD = "claimed_by"
"""The item field that names the lane (run id) working on it in a parallel run."""


def _event(kind: str, fields: dict[str, object]) -> Event:
    return {"type": kind, **fields}


@dataclass(frozen=True)
class IterationPlan:
    """What the next backlog iteration does.

    Attributes:
        items: The backlog with the chosen item ``running`` (to be written).
        item: The chosen item, or None.
        prompt: Its continuation message, or None.
        done: True when no item is open and every completed item passed its checks.
        question: When a person must act first, what to ask them.
        events: ``workitem_start`` and the changed item's ``workitem_recorded``.
        wait: Nothing can start but items other lanes hold may free some: why.
    """

    items: tuple[WorkItem, ...]
    item: WorkItem | None = None
    prompt: str | None = None
    done: bool = False
    question: str | None = None
    events: tuple[Event, ...] = ()
    wait: str | None = None


def with_item_replaced(items: Sequence[WorkItem], item: WorkItem) -> tuple[WorkItem, ...]:
    """``items`` with the first item of ``item``'s id replaced (a later line
    repeating its id is kept as it is)."""
    index = next((n for n, other in enumerate(items) if other.id == item.id), None)
    if index is None:
        return tuple(items)
    return (*items[:index], item, *items[index + 1 :])


def _first_of_each_id(items: Sequence[WorkItem]) -> dict[str, WorkItem]:
    """The first item of each id, in file order: a later line repeating an id is
    autopilot's to keep as written, never to compare or change (it holds the run)."""
    firsts: dict[str, WorkItem] = {}
    for item in items:
        firsts.setdefault(item.id, item)
    return firsts


def plan_iteration(
    run_id: str,
    items: Sequence[WorkItem],
    iteration: int,
    *,
    run_surface: Sequence[str] = (),
    taken: Collection[str] = (),
    claim: bool = False,
) -> IterationPlan:
    """Choose and start the next item, or say why there is none.

    Args:
        run_id: The run's id (it is in the prompt).
        items: The backlog as read at the boundary.
        iteration: The number of the iteration about to start.
        run_surface: The run's allowed surfaces, for items that name none.
        taken: Ids of running items other lanes hold: never chosen, and their
            dependents wait for them.
        claim: Record ``run_id`` in the started item's ``claimed_by`` (a lane). A
            running item another lane claimed (that lane ended) is taken over as a
            new attempt (``attempt`` + 1), not resumed as the same one.
    """
    free = [item for item in items if item.id not in taken] if taken else items
    chosen = next_item(free)
    if chosen is None:
        if taken:
            held = ", ".join(sorted(taken))
            return IterationPlan(
                tuple(items), wait=f"waiting for work items other lanes are running: {held}"
            )
        return _no_item(tuple(items))
    resumed = chosen.status is ItemStatus.RUNNING
    # A lane that takes over another's running item (its lane died) starts an attempt.
    taken_over = claim and resumed and chosen.extra.get(CLAIM_FIELD) != run_id
    started = start_item(chosen.with_status(ItemStatus.READY) if taken_over else chosen)
    if claim:
        started = replace(started, extra={**started.extra, CLAIM_FIELD: run_id})
    prompt = continuation_message(run_id, started, pending_missing=resumed, run_surface=run_surface)
    events = (
        _event("workitem_recorded", workitem_recorded_fields(started)),
        _event("workitem_start", workitem_start_fields(started, iteration)),
    )
    return IterationPlan(with_item_replaced(items, started), started, prompt, events=events)


UNPROVEN_GATE = " completed without passing evidence; "
"""Part of the gate of a backlog whose completed items lack passing evidence."""


def backlog_gate(question: str) -> bool:
    """True for a gate autopilot derived from the backlog (no item can start, or the
    completed items lack passing evidence), not an item's question to a person: a
    change to ``tasks.jsonl`` that plans something else releases it."""
    return question.startswith(NO_ITEM_CAN_START) or (
        question.startswith("work item") and UNPROVEN_GATE in question
    )


def _no_item(items: tuple[WorkItem, ...]) -> IterationPlan:
    still_open = open_items(items)
    if not still_open:
        unproven = [
            i.id
            for i in items
            if i.status is ItemStatus.COMPLETED and i.completion.verdict is not Verdict.PASS
        ]
        if not unproven:
            return IterationPlan(items, done=True)
        one = len(unproven) == 1
        return IterationPlan(
            items,
            question=(
                f"work item{'' if one else 's'} {', '.join(unproven)} "
                f"{'is' if one else 'are'}{UNPROVEN_GATE}"
                f"reopen {'it' if one else 'them'} (autopilot tasks reopen ID) or mark "
                f"{'it' if one else 'them'} not_applicable "
                "(autopilot tasks edit ID --status not_applicable)"
            ),
        )
    held: list[str] = []
    for item in still_open:
        if item.status is ItemStatus.BLOCKED:
            held.append(f"{item.id} is blocked: {item.blocked_reason or 'no reason given'}")
    held.extend(problem.message for problem in backlog_problems(items))
    waiting = [i.id for i in still_open if i.status is not ItemStatus.BLOCKED]
    if waiting and not held:
        held.append(f"{', '.join(waiting)} wait for dependencies that cannot complete")
    return IterationPlan(items, question=NO_ITEM_CAN_START + "; ".join(held))


def choose_report(
    items: Sequence[WorkItem], item_id: str, reports: Sequence[ItemReport]
) -> tuple[ItemReport | None, list[str]]:
    """The newest valid report about the running item, and why the others were refused.

    Each report is cut to the sizes an item record holds first (``item_bounds.bound_report``).

    Returns:
        ``(report or None, problems)``, one problem line per refused report.
    """
    chosen: ItemReport | None = None
    problems: list[str] = []
    for report in reports:
        if report.item_id != item_id:
            problems.append(f"a report about {report.item_id!r} was ignored: {item_id} was running")
            continue
        bounded = bound_report(report)
        found = validate_report(items, bounded)
        if found:
            problems.append(f"a {report.decision.value} report was refused: {'; '.join(found)}")
        else:
            chosen = bounded
    return chosen, problems


@dataclass(frozen=True)
class ItemConclusion:
    """What an iteration did to its item.

    Attributes:
        items: The backlog after it (to be written).
        item: The item after it.
        decision: The decision applied, or None when the agent reported none.
        question: For ``ask_user_meta`` or repeated missing decisions, the question.
        stop: The agent reported ``stop``.
        events: ``workitem_end``, the item's ``workitem_recorded`` and a
            ``backlog_snapshot``.
    """

    items: tuple[WorkItem, ...]
    item: WorkItem
    decision: ItemDecision | None
    question: str | None
    stop: bool
    events: tuple[Event, ...]


def conclude_item(
    items: Sequence[WorkItem],
    item: WorkItem,
    report: ItemReport | None,
    checks: CheckOutcome | None,
    iteration: int,
    max_attempts: int = 0,
    *,
    cut_short: bool = False,
) -> ItemConclusion:
    """Apply the iteration's decision (or its absence) to the running item.

    Args:
        items: The backlog (with ``item`` running).
        item: The item the iteration worked on.
        report: The chosen report (``choose_report``), or None.
        checks: For ``continue_next``, autopilot's run of the item's checks.
        iteration: The iteration's number.
        max_attempts: Attempts before an item that goes back to the queue is
            blocked instead (``decisions.limit_attempts``; 0: no limit). Such a
            block asks no question: the run goes on with the next ready item.
        cut_short: A crash of autopilot's own process cut the iteration short: no
            decision is then not the agent's doing, and the item stays running
            without counting toward ``MISSING_REPORTS_BEFORE_ASKING``, but after
            ``max_attempts`` such iterations in a row it is blocked
            (``decisions.cut_short_item``), with no question.

    The item after it is cut to its line cap (``item_bounds.fit_item``), so the
    decision is written and counted whatever the agent said.
    """
    if report is not None:
        after = limit_attempts(apply_report(item, report, checks), max_attempts)
    elif cut_short:
        after = cut_short_item(item, max_attempts)
    else:
        after = missing_report(item)
    after = fit_item(after)
    decision = report.decision if report is not None else None
    # The agent's question, or missing decisions, ask a person; an attempt limit does not.
    asked = after.status is ItemStatus.BLOCKED and (
        not cut_short if report is None else report.decision is ItemDecision.ASK_USER_META
    )
    question = after.blocked_reason if asked else None
    changed = with_item_replaced(items, after)
    events = (
        _event("workitem_end", workitem_end_fields(after, iteration, decision)),
        _event("workitem_recorded", workitem_recorded_fields(after)),
        _event("backlog_snapshot", backlog_snapshot_fields(changed)),
    )
    return ItemConclusion(changed, after, decision, question, decision is ItemDecision.STOP, events)


@dataclass(frozen=True)
class Reconciled:
    """``tasks.jsonl`` as autopilot will use it.

    Attributes:
        items: The items to go on with.
        rewrite: True if the file must be written again (something was undone).
        notes: One line per thing undone or taken in, for warning events.
        events: ``workitem_recorded`` for every item new or changed.
    """

    items: tuple[WorkItem, ...]
    rewrite: bool
    notes: tuple[str, ...]
    events: tuple[Event, ...]


def reconcile(
    ours: Sequence[WorkItem], found: Sequence[WorkItem] | None, *, agent_worked: bool
) -> Reconciled:
    """Compare the file as found with autopilot's own copy.

    Args:
        ours: The items as autopilot last wrote or accepted them.
        found: The items in the file now, or None if the file is gone.
        agent_worked: True at an iteration's end (changes are the agent's), False at
            a boundary where no agent ran (changes are a person's, and accepted).
    """
    if found is None:
        if not ours:
            return Reconciled((), False, (), ())
        return Reconciled(
            tuple(ours),
            True,
            (".autopilot/tasks.jsonl was deleted; written again from the run's log",),
            (),
        )
    by_id = _first_of_each_id(ours)
    firsts = _first_of_each_id(found)
    if not agent_worked:
        events = tuple(
            _event("workitem_recorded", workitem_recorded_fields(item))
            for item in firsts.values()
            if by_id.get(item.id) != item
        )
        return Reconciled(tuple(found), False, (), events)
    undone = [i.id for i in firsts.values() if i.id in by_id and by_id[i.id] != i]
    removed = [i for i in by_id if i not in firsts]
    added = [i for i in firsts.values() if i.id not in by_id]
    notes = []
    if undone:
        notes.append(
            f"work items {', '.join(undone)} were changed while the agent worked; undone "
            "(pause the run to edit .autopilot/tasks.jsonl)"
        )
    if removed:
        notes.append(
            f"work items {', '.join(removed)} were removed while the agent worked; restored"
        )
    items = (*ours, *added)
    events = tuple(_event("workitem_recorded", workitem_recorded_fields(i)) for i in added)
    return Reconciled(tuple(items), bool(undone or removed), tuple(notes), events)


@dataclass(frozen=True)
class Begun:
    """What a backlog run's ``begin`` found (``loop.backlog.BacklogShell.begin``).

    Attributes:
        item: The item the iteration works on, or None.
        prompt: Its continuation message, or None.
        done: Nothing is open and every completed item passed its checks.
        question: A person must act first (the run waits for them).
        hold: ``tasks.jsonl`` cannot be used as it is (the run pauses with this).
        wait: Only items other lanes hold are left (the lane pauses until the file
            changes).
    """

    item: WorkItem | None = None
    prompt: str | None = None
    done: bool = False
    question: str | None = None
    hold: str | None = None
    wait: str | None = None
