"""The final evidence gate of a backlog run (``core.backlog_verify``), in the driver and
at a hook run's Stop alike.

When no item is open, before the run ends ``backlog_done``, ``verify_completed`` runs
the ``check`` commands of every ``completed`` item that has any again, in file order
(but for those completed before the run started and left so: ``settled_before``),
in the work tree, with the run's check timeout (``loop.checks.run_checks``: the same
output saving and digest as an item's own checks). The output goes to
``<folder>/verified-<item id>/check-<criterion>.log``. Any failure reopens its item
(``reopen_unverified``: the output tail goes into its next prompt, and the attempt
counts toward the run's attempt limit) and the run goes on. A ``backlog_verified``
event holds the per-item results, followed by the usual ``workitem_end`` (decision
``backlog_verified``), ``workitem_recorded`` and ``backlog_snapshot`` for each item it
reopened. A lane of a parallel run that finds no item open runs it in the parallel
run's worktree, where the lanes' items were merged (``BacklogShell.merged_tree``), so a
parallel run never ends ``backlog_done`` on the records alone either; the items it
reopens are noted as the lane's writes (``store.lane_ledger``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autopilot.core.backlog_step import reconcile, with_item_replaced
from autopilot.core.backlog_verify import (
    VERIFIED_DECISION,
    reopen_unverified,
    settled_before,
    to_verify,
    verified_fields,
)
from autopilot.core.item_report import CheckOutcome
from autopilot.core.workitem_events import (
    backlog_snapshot_fields,
    workitem_end_fields,
    workitem_recorded_fields,
)
from autopilot.core.workitems import ItemStatus, WorkItem
from autopilot.loop.backlog_end import ItemShell
from autopilot.loop.checks import run_checks
from autopilot.store.private import make_private_dir


@dataclass(frozen=True)
class Verified:
    """What the final evidence gate found.

    Attributes:
        passed: Every check passed (also when there was none to run): the run may end.
        reopened: The items a failing check reopened (or blocked).
        stopped: ``stop --now`` ended the checks: no evidence either way.
    """

    passed: bool
    reopened: tuple[WorkItem, ...] = ()
    stopped: bool = False


def verify_completed(shell: ItemShell, iteration: int, folder: Path, cwd: Path) -> Verified:
    """Run the final evidence gate over the items ``shell`` knows (see the module
    docstring).

    Args:
        shell: The run's backlog (``loop.backlog.BacklogShell``; no item open).
        iteration: The iteration the events carry.
        folder: Where the checks' output is saved (a folder per item is made in it).
        cwd: The work tree (the checks run there; a lane's is its ``merged_tree``).

    Raises:
        BacklogError: the file's lock could not be taken.
    """
    if shell.lanes is not None:
        if shell.merged_tree is None:
            return Verified(True)
        cwd = shell.merged_tree  # where the lanes' items were merged
    results: list[tuple[WorkItem, CheckOutcome]] = []
    for item in to_verify(shell.known_items(), settled_before(shell.log_events())):
        saved = folder / f"verified-{item.id}"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        make_private_dir(saved, exist_ok=True)
        run = run_checks(
            item.acceptance_criteria,
            cwd=cwd,
            folder=saved,
            timeout_seconds=shell.check_timeout_seconds,
            env=shell.environ,
            stop=shell.should_stop,
        )
        if run.stopped:
            return Verified(False, stopped=True)
        results.append((item, run.outcome))
    if not results:
        return Verified(True)
    failed = [(item, outcome) for item, outcome in results if not outcome.passed]
    reopened = _reopen(shell, failed, iteration) if failed else ()
    shell.emit("backlog_verified", iteration=iteration, **verified_fields(results, reopened))
    for item in reopened:
        shell.emit("workitem_end", **workitem_end_fields(item, iteration, VERIFIED_DECISION))
        shell.emit("workitem_recorded", iteration=iteration, **workitem_recorded_fields(item))
    if reopened:
        shell.emit("backlog_snapshot", **backlog_snapshot_fields(shell.known_items()))
    return Verified(not failed, reopened)


def _reopen(
    shell: ItemShell, failed: Sequence[tuple[WorkItem, CheckOutcome]], iteration: int
) -> tuple[WorkItem, ...]:
    """Reopen each failing item that is still completed in the file as it is now (a
    person's edit meanwhile is taken in first); returns the items reopened."""
    reopened: list[WorkItem] = []
    with shell.backlog.locked():
        known = shell.known_items()
        found, _ = shell.read()
        items: Sequence[WorkItem] = known
        if found is not None and found.exists:
            taken = reconcile(known, shell.at_least_known(found.items), agent_worked=False)
            shell.emit_all(taken.events, iteration)
            items = taken.items
        for item, outcome in failed:
            now = next((i for i in items if i.id == item.id), None)
            if now is None or now.status is not ItemStatus.COMPLETED:
                continue
            after = reopen_unverified(now, outcome, shell.max_item_attempts)
            items = with_item_replaced(items, after)
            reopened.append(after)
        shell.write_or_warn(items, iteration)
        if shell.ledger is not None and reopened:
            shell.ledger.wrote(reopened)  # a sibling lane's iteration keeps the reopening
    return tuple(reopened)
