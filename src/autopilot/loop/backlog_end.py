"""The end of a backlog iteration (``BacklogShell.end``): the conclusion of its item.

The agent's reports (and a promoted ``consistency-decision.json``) are claimed and the
criteria's checks run for ``continue_next`` — outside the file's lock, and ended at
once by ``stop --now`` (the item then stays running, undecided). Then, under the lock,
``tasks.jsonl`` is read as it is now, so an item another terminal added meanwhile is
kept: the agent's edits to it are undone, an item whose iterations changed paths
outside its allowed surface that still differ from the work tree as it started
(``loop.backlog_marks``) is reopened, the decision is applied and the file written. A
lane of a parallel run writes only its own item, and lands a completed one in the run
branch (``Lanes.land``) first; a conflict reopens it with the files named. A reopen of
autopilot's own (a surface violation, a conflict) is an attempt like any other: at the
run's ``max_item_attempts`` the item is blocked instead (``decisions.limit_attempts``).
What a lane's agent changed of other items is undone too: an item stands as the lane
found it when it claimed its own, or as a sibling lane wrote it since
(``store.lane_ledger``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from autopilot.core.backlog_step import (
    choose_report,
    conclude_item,
    reconcile,
    with_item_replaced,
)
from autopilot.core.boundary import surface_violations
from autopilot.core.decisions import (
    limit_attempts,
    reopen_for_conflict,
    reopen_for_unverified_surface,
    reopen_for_violation,
)
from autopilot.core.item_bounds import fit_item
from autopilot.core.item_report import CheckOutcome, ItemDecision, ItemReport
from autopilot.core.workitem_events import (
    backlog_snapshot_fields,
    workitem_end_fields,
    workitem_recorded_fields,
)
from autopilot.core.workitems import ItemStatus, WorkItem
from autopilot.errors import BacklogError
from autopilot.loop.backlog_marks import (
    ItemMark,
    MarkBook,
    Tree,
    concluded,
    touched_paths,
)
from autopilot.loop.checks import run_checks
from autopilot.loop.claims import Lanes
from autopilot.store.backlog import Backlog, BacklogFile
from autopilot.store.backlog_intake import REJECTED_FILE, invalid_additions, keep_aside, without
from autopilot.store.lane_ledger import LaneLedger
from autopilot.store.reports import claim_reports, take_decision_file


class ItemShell(Protocol):
    """What ending an item needs of the run's backlog: ``loop.backlog.BacklogShell``
    (its fields and helpers, documented there)."""

    backlog: Backlog
    run_folder: Path
    run_surface: Sequence[str]
    check_timeout_seconds: float
    max_item_attempts: int
    environ: Mapping[str, str] | None
    lanes: Lanes | None
    tree: Tree | None
    marks: MarkBook
    ledger: LaneLedger | None
    claimed_at: int
    merged_tree: Path | None

    @property
    def log_events(self) -> Callable[[], Iterable[Mapping[str, Any]]]:
        """Reads the run's log."""
        ...

    def emit(self, event_type: str, **fields: Any) -> Any:
        """Append one event to the run's log."""
        ...

    def should_stop(self) -> bool:
        """``stop --now`` (or a second Ctrl-C) ends the checks."""
        ...

    def emit_all(self, events: Iterable[Mapping[str, Any]], iteration: int | None) -> None:
        """Append a step's events, each carrying the iteration."""
        ...

    def known_items(self) -> tuple[WorkItem, ...]:
        """What autopilot last knew of the items."""
        ...

    def write_or_warn(
        self, items: Sequence[WorkItem], iteration: int, item: WorkItem | None = None
    ) -> None:
        """Write the items back; a file that cannot be written is a warning."""
        ...

    def at_least_known(self, found: Sequence[WorkItem]) -> tuple[WorkItem, ...]:
        """``found`` with no attempt count lower than autopilot's record of it."""
        ...

    def read(self) -> tuple[BacklogFile | None, str | None]:
        """The file as it is now, or why it cannot be used."""
        ...


@dataclass(frozen=True)
class Ended:
    """What ``end`` did.

    Attributes:
        item: The item after its decision.
        decision: The decision applied (None: the agent reported none).
        question: A question for a person (``ask_user_meta``, repeated missing).
        stop: The agent reported ``stop``.
        checks: autopilot's run of the checks, when ``continue_next`` was reported.
        violations: Changed paths outside the allowed surface.
    """

    item: WorkItem
    decision: ItemDecision | None
    question: str | None = None
    stop: bool = False
    checks: CheckOutcome | None = None
    violations: tuple[str, ...] = ()


