"""Is a run active? ``runtime.liveness.driver_running`` — the one liveness check — on
its state.

A run is *ended* once ``state.json`` says ``terminated``, or once its log holds its
terminal event and no driver is alive (``settled_state``: the log is written first, so
it wins over a ``state.json`` a full disk or a crash left behind). Otherwise it is *active*
while its recorded driver process is alive (pid **and** process identity) or a
driver holds its ``driver.lock``; it is *gone* when neither holds; and *unknown* when
that cannot be told (no readable state, a lock that cannot be probed, no driver
recorded yet, or a driver on another host). ``prune`` never touches an active or
unknown run.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from autopilot.runtime.liveness import driver_running
from autopilot.store.logged_end import ended_as_logged, logged_ending
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir


class Activity(StrEnum):
    """Whether a run can still change."""

    ENDED = "ended"
    ACTIVE = "active"
    GONE = "gone"
    UNKNOWN = "unknown"


def run_activity(run_dir: Path, state: RunState | None) -> Activity:
    """Classify a run from its ``state.json`` (None if unreadable) and its driver.

    Returns:
        ``ENDED``, ``ACTIVE``, ``GONE`` or ``UNKNOWN`` (see the module docstring).
    """
    if state is None:
        return Activity.UNKNOWN
    if state.terminated:
        return Activity.ENDED
    running = driver_running(run_dir, state)
    if running is not True and logged_ending(RunDir(run_dir).events, state) is not None:
        return Activity.ENDED
    return {True: Activity.ACTIVE, False: Activity.GONE, None: Activity.UNKNOWN}[running]


def settled_state(run_dir: Path, state: RunState) -> RunState:
    """``state`` as the run's files tell it: a run not ``terminated`` whose driver is
    not alive but whose log holds its terminal event is ended as the log says
    (``store.logged_end``); otherwise ``state`` itself. Nothing is written."""
    if state.terminated or driver_running(run_dir, state) is True:
        return state
    ending = logged_ending(RunDir(run_dir).events, state)
    return state if ending is None else ended_as_logged(state, ending)
