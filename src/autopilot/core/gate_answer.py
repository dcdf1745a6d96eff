"""Which blocked work items a person's answer at a backlog run's gate goes to (pure).

A run's gate asks either one item's question (the agent's ``ask_user_meta``, or
missing decisions: the gate is that item's ``blocked_reason``), or, when no work item
can start, lists every blocked item (``core.backlog_step``). An answer to the first
goes to the item it asked about. An answer to the second gives more attempts to every
item autopilot blocked for its attempts (``decisions.limit_attempts``,
``decisions.cut_short_item``); when none was, it goes to the first blocked item the
gate names.
"""

from __future__ import annotations

from collections.abc import Sequence

from autopilot.core.workitems import ItemStatus, WorkItem

_OPEN = (ItemStatus.READY, ItemStatus.REOPENED, ItemStatus.RUNNING)

NO_ITEM_CAN_START = "no work item can start: "
"""How the gate of a backlog where every open item is held begins."""


def attempts_note(item_id: str, max_attempts: int) -> str:
    """The end of the reason of an item blocked for its attempts: how to give it more."""
    return f"autopilot tasks unblock {item_id} gives it {max_attempts} more"


def blocked_for_attempts(item: WorkItem) -> bool:
    """True for an item autopilot blocked because its attempts ran out."""
    reason = item.blocked_reason or ""
    return item.status is ItemStatus.BLOCKED and f"autopilot tasks unblock {item.id} gives it " in (
        reason
    )


def answer_targets(items: Sequence[WorkItem], question: str | None) -> list[WorkItem]:
    """The blocked items an answer to ``question`` goes to, in file order (the first
    item of each id; empty: none is blocked with a reason)."""
    firsts: dict[str, WorkItem] = {}
    for item in items:
        firsts.setdefault(item.id, item)
    blocked = [i for i in firsts.values() if i.status is ItemStatus.BLOCKED and i.blocked_reason]
    asked = [i for i in blocked if question is not None and i.blocked_reason == question]
    if asked:
        return asked[:1]
    if question is not None and question.startswith(NO_ITEM_CAN_START):
        spent = [i for i in blocked if blocked_for_attempts(i)]
        if spent:
            return spent
        named = [i for i in blocked if f"{i.id} is blocked: " in question]
        return named[:1] or blocked[:1]
    return blocked[:1]


def answer_fallback(items: Sequence[WorkItem], question: str | None) -> list[WorkItem]:
    """Where an answer goes when no item is blocked for it any more (a person's
    ``tasks unblock`` or edit released the gate as the answer came): the open items
    the question names (``X is blocked: …``), else the item the run starts next; empty
    when nothing is open."""
    from autopilot.core.ready_queue import next_item

    firsts: dict[str, WorkItem] = {}
    for item in items:
        firsts.setdefault(item.id, item)
    open_now = [i for i in firsts.values() if i.status in _OPEN]
    named = [i for i in open_now if question is not None and f"{i.id} is blocked: " in question]
    if named:
        return named
    upcoming = next_item(items)
    return [upcoming] if upcoming is not None else []


def answered_note(items: Sequence[WorkItem]) -> str:
    """What an answer did, for the person who gave it: ``""`` (it goes to no item),
    ``for alpha`` or ``alpha, beta get more attempts``."""
    if not items:
        return ""
    more = [i.id for i in items if blocked_for_attempts(i)]
    if more:
        verb = "gets" if len(more) == 1 else "get"
        return f"{', '.join(more)} {verb} more attempts"
    return f"for {', '.join(i.id for i in items)}"
