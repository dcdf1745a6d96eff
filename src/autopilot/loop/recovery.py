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
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from autopilot.agents.base import AgentAdapter, IterationReport
from autopilot.store.events import EventLog, EventType, excerpt, read_events
from autopilot.store.fold import fold
from autopilot.store.lines import iter_lines
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
            # Streamed: a line over the cap is skipped as it passes (the raw copy can
            # hold gigabytes), so recovery takes linear time and bounded memory.
            for raw in iter_lines(stream, max_line_bytes=_MAX_RECOVERED_LINE_BYTES):
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


def charge_interrupted_attempt(
    store: StateStore, log: EventLog, adapter: AgentAdapter, state: dict[str, Any]
) -> dict[str, Any] | None:
    """Charge the attempt a dead driver left running and close it with an
    ``iteration_end`` (outcome ``killed``, ``endedBy: driver_died``).

    Its tokens and cost come from its saved output, its time from the output's last
    write; it counts as a spent iteration. Call holding the run's ``driver.lock``.

    Returns:
        The event written, or None when no attempt was open.
    """
    if not isinstance(state.get("agentPid"), int):
        return None
    folder = state.get("attemptDir")
    recovered = recover_attempt(Path(folder) if isinstance(folder, str) else None, adapter)
    report = recovered.report if recovered else None
    in_tokens = _count(report.input_tokens) if report else 0
    out_tokens = _count(report.output_tokens) if report else 0
    cost = report.cost_usd if report and _sane_cost(report.cost_usd) else None
    duration_ms = recovered.duration_ms if recovered else 0

    def charge(s: dict[str, Any]) -> None:
        spend = s.setdefault("spend", {})
        tokens = spend.setdefault("tokens", {"input": 0, "output": 0})
        tokens["input"] = int(tokens.get("input") or 0) + in_tokens
        tokens["output"] = int(tokens.get("output") or 0) + out_tokens
        spend["costUsd"] = round(float(spend.get("costUsd") or 0.0) + (cost or 0.0), 6)
        spend["activeMs"] = int(spend.get("activeMs") or 0) + duration_ms
        spend["iterations"] = int(spend.get("iterations") or 0) + 1
        s.update(iterationOpen=False, agentPid=None, agentStartTime=None, attemptDir=None)

    spend = store.update(charge)["spend"]
    final = (report.final_message or report.last_root_text or "") if report else ""
    return log.emit(
        EventType.ITERATION_END,
        iteration=int(state.get("iter") or 0),
        excerpt=excerpt(final),
        outcome="killed",
        endedBy="driver_died",
        tokens=dict(spend["tokens"]),
        costUsd=spend["costUsd"],
        iterationTokens={"input": in_tokens, "output": out_tokens},
        iterationCostUsd=cost,
        durationMs=duration_ms,
        error="the driver died during this iteration; its spend was recovered from the "
        "saved output and it counts against the budgets",
    )


def _count(value: int | None) -> int:
    return value if isinstance(value, int) and 0 <= value < 10**10 else 0


def _sane_cost(value: float | None) -> bool:
    return isinstance(value, float | int) and math.isfinite(value) and 0 <= value < 10_000


def open_iteration(log_path: Path) -> int | None:
    """The number of the last ``iteration_start`` with no ``iteration_end`` after it."""
    open_number: int | None = None
    for event in read_events(log_path):
        if event["type"] == EventType.ITERATION_START.value:
            number = event.get("iteration")
            open_number = number if isinstance(number, int) else None
        elif event["type"] == EventType.ITERATION_END.value:
            open_number = None
    return open_number


def close_unrecorded_attempt(
    folder: Path, store: StateStore, log: EventLog, adapter: AgentAdapter, run_id: str
) -> dict[str, Any] | None:
    """Close an iteration whose agent started but whose driver died before recording
    it in ``state.json`` (a crash during the spawn): its agent processes, found by the
    run's id and the iteration in their environment, are ended, and the attempt is
    charged from its saved output like any interrupted attempt.

    Call holding the run's ``driver.lock``, when ``state.json`` records no agent.

    Returns:
        The ``iteration_end`` written, or None when no iteration was left open.
    """
    state = store.read()
    number = open_iteration(folder / "events.jsonl")
    if number is None or state.get("iterationOpen") or isinstance(state.get("agentPid"), int):
        return None
    for process in psutil.process_iter():
        try:
            env = process.environ()
            if env.get("AUTOPILOT_RUN_ID") != run_id or env.get("AUTOPILOT_ITERATION") != str(
                number
            ):
                continue
            from autopilot.loop.process import end_process_group_of

            end_process_group_of(process.pid, process.create_time(), run_id)
        except (psutil.Error, OSError):
            continue
    attempts = sorted(
        folder.glob(f"iter-{number:04d}*"), key=lambda p: p.stat().st_mtime if p.exists() else 0
    )
    state = store.update(lambda s: s.update(iter=number))
    synthetic = dict(state, agentPid=0, attemptDir=str(attempts[-1]) if attempts else None)
    return charge_interrupted_attempt(store, log, adapter, synthetic)
