"""What a step changes in a run's ``state.json``, and what ``conclude`` reads of it:
the pure parts of ``loop.record`` (and which fields are whose), shared with recovery
and the hooks, and the step applied where no driver runs (``write_step``)."""

from __future__ import annotations

import contextlib

from autopilot.core.change import LoopState, StateChange
from autopilot.core.delivery import conclude as conclude_delivery
from autopilot.core.step import Step
from autopilot.core.structs import replace
from autopilot.core.vocabulary import EventType, RunStatus
from autopilot.errors import StateFileError
from autopilot.store.events import EventLog
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore

CONTROL_FIELDS = (
    "paused",
    "paused_at_ms",
    "total_paused_ms",
    "stop_requested",
    "stop_now",
    "stop_reason",
    "supervisor_pid",
    "supervisor_start_time",
    "supervisor_restarts",
    "gate_answer",
    "extra",
)
"""``RunState`` fields other processes may write while a driver runs."""

_OWNED_FIELDS = (
    "spend",
    "loop",
    "iteration",
    "session_id",
    "config",
    "terminated",
    "ending",
    "delivery",
)
"""Fields only the driver writes; a change by anyone else is reported."""


def changed_owned(on_disk: RunState, mine: RunState) -> list[str]:
    """The driver-owned fields of ``on_disk`` that differ from ``mine``."""
    return [name for name in _OWNED_FIELDS if getattr(on_disk, name) != getattr(mine, name)]


def absorb(state: RunState, change: StateChange) -> None:
    """Write a step's ``change`` into ``state`` (the attempt is closed; the messages
    handed to it are retired unless they are to be handed again)."""
    state.iteration, state.iteration_open = change.iteration, change.iteration_open
    state.delivery = conclude_delivery(state.delivery, outcome_stands=change.messages_stand)
    state.spend, state.loop = change.spend, change.counters
    state.session_id, state.usage_baseline = change.session_id, change.usage_baseline
    state.agent_pid = state.agent_start_time = state.attempt_dir = None
    if state.stop_now:
        state.stop_requested = True
    if change.gate is not None:
        state.gate, state.status = change.gate, RunStatus.AWAITING_USER
    if change.max_iterations is not None:
        state.max_iterations = change.max_iterations
        state.config = replace(state.config, max_iterations=change.max_iterations)
    ending = change.ending
    if ending is not None:
        state.terminated, state.termination_reason = True, ending.reason
        state.termination_note, state.status = ending.note, ending.status
        state.iteration_open, state.waiting_until_ms, state.pid = False, None, None


def loop_state(state: RunState, *, interrupted: bool, stop_note: str, agent: str) -> LoopState:
    """What ``conclude`` reads of ``state`` (``interrupted``: a signal asked to stop)."""
    return LoopState(
        spend=state.spend,
        counters=state.loop,
        session_id=state.session_id,
        usage_baseline=state.usage_baseline,
        continue_session=state.config.context == "continue",
        stop_requested=state.stop_requested or state.stop_now or interrupted,
        stop_note=stop_note,
        pause_requested=state.paused,
        agent=agent,
        model=state.config.model,
    )


def write_step(store: StateStore, log: EventLog, step: Step) -> RunState:
    """Apply ``step`` where no driver runs (recovery by ``stop``): log, fsync, state.

    Raises:
        StateFileError: the state cannot be read or written.
    """
    if step.ending is not None and step.ending.event is EventType.COMPLETE:
        reason = step.ending.reason
        with contextlib.suppress(StateFileError):  # see RunRecord.intend_completion
            store.update(lambda s: setattr(s, "ending", reason))
    log.emit_all([(event.type, event.fields) for event in step.events])
    log.sync()
    return store.update(lambda s: absorb(s, step.change))


def missing_env_note(missing: tuple[str, ...]) -> str:
    """The words for a driver whose environment lacks the agent's ``missing``
    variables that the run started with."""
    return (
        f"this driver's environment lacks {', '.join(missing)}, which the run started "
        "with: the agent runs without them (autopilot never stores their values; start "
        "the run again from a shell that has them)"
    )
