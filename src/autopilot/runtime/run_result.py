"""How an ended run ended: its ``RunResult`` from its state, and the line that says it
(``autopilot run``, ``start``, ``demo``, a detached launch, a parallel run's end).
"""

from __future__ import annotations

from autopilot.core.ending import RunResult, describe_ending, exit_code_for
from autopilot.core.vocabulary import EventType
from autopilot.store.run_state import RunState


def result_of(state: RunState) -> RunResult:
    """How an ended run ended, from its state."""
    reason = state.termination_reason or ""
    terminal = EventType.COMPLETE if state.completed else EventType.ABORT
    note = state.termination_note
    return RunResult(state.run_id, terminal, reason, note, exit_code_for(terminal, reason))


def ending_line(result: RunResult) -> str:
    """``autopilot: run <id> completed (completion_promise) — <note>``."""
    note = f" — {result.note}" if result.note else ""
    ending = describe_ending(result.reason, completed=result.terminal_type == "complete")
    return f"autopilot: run {result.run_id} {ending}{note}"
