"""The attempt a crash cut short, found by a relaunched driver before its first
iteration (``docs/formats.md``, "Crash recovery").

A driver that finds the attempt its dead predecessor left open ends what that
attempt's agent left running and takes the attempt as its logged decision or its
saved output tell it (``recovery.attempt_left``), with the commits it made
(``cut_short.with_commits_since_start``) and, in a backlog run, its work item
concluded as the dead driver would have (``backlog_recovery.concluded_after_crash``).
The driver then concludes and applies it like any other attempt (``loop.driver``).

It lives apart from ``loop.recovery``, which ``stop`` and the supervisor import as
well, so that they do not load a backlog run's modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import Struct

from autopilot.agents.base import AgentAdapter
from autopilot.core.attempt import Attempt
from autopilot.loop.cut_short import with_commits_since_start
from autopilot.loop.record import RunRecord
from autopilot.loop.recovery import attempt_left, is_new_run, restore_spend
from autopilot.loop.torn import torn_step
from autopilot.store.rundir import RunDir
from autopilot.workspace.marks import Workspace

if TYPE_CHECKING:
    from autopilot.loop.backlog import BacklogShell


class Crashed(Struct, frozen=True):
    """What a relaunch found of the attempt a dead driver left (``crashed_attempt``).

    Attributes:
        attempt: The attempt to conclude, or None (none was open, or its logged
            decision has been applied).
        torn: The facts of its step already on the log (``loop.torn.torn_step``):
            they are not told twice, and the spend is restored only once the step
            is applied.
    """

    attempt: Attempt | None
    torn: frozenset[str]


def crashed_attempt(
    record: RunRecord,
    folder: RunDir,
    adapter: AgentAdapter,
    workspace: Workspace,
    backlog: BacklogShell | None,
    cwd: Path,
    now_ms: int,
) -> Crashed:
    """On a relaunch: the spend at the larger of ``state.json``'s and the log's
    (``recovery.restore_spend``, unless the log's last step was torn), what the dead
    driver's agent left running ended, and the attempt it left open (also one whose
    agent started before the driver recorded it) with the commits it made and, in a
    backlog run, its work item concluded.

    Args:
        record: The run's record (the relaunched driver's).
        folder: The run's folder.
        adapter: The agent adapter (guarded), to parse the saved output again.
        workspace: The work tree, for the commits the attempt made.
        backlog: A backlog run's ``tasks.jsonl`` shell, else None.
        cwd: The work tree (a work item's checks run there).
        now_ms: Wall-clock time, ms since the epoch.

    Raises:
        StateFileError: the state cannot be written.
        BacklogError: ``tasks.jsonl`` could not be written.
    """
    if is_new_run(folder, record.state):  # no driver ran it: nothing left to repair
        return Crashed(None, frozenset())
    torn = torn_step(folder, record.state)
    if not torn:
        restore_spend(record, folder)
    attempt = attempt_left(record, folder, adapter, now_ms)
    if attempt is not None:
        attempt = with_commits_since_start(attempt, folder.events, workspace)
        if backlog is not None:
            from autopilot.loop.backlog_recovery import concluded_after_crash

            attempt = concluded_after_crash(backlog, attempt, folder.path, workspace, cwd)
    return Crashed(attempt, torn)
