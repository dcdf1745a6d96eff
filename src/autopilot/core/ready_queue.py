"""The ready queue of work items, and what holds a backlog back for good (pure).

The ready queue is derived, never stored: an item is ready when its status is
``ready`` or ``reopened`` and every dependency is ``completed`` or ``not_applicable``.
Items are never popped. Duplicate ids, unknown dependencies and dependency cycles are
``Problem``s, each naming the items concerned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from autopilot.core.workitems import SATISFYING_STATUSES, ItemStatus, WorkItem


@dataclass(frozen=True)
class Problem:
    """Something in the backlog that holds items back for good.

    Attributes:
        kind: ``duplicate_id``, ``unknown_dependency`` or ``dependency_cycle``.
        ids: The items concerned (for a cycle, in cycle order).
        message: One line naming them.
    """

    kind: str
    ids: tuple[str, ...]
    message: str


def backlog_problems(items: Sequence[WorkItem]) -> list[Problem]:
    """Duplicate ids, unknown dependencies and dependency cycles, with the ids.

    Returns:
        The problems, duplicates first, then unknown dependencies (in file order),
        then each cycle once (starting at its first item in file order).
    """
    problems: list[Problem] = []
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            problems.append(
                Problem("duplicate_id", (item.id,), f"work item id {item.id!r} is used twice")
            )
        seen.add(item.id)
    by_id = {item.id: item for item in reversed(items)}  # the first of a duplicate wins
    for item in items:
        for dep in item.depends_on:
            if dep not in by_id:
                problems.append(
                    Problem(
                        "unknown_dependency",
                        (item.id, dep),
                        f"work item {item.id!r} depends on {dep!r}, which does not exist",
                    )
                )
    problems.extend(_cycles(items, by_id))
    return problems


def _cycles(items: Sequence[WorkItem], by_id: Mapping[str, WorkItem]) -> list[Problem]:
    done: set[str] = set()
    reported: set[frozenset[str]] = set()
    problems: list[Problem] = []
    for start in items:
        if start.id in done:
            continue
        # Iterative depth-first search; the path holds the ids on the current route.
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterable[str]]] = [(start.id, iter(by_id[start.id].depends_on))]
        path.append(start.id)
        on_path.add(start.id)
        while stack:
            node, deps = stack[-1]
            dep = next(iter(deps), None)
            if dep is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            if dep not in by_id or dep in done:
                continue
            if dep in on_path:
                cycle = tuple(path[path.index(dep) :])
                key = frozenset(cycle)
                if key not in reported:
                    reported.add(key)
                    route = " -> ".join((*cycle, dep))
                    problems.append(
                        Problem("dependency_cycle", cycle, f"dependency cycle: {route}")
                    )
                continue
            stack.append((dep, iter(by_id[dep].depends_on)))
            path.append(dep)
            on_path.add(dep)
    return problems


def dependencies_met(item: WorkItem, by_id: Mapping[str, WorkItem]) -> bool:
    """True if every dependency exists and is completed or not applicable."""
    return not unmet_dependencies(item, by_id)


def unmet_dependencies(item: WorkItem, by_id: Mapping[str, WorkItem]) -> list[str]:
    """The dependencies of ``item`` that do not exist or are not yet completed or not
    applicable, in its order: while there is one, the item waits."""
    return [
        dep
        for dep in item.depends_on
        if dep not in by_id or by_id[dep].status not in SATISFYING_STATUSES
    ]


def ready_queue(items: Sequence[WorkItem]) -> list[WorkItem]:
    """The items an iteration may take, in file order.

    An item is ready when its status is ``ready`` or ``reopened`` and every
    dependency is ``completed`` or ``not_applicable``. Items whose id is used twice
    are never ready (neither of them: which one is meant is for a person to say).
    """
    by_id: dict[str, WorkItem] = {}
    for item in items:
        by_id.setdefault(item.id, item)
    repeated = repeated_ids(items)
    return [
        item
        for item in items
        if item.id not in repeated
        and item.status in (ItemStatus.READY, ItemStatus.REOPENED)
        and dependencies_met(item, by_id)
    ]


def repeated_ids(items: Sequence[WorkItem]) -> set[str]:
    """The ids more than one item uses."""
    seen: set[str] = set()
    repeated: set[str] = set()
    for item in items:
        (repeated if item.id in seen else seen).add(item.id)
    return repeated


def next_item(items: Sequence[WorkItem]) -> WorkItem | None:
    """The item the next iteration works on: a running one (resumed), else the first
    ready; never one whose id is used twice."""
    repeated = repeated_ids(items)
    running = next(
        (i for i in items if i.status is ItemStatus.RUNNING and i.id not in repeated), None
    )
    if running is not None:
        return running
    queue = ready_queue(items)
    return queue[0] if queue else None


def open_items(items: Sequence[WorkItem]) -> list[WorkItem]:
    """Items that still have work to do (ready, running, reopened, blocked)."""
    return [item for item in items if item.is_open]


def status_counts(items: Sequence[WorkItem]) -> dict[str, int]:
    """Items per status, in the vocabulary's order (statuses with none left out)."""
    counts = {status.value: 0 for status in ItemStatus}
    for item in items:
        counts[item.status.value] += 1
    return {status: count for status, count in counts.items() if count}