def end_item(
    shell: ItemShell,
    item: WorkItem,
    iteration: int,
    iteration_folder: Path,
    changed_paths: Sequence[str],
    cwd: Path,
    relaunch: bool,
) -> Ended:
    """Conclude ``item``, the one iteration ``iteration`` worked on (see the module
    docstring; the arguments are ``BacklogShell.end``'s).

    Raises:
        BacklogError: the file's lock could not be taken.
    """
    claimed = claim_reports(shell.run_folder, iteration)
    reports = [c.report for c in claimed if c.report is not None]
    ours = shell.known_items()
    taken = take_decision_file(cwd, list(ours))
    problems: list[str] = []
    if taken is not None:
        report, refused = taken
        if report is not None:
            reports.append(report)
        problems.extend(f"consistency-decision.json refused: {p}" for p in refused)
    report, refused = choose_report(ours, item.id, reports)
    problems.extend(refused)
    known = shell.marks.read(item.id, iteration)
    paths, _ = touched_paths(known, changed_paths, shell.tree)
    violations = surface_violations(paths, item.allowed_surface, shell.run_surface)
    completes = report is not None and report.decision is ItemDecision.CONTINUE_NEXT
    unverified = completes and item.id in shell.marks.unverifiable
    checks = None
    stopped = False
    if not violations and not unverified and completes:
        run = run_checks(
            item.acceptance_criteria,
            cwd=cwd,
            folder=iteration_folder,
            timeout_seconds=shell.check_timeout_seconds,
            env=shell.environ,
            stop=shell.should_stop,
        )
        checks, stopped = run.outcome, run.stopped
    with shell.backlog.locked():
        items = _reconciled(shell, ours, item, iteration, iteration_folder)
        for line in problems:
            shell.emit("warning", iteration=iteration, note=line, itemId=item.id)
        if violations:
            ended = _violation(shell, items, item, iteration, violations, report)
            _settle_mark(shell, known, ended.item, violations, iteration)
            return ended
        if unverified:  # fail safe: a completion whose surface cannot be checked
            reopened = fit_item(
                limit_attempts(reopen_for_unverified_surface(item, report), shell.max_item_attempts)
            )
            shell.write_or_warn(with_item_replaced(items, reopened), iteration, reopened)
            return _reopened(shell, reopened, iteration, "surface_unverified")
        if stopped:  # no evidence either way: the item is resumed by a later run
            shell.write_or_warn(items, iteration, item)
            shell.emit(
                "warning",
                iteration=iteration,
                itemId=item.id,
                note=f"the checks of work item {item.id} were stopped; it stays running",
            )
            return Ended(item, None)
        conclusion = conclude_item(
            items, item, report, checks, iteration, shell.max_item_attempts, cut_short=relaunch
        )
        if shell.lanes is None:
            shell.write_or_warn(conclusion.items, iteration)
    if shell.lanes is not None:
        conflict = _land(shell, items, conclusion.item, iteration)
        if conflict is not None:
            _settle_mark(shell, known, conflict.item, (), iteration)
            return conflict
    _settle_mark(shell, known, conclusion.item, (), iteration)
    shell.emit_all(conclusion.events, iteration)
    return Ended(
        conclusion.item,
        conclusion.decision,
        conclusion.question,
        conclusion.stop,
        checks,
    )


def _reconciled(
    shell: ItemShell,
    ours: Sequence[WorkItem],
    item: WorkItem,
    iteration: int,
    iteration_folder: Path,
) -> tuple[WorkItem, ...]:
    """The file's items as they are now with the agent's edits undone (for a lane,
    what its sibling lanes wrote since it claimed ``item`` stands: ``LaneLedger.accepted``)
    and the lines it added that autopilot cannot take kept aside
    (``store.backlog_intake``). The caller holds the backlog's lock."""
    found, problem = shell.read()
    # A lane's agent works in a worktree of its own; what its sibling lanes claimed in
    # the shared file meanwhile is theirs, not lines this agent added.
    if found is not None and found.exists and shell.lanes is None:
        found = _take_out_invalid(shell, found, ours, iteration, iteration_folder)
    found_items = found.items if found is not None and found.exists else None
    if shell.lanes is not None and found_items is not None:
        mine = next((i for i in ours if i.id == item.id), item)
        accepted = (
            shell.ledger.accepted(ours, found_items, item.id, shell.claimed_at)
            if shell.ledger is not None
            else found_items
        )
        if any(i.id == item.id for i in accepted):
            ours = with_item_replaced(accepted, mine)
        else:
            ours = (*accepted, mine)
    reconciled = reconcile(ours, found_items, agent_worked=True)
    if shell.lanes is not None and found is not None and reconciled.rewrite:
        _write_back(shell, found, reconciled.items, iteration)
    notes = reconciled.notes
    if found is None:  # replaced by what autopilot does not read: a link, a FIFO…
        notes = (f"{problem}; written again from the run's log",)
    for note in notes:
        shell.emit("warning", iteration=iteration, note=note)
    shell.emit_all(reconciled.events, iteration)
    return reconciled.items


