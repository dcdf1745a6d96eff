"""A step whose write was cut short: its first events on the log, its
``decision_applied`` record not.

``EventLog`` takes back what a failed append wrote (a full disk), so a step's events
stand on the log all together or not at all. Where that could not be done — the part
written was no longer the log's end, or the writer died in between — the log holds the
start of a step, its ``iteration_end`` above all, without the record recovery applies
(``recovery.logged_change``), and ``state.json`` still has the attempt open. Recovery
then concludes the attempt again from its saved output; this module keeps the attempt
from being told or charged twice: the events already on the log are not appended
again (one iteration, at most one ``iteration_end``), and the attempt is charged on
the spend ``state.json`` holds, not on the log's figures, which already count it.
"""

from __future__ import annotations

from autopilot.core.step import Step
from autopilot.core.structs import replace
from autopilot.core.vocabulary import EventType
from autopilot.store.events import read_events
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir

STEP_FACTS = frozenset(
    {
        EventType.COMMIT_OBSERVED.value,
        EventType.PERMISSION_DENIED.value,
        EventType.SESSION_ATTACHED.value,
        EventType.USAGE_UPDATE.value,
        EventType.ITERATION_END.value,
    }
)
"""The events of a step that tell what an attempt did (``core.step_events``), written
before its decision: a torn step may have left them on the log."""


def torn_step(folder: RunDir, state: RunState) -> frozenset[str]:
    """The step facts (``STEP_FACTS``) already on the log for the attempt
    ``state.json`` has open, when its step was cut before its ``decision_applied``
    record; empty when no attempt is open, none of its step is on the log, or all of
    it is (then ``recovery.logged_change`` applies it).
    """
    if state.agent_pid is None:
        return frozenset()
    number = state.iteration
    logged: set[str] = set()
    inside = False
    for event in read_events(folder.events):
        kind = event.get("type")
        if kind == EventType.ITERATION_START.value:
            inside = event.get("iteration") == number
            logged.clear()
        elif inside and isinstance(kind, str):
            logged.add(kind)
    if EventType.ITERATION_END.value not in logged or EventType.DECISION_APPLIED in logged:
        return frozenset()
    return frozenset(logged & STEP_FACTS)


def without_logged(step: Step, logged: frozenset[str]) -> Step:
    """``step`` without the step facts the log already holds (``torn_step``)."""
    if not logged:
        return step
    kept = tuple(event for event in step.events if event.type.value not in logged)
    return replace(step, events=kept)
