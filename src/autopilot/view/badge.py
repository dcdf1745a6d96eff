"""The live view's status badge: the run's status in the one run-status vocabulary
(``RunStatus``, as ``status`` and ``list`` speak it), as a short label, a tone and a
detail. Pure, like ``present``: the same state, snapshot and now give the same badge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autopilot.core.vocabulary import RunStatus
from autopilot.store.snapshot import Snapshot
from autopilot.view.figures import as_number
from autopilot.view.plain import format_time
from autopilot.view.present import fmt_duration

if TYPE_CHECKING:
    from autopilot.view.present import State


@dataclass(frozen=True)
class Badge:
    """The status badge: a short label, a tone for its colour, and a detail.

    ``tone`` is one of ``run``, ``ok``, ``warn``, ``bad``.
    """

    label: str
    tone: str
    detail: str = ""


def _until(until: Any, now_ms: int) -> str:
    moment = as_number(until)
    if moment is None:
        return ""
    return f"until {format_time(moment)[:8]} (in {fmt_duration(max(0.0, moment - now_ms))})"


def status_badge(
    state: State | None,
    snapshot: Snapshot,
    alive: bool | None,
    now_ms: int,
    interrupted: str | None = None,
    off: str | None = None,
) -> Badge:
    """The run's status as a badge.

    Args:
        state: ``state.json`` (None when unreadable).
        snapshot: The folded log.
        alive: Whether the driver process is alive (None: unknown).
        now_ms: Now, for waiting countdowns.
        interrupted: What ctrl+c in the view did to the run driven beside it
            (e.g. "stopping at the next boundary…"), until the run ends.
        off: The OFF file that holds the run (``store.project_files.off_switch``),
            None while autopilot is ON in its project.
    """
    if snapshot.terminal:
        reason = str(snapshot.reason or "")
        detail = f"{reason} — {snapshot.note}" if snapshot.note else reason
        if snapshot.run_status is RunStatus.COMPLETED:
            return Badge("COMPLETE", "ok", detail)
        return Badge("STOPPED" if reason == "user_stopped" else "ABORTED", "bad", detail)
    if state is None:
        return Badge(_words(snapshot.run_status), "run", "state.json unreadable")
    status = run_status(state, snapshot)
    if state.get("terminated"):
        reason = str(state.get("terminationReason") or "")
        return Badge("COMPLETE" if status is RunStatus.COMPLETED else _words(status), "bad", reason)
    if interrupted:
        return Badge("STOPPING", "warn", interrupted)
    if alive is False:
        return Badge("DRIVER GONE", "bad", "not running; `autopilot start` relaunches it")
    if state.get("stopRequested"):
        return Badge("STOPPING", "warn", "at the next boundary")
    if status is RunStatus.RATE_LIMITED:
        until = state.get("waitingUntil") or snapshot.waitingUntil
        return Badge("RATE LIMITED", "warn", _until(until, now_ms))
    if status is RunStatus.WAITING:
        until = state.get("waitingUntil")
        hold = state.get("hold")  # a lane of a parallel run waiting for a work item
        detail = str(hold) if until is None and isinstance(hold, str) else _until(until, now_ms)
        return Badge("WAITING", "warn", detail)
    if off is not None:
        held = f"held by {off}: `autopilot on` releases it"
        if status is RunStatus.PAUSED:
            then = ", then r resumes" if state.get("paused") else ""
            return Badge("PAUSED", "warn", held + then)
        return Badge("PAUSING", "warn", f"at the next boundary, {held}")
    if status is RunStatus.PAUSED:
        return Badge("PAUSED", "warn", "r resumes")
    if state.get("paused"):
        return Badge("PAUSING", "warn", "at the next boundary")
    return Badge(_words(status), "run", "")


def run_status(state: State, snapshot: Snapshot) -> RunStatus:
    """The run's status in the one run-status vocabulary (``RunStatus``, as ``status``
    and ``list`` show it): ``state.json``'s, else what the folded log's says."""
    try:
        return RunStatus(str(state.get("status")))
    except ValueError:
        return snapshot.run_status


def _words(status: RunStatus) -> str:
    return status.value.upper().replace("_", " ")
