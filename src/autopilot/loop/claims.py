"""How a lane of a parallel run takes work items from the one ``tasks.jsonl`` it
shares with its sibling lanes, and what it needs of them (``Lanes``).

A claim is one locked read-modify-write of the file (``Backlog.update``): running items
another live lane holds (their ``claimed_by``) are skipped, and the item chosen by the
pure ``plan_iteration`` is written ``running`` with this lane's ``claimed_by`` before the
lock is released, so no two lanes ever take the same item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from autopilot.core.backlog_step import CLAIM_FIELD, IterationPlan, plan_iteration
from autopilot.core.workitems import ItemStatus, WorkItem
from autopilot.store.backlog import Backlog, BacklogFile


@dataclass(frozen=True)
class Landed:
    """A lane's completed item brought into the run branch, or not.

    Attributes:
        sha: The run branch after the merge (None when it conflicted).
        conflicts: The conflicting paths (empty when it merged).
        branch: The run branch.
    """

    sha: str | None
    conflicts: tuple[str, ...]
    branch: str


class Lanes(Protocol):
    """What a lane of a parallel run needs besides the shared file (``loop.lanes``)."""

    def holds(self, run_id: str) -> bool:
        """True while run ``run_id``, which claimed an item, may still finish it."""
        ...

    def land(self, item: WorkItem) -> Landed:
        """Commit the lane's work for ``item`` and merge it into the run branch."""
        ...


def held_elsewhere(items: Sequence[WorkItem], run_id: str, lanes: Lanes) -> frozenset[str]:
    """Ids of running items another lane that has not ended has claimed."""

    def held(item: WorkItem) -> bool:
        owner = item.extra.get(CLAIM_FIELD)
        return isinstance(owner, str) and owner != run_id and lanes.holds(owner)

    return frozenset(i.id for i in items if i.status is ItemStatus.RUNNING and held(i))


def claim_next(
    backlog: Backlog,
    run_id: str,
    iteration: int,
    lanes: Lanes,
    *,
    run_surface: Sequence[str] = (),
    on_claim: Callable[[WorkItem], None] | None = None,
) -> IterationPlan:
    """Choose and claim this lane's next item under the file's lock; ``on_claim``
    gets the item claimed while the lock is still held (before the file is written).

    Returns:
        The plan (``plan_iteration``) over the file as it was under the lock; its item,
        if any, is written ``running`` with ``claimed_by`` = ``run_id``.

    Raises:
        BacklogError: the file could not be read or written.
    """
    plans: list[IterationPlan] = []

    def claim(found: BacklogFile) -> BacklogFile:
        plan = plan_iteration(
            run_id,
            found.items,
            iteration,
            run_surface=run_surface,
            taken=held_elsewhere(found.items, run_id, lanes),
            claim=True,
        )
        plans.append(plan)
        if plan.item is None:
            return found
        if on_claim is not None:
            on_claim(plan.item)
        return found.replace_item(plan.item)

    backlog.update(claim)
    return plans[-1]
