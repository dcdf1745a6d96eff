"""What a relaunched driver repairs before it goes on (seed 003, "After a reboot").

* An attempt that was running when the driver died is counted, not lost: its raw
  output is parsed again for the tokens and cost it spent, and the wall time it ran
  is charged, so budgets hold across any number of crashes (field report 11).
* The run's two records agree on whether it ended: a terminal event without
  ``terminated`` in ``state.json``, or the reverse (a crash between the two writes),
  is completed from the other.
* Temp files of interrupted ``state.json`` writes are removed.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from autopilot.agents.base import AgentAdapter, IterationReport
from autopilot.store.events import EventLog, EventType, iter_event_lines, read_events
from autopilot.store.fold import fold
from autopilot.store.state import RunStatus, StateStore

_MAX_RECOVERED_LINE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class RecoveredAttempt:
    """The spend of an attempt the driver did not see to its end.

    Attributes:
        report: What its output said (tokens, cost, session id, final message).
        duration_ms: From its prompt being saved to its output's last write.
    """

    report: IterationReport
    duration_ms: int


def recover_attempt(folder: Path | None, adapter: AgentAdapter) -> RecoveredAttempt | None:
    """Parse an interrupted attempt's saved output (None if there is none)."""
    if folder is None or not folder.is_dir():
        return None
    parser = adapter.new_parser()
    stdout = folder / "stdout.log"
    try:
        with stdout.open("rb") as stream:
            for raw in iter_event_lines(stream, hold_back_partial=True):
                if len(raw) <= _MAX_RECOVERED_LINE_BYTES:
                    parser.feed(raw.decode("utf-8", "replace"))
        started = (folder / "prompt.md").stat().st_mtime
        ended = stdout.stat().st_mtime
    except OSError:
        return RecoveredAttempt(IterationReport(), 0)
    return RecoveredAttempt(parser.report(), max(0, int((ended - started) * 1000)))


def reconcile_terminal(folder: Path, store: StateStore, log: EventLog) -> dict[str, Any]:
    """Make ``state.json`` and ``events.jsonl`` agree that a run ended, if either says so.

    Call as the log's only writer (holding the run's ``driver.lock``). A torn last
    line is ended first, so what is appended next stays readable.

    Returns:
        The state after the repair.

    Raises:
        StateFileError: the state cannot be read or written.
    """
    state = store.read()
    log.end_torn_line()
    snapshot = fold(read_events(folder / "events.jsonl"))
    if snapshot.terminal and not state.get("terminated"):
        completed = snapshot.status == "complete"
        state = store.update(
            lambda s: s.update(
                terminated=True,
                terminationReason=snapshot.reason if isinstance(snapshot.reason, str) else None,
                terminationNote=snapshot.note if isinstance(snapshot.note, str) else None,
                status=RunStatus.COMPLETED if completed else RunStatus.STOPPED,
                iterationOpen=False,
                pid=None,
                agentPid=None,
            )
        )
    elif state.get("terminated") and not snapshot.terminal:
        completed = state.get("status") == RunStatus.COMPLETED
        log.emit(
            EventType.COMPLETE if completed else EventType.ABORT,
            reason=state.get("terminationReason") or ("completion_promise" if completed else None),
            note=state.get("terminationNote"),
            iteration=state.get("iter"),
            repaired=True,
        )
        log.sync()
    return state


def remove_stale_temp_files(folder: Path) -> None:
    """Remove ``state.json.tmp.*`` left by writers that died mid-write."""
    for leftover in folder.glob("state.json.tmp.*"):
        pid = leftover.name.split(".")[3] if leftover.name.count(".") >= 3 else ""
        if pid.isdigit() and psutil.pid_exists(int(pid)):
            continue  # a writer is at work
        with contextlib.suppress(OSError):
            leftover.unlink()
