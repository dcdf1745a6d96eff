"""What ``autopilot tasks list`` and ``tasks show`` print: the work items as lines.

``item_rows`` gives one line per item, the next one to start marked with ``>``;
``item_details`` gives one item in full: its status and attempt, dependencies,
surface, prompt, acceptance criteria (with their checks) and its completion record.
"""

from __future__ import annotations

from collections.abc import Sequence

from autopilot.core.ready_queue import next_item, unmet_dependencies
from autopilot.core.workitems import ItemStatus, WorkItem

_WAITING_STATUSES = (ItemStatus.READY, ItemStatus.REOPENED)
BLOCKED_BY_DEPENDENCY = "blocked-by-dependency"
"""What ``tasks list`` shows for a ready item whose dependencies are not done yet."""


INTERRUPTED = "interrupted"
"""What ``tasks list`` shows for an item ``running`` in the file that no run holds."""
INTERRUPTED_NOTE = " (no run is on it: the next run resumes it)"


def item_rows(items: Sequence[WorkItem], *, interrupted: bool = False) -> list[str]:
    """One line per item: mark, id, status, label, attempt and why it waits.
    ``interrupted``: no run holds the backlog, so a running item shows as interrupted."""
    upcoming = next_item(items)
    by_id: dict[str, WorkItem] = {}
    for item in items:
        by_id.setdefault(item.id, item)
    rows = []
    for item in items:
        mark = ">" if upcoming is not None and item is upcoming else " "
        attempt = f" (attempt {item.attempt})" if item.attempt else ""
        label = item.label().removeprefix(f"{item.id}: ")
        status = item.status.value
        unmet = unmet_dependencies(item, by_id) if item.status in _WAITING_STATUSES else []
        if unmet:  # ready in the file, but it waits until its dependencies are done
            status = BLOCKED_BY_DEPENDENCY
            attempt += f" (waits on {', '.join(unmet)})"
        if item.status is ItemStatus.BLOCKED and item.blocked_reason:
            attempt += f" — {' '.join(item.blocked_reason.split())[:120]}"
        if item.status is ItemStatus.RUNNING and interrupted:
            status, attempt = INTERRUPTED, attempt + INTERRUPTED_NOTE
        rows.append(f"{mark} {item.id:<16} {status:<21} {label[:70]}{attempt}")
    return rows


def item_details(
    item: WorkItem, items: Sequence[WorkItem], *, interrupted: bool = False
) -> list[str]:
    """``item`` in full; ``items`` (the whole backlog) give its dependencies' status;
    ``interrupted`` as for ``item_rows``."""
    by_id = {i.id: i for i in items}
    lines = [f"{item.id}: {item.title or ''}".rstrip(": ")]
    status = item.status.value
    if item.status is ItemStatus.RUNNING and interrupted:
        status = f"running, {INTERRUPTED}{INTERRUPTED_NOTE}"
    lines.append(f"  status:      {status} (attempt {item.attempt})")
    if item.blocked_reason:
        lines.append(f"  blocked:     {item.blocked_reason}")
    lines.append(f"  focus layer: {item.focus_layer.value}")
    if item.depends_on:
        deps = ", ".join(
            f"{d} ({by_id[d].status.value if d in by_id else 'missing'})" for d in item.depends_on
        )
        lines.append(f"  depends on:  {deps}")
    if item.allowed_surface:
        lines.append(f"  surface:     {', '.join(item.allowed_surface)}")
    lines.append("  prompt:")
    lines.extend(f"    {line}" for line in item.prompt.splitlines() or [""])
    if item.acceptance_criteria:
        lines.append("  acceptance criteria:")
        for criterion in item.acceptance_criteria:
            check = f"   [check: {criterion.check}]" if criterion.check else ""
            lines.append(f"    {criterion.id}: {criterion.text}{check}")
    completion = item.completion
    verdict = f", verdict {completion.verdict.value}" if completion.verdict else ""
    lines.append(f"  completion:  {completion.state.value}{verdict}")
    if completion.completion_check_digest:
        lines.append(f"  digest:      {completion.completion_check_digest}")
    lines.extend(f"    evidence: {line}" for line in completion.evidence)
    if completion.surface_violations:
        lines.append(f"  changed outside the surface: {', '.join(completion.surface_violations)}")
    if completion.feedback:
        lines.append("  feedback for the next attempt:")
        lines.extend(f"    {line}" for line in completion.feedback.splitlines())
    return lines