def _write_back(
    shell: ItemShell, found: BacklogFile, items: Sequence[WorkItem], iteration: int
) -> None:
    """Write a lane's shared file with what its agent changed of the items undone
    (every other line kept); one that cannot be written is a warning. The caller
    holds the backlog's lock."""
    try:
        shell.backlog.write_locked(found.with_items(items))
    except BacklogError as error:
        shell.emit("warning", iteration=iteration, note=f"{error}; the agent's edits stay")


def _take_out_invalid(
    shell: ItemShell,
    found: BacklogFile,
    ours: Sequence[WorkItem],
    iteration: int,
    iteration_folder: Path,
) -> BacklogFile:
    """``found`` without the lines the iteration added that autopilot cannot take,
    which are kept in the iteration's folder first and named in a warning; ``found``
    as it is if that cannot be done (the run then holds at the boundary)."""
    rejected = invalid_additions(found, {i.id for i in ours})
    if not rejected:
        return found
    whys = [r.why for r in rejected]
    try:
        keep_aside(iteration_folder, rejected)
        shell.backlog.write_locked(without(found, rejected))
    except (OSError, BacklogError) as error:
        shell.emit(
            "warning",
            iteration=iteration,
            note=f"lines the agent added to .autopilot/tasks.jsonl could not be taken out "
            f"({error}): {'; '.join(whys[:5])}",
        )
        return found
    shown = "; ".join(whys[:5]) + (f"; and {len(whys) - 5} more" if len(whys) > 5 else "")
    shell.emit(
        "warning",
        iteration=iteration,
        note=f"{len(rejected)} line(s) the agent added to .autopilot/tasks.jsonl were taken "
        f"out and kept in {iteration_folder.name}/{REJECTED_FILE} in the run's folder: {shown}",
        rejected=whys[:50],
    )
    return without(found, rejected)


def _land(
    shell: ItemShell, items: Sequence[WorkItem], item: WorkItem, iteration: int
) -> Ended | None:
    """Write a lane's concluded ``item``, a completed one merged into the run branch
    first (outside the file's lock); returns the reopening a conflict caused."""
    assert shell.lanes is not None
    if item.status is ItemStatus.COMPLETED:
        landed = shell.lanes.land(item)
        if landed.conflicts:
            reopened = fit_item(
                limit_attempts(reopen_for_conflict(item, landed.conflicts), shell.max_item_attempts)
            )
            shell.emit(
                "merge_conflict",
                iteration=iteration,
                itemId=item.id,
                files=list(landed.conflicts[:50]),
                runBranch=landed.branch,
            )
            with shell.backlog.locked():
                shell.write_or_warn(with_item_replaced(items, reopened), iteration, reopened)
            return _reopened(shell, reopened, iteration, "merge_conflict")
        shell.emit(
            "lane_merged",
            iteration=iteration,
            itemId=item.id,
            sha=landed.sha,
            runBranch=landed.branch,
        )
    with shell.backlog.locked():
        shell.write_or_warn(items, iteration, item)
    return None


def _violation(
    shell: ItemShell,
    items: Sequence[WorkItem],
    item: WorkItem,
    iteration: int,
    violations: Sequence[str],
    report: ItemReport | None,
) -> Ended:
    reopened = fit_item(
        limit_attempts(reopen_for_violation(item, violations, report), shell.max_item_attempts)
    )
    shell.emit(
        "surface_violation",
        iteration=iteration,
        itemId=item.id,
        paths=list(violations[:50]),
        count=len(violations),
    )
    shell.write_or_warn(with_item_replaced(items, reopened), iteration, reopened)
    return _reopened(shell, reopened, iteration, "surface_violation", violations)


def _reopened(
    shell: ItemShell, item: WorkItem, iteration: int, why: str, violations: Sequence[str] = ()
) -> Ended:
    """Record ``item`` reopened by autopilot (``why``: the ``workitem_end`` decision)."""
    shell.emit("workitem_end", **workitem_end_fields(item, iteration, why))
    shell.emit("workitem_recorded", iteration=iteration, **workitem_recorded_fields(item))
    shell.emit("backlog_snapshot", **backlog_snapshot_fields(shell.known_items()))
    return Ended(item, None, violations=tuple(violations))


def _settle_mark(
    shell: ItemShell,
    known: ItemMark | None,
    item: WorkItem,
    outside: Sequence[str],
    iteration: int,
) -> None:
    """Keep the item's marks as its iteration was concluded (``outside``: the paths
    outside its surface), or drop them once the item is no longer open."""
    try:
        if not item.is_open:
            shell.marks.keep(item.id, None)
        elif known is not None:
            shell.marks.keep(item.id, concluded(known, outside))
    except OSError as error:
        shell.emit(
            "warning",
            iteration=iteration,
            itemId=item.id,
            note=f"the work tree's mark of work item {item.id} could not be updated: {error}",
        )
