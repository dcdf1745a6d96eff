"""``autopilot doctor --repair``: a ``state.json`` that cannot be read, rebuilt from the
run's event log (``store.fold``), the corrupt file kept beside it.

A driver that is alive writes its state again itself (``StateStore.update`` with its
state as the fallback), so only a run no driver holds is repaired here. The log holds
the run's identity, work tree, agent, iteration ceiling, iterations, spend, session and
ending, and its ``armed`` event what it was armed with (``store.launch_record``: the
prompt, every budget, the agent's arguments). A run that had not ended comes back
paused, so nothing relaunches it unasked; ``start`` goes on with it. One whose ``armed``
event records no launch (armed by an older version or another implementation) is
marked ``rebuiltFromLog`` as well: ``stop`` ends it, ``start`` refuses it.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.core.state import Spend, Tokens
from autopilot.core.structs import replace
from autopilot.core.vocabulary import EventType, RunStatus
from autopilot.errors import StateFileError
from autopilot.loop.clock import Clock
from autopilot.runtime.liveness import driver_lock_held
from autopilot.store.atomic import write_atomically
from autopilot.store.events import EventLog, read_events
from autopilot.store.fold import fold
from autopilot.store.launch_record import LaunchRecord, launch_of
from autopilot.store.logged_end import ended_as_logged
from autopilot.store.paths import list_run_ids
from autopilot.store.run_state import REBUILT_MARK, RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import encode_state, read_state


@dataclass(frozen=True)
class Repaired:
    """One run's ``state.json`` rebuilt: the run, where the corrupt file was kept (None:
    there was none, the file was missing), and how the run stands now."""

    run_id: str
    kept_as: Path | None
    state: RunState


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return default


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def state_from_log(
    events: list[dict[str, Any]], run_id: str, launch: LaunchRecord | None = None
) -> RunState:
    """The ``RunState`` a run's events tell (pure): from its ``armed`` event, what it
    was armed with (``launch``, the record that event carries) and the fold of the
    whole log. A run that had not ended is paused; without ``launch`` it is marked
    ``rebuiltFromLog`` too (its prompt and most budgets are unknown)."""
    armed = next((e for e in events if e.get("type") == EventType.ARMED), {})
    snap = fold(events)
    min_iterations = _int(armed.get("minIterations"), 1)
    agent = _str(armed.get("agent")) or "claude"
    context = _str(armed.get("contextMode")) or "fresh"
    # The fold's ceiling counts the budget extensions logged after ``armed``.
    max_iterations = _int(
        snap.maxIterations, _int(armed.get("maxIterations"), RunConfig().max_iterations)
    )
    if launch is not None:
        config = replace(launch.config, max_iterations=max_iterations)
    else:
        config = RunConfig(
            agent=agent,
            model=_str(armed.get("model")),
            max_iterations=max_iterations,
            min_iterations=min_iterations,
            context=context,
        )
    state = RunState(
        run_id=run_id,
        label=_str(armed.get("label")),
        mode=_str(armed.get("mode")) or "prompt",
        context_mode=context,
        agent=agent,
        model=_str(armed.get("model")),
        cwd=_str(armed.get("cwd")),
        started_at_ms=_int(armed.get("startedAt")),
        max_iterations=max_iterations,
        min_iterations=min_iterations,
        iteration=_int(snap.iteration),
        session_id=snap.sessionId,
        spend=Spend(
            cost_usd=float(snap.costUsd),
            tokens=Tokens(_int(snap.tokens.get("input")), _int(snap.tokens.get("output"))),
            active_ms=_int(snap.activeMs),
            iterations=snap.iterationsSpent,
        ),
        config=config,
        extra={REBUILT_MARK: True},
    )
    if launch is not None:
        state.prompt, state.extra_args, state.command = (
            launch.prompt,
            launch.extra_args,
            launch.command,
        )
        state.extra = copy.deepcopy(launch.extra)
    ending = next(
        (e for e in reversed(events) if e.get("type") in (EventType.COMPLETE, EventType.ABORT)),
        None,
    )
    if ending is not None:
        return ended_as_logged(state, ending)
    paused = copy.deepcopy(state)
    paused.status, paused.paused = RunStatus.PAUSED, True
    return paused


def repair_state(folder: RunDir, clock: Clock) -> Repaired | None:
    """Rebuild ``folder``'s ``state.json`` from its log when it cannot be read (or is
    missing) and no driver holds the run; the corrupt file is kept as
    ``state.json.corrupt-<ms>`` and a ``warning`` event says so. None when there is
    nothing to repair.

    Raises:
        StateFileError: the run has no log to rebuild from, or the files cannot be
            written.
    """
    try:
        read_state(folder.state)
        return None
    except StateFileError:
        pass
    if driver_lock_held(folder.path) is not False:
        return None  # its driver writes it again itself
    events = list(read_events(folder.events))
    if not any(e.get("type") == EventType.ARMED for e in events):
        raise StateFileError(f"{folder.state} cannot be read and {folder.events} has no run")
    armed = next(e for e in events if e.get("type") == EventType.ARMED)
    state = state_from_log(events, folder.run_id, launch_of(armed, folder))
    kept_as: Path | None = None
    try:
        if os.path.lexists(folder.state):
            kept_as = folder.state.with_name(f"{folder.state.name}.corrupt-{clock.now_ms()}")
            os.replace(folder.state, kept_as)
        state.version = 1
        write_atomically(folder.state, encode_state(state))
    except OSError as error:
        raise StateFileError(
            f"cannot rebuild {folder.state}: {error.strerror or error}", errno=error.errno
        ) from None
    log = EventLog(folder.events, folder.run_id, clock.now_ms)
    try:
        kept = f"{kept_as.name} kept" if kept_as else "it was missing"
        log.emit(
            EventType.WARNING,
            note=f"state.json could not be read; rebuilt from the event log ({kept})",
        )
    finally:
        log.close()
    return Repaired(folder.run_id, kept_as, state)


def repair_runs(root: Path, clock: Clock) -> list[Repaired]:
    """``repair_state`` for every run under ``root``.

    Raises:
        StateFileError: a run's state could not be rebuilt.
    """
    repaired = []
    for run_id in list_run_ids(root):
        done = repair_state(RunDir(root / run_id), clock)
        if done is not None:
            repaired.append(done)
    return repaired
