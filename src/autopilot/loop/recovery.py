"""What a relaunched driver repairs before it goes on (``docs/formats.md``, "Crash recovery").

* An attempt that was running when the driver died is counted, not lost: if its
  decision is in the log (``decision_applied``), that decision is applied; otherwise
  its raw output is parsed again for the tokens and cost it spent and for the
  agent's final result, and the attempt is concluded like any other (a COMPLETE it
  printed before the crash completes the run), so budgets hold across any number of
  crashes. The same holds for an attempt whose agent started before the driver
  recorded it (a crash during the spawn).
* What the dead driver's agent left running is ended first, by every means there is
  (``end_left_processes``): the run's cgroup, the run id in the environment, the
  agent's process group — and nothing while the run's driver is alive.
* The run's two records agree on whether it ended: a terminal event without
  ``terminated`` in ``state.json``, or the reverse (a crash between the two writes),
  is completed from the other.
* Temp files of interrupted ``state.json`` writes are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
from _socket import gethostname  # socket.gethostname itself, without socket's imports
from pathlib import Path
from typing import Any

from autopilot.agents.base import AgentAdapter
from autopilot.agents.guard import guarded
from autopilot.core.attempt import Attempt
from autopilot.core.change import StateChange
from autopilot.core.ending import status_for
from autopilot.core.spend import larger
from autopilot.core.state import Spend, Tokens
from autopilot.core.step import conclude
from autopilot.core.vocabulary import EventType, RunStatus
from autopilot.loop.cut_short import attempt_from_output, iteration_started_ms
from autopilot.loop.identity import is_same_process
from autopilot.loop.record import RunRecord
from autopilot.loop.step_state import absorb, loop_state, write_step
from autopilot.loop.torn import torn_step, without_logged
from autopilot.store.events import EventLog, read_events
from autopilot.store.logged_end import is_drivers, logged_decision
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore


def reconcile_terminal(folder: RunDir, store: StateStore, log: EventLog) -> RunState:
    """Make ``state.json`` and ``events.jsonl`` agree that a run ended, if either says so.

    Call as the log's only writer (holding the run's ``driver.lock``). A torn last
    line is ended first, so what is appended next stays readable. A logged
    ``complete`` that ``state.json`` records no intent for (``ending``: an agent
    appended it) is a ``warning`` and ends nothing.

    Returns:
        The state after the repair.

    Raises:
        StateFileError: the state cannot be read or written.
    """
    state = store.read()
    if is_new_run(folder, state):
        return state  # nothing on either record to reconcile
    from autopilot.store.reader import read_snapshot  # msgspec: only for a relaunch

    log.end_torn_line()
    snapshot = read_snapshot(folder.events)
    if snapshot.terminal and not state.terminated:
        if not _drivers_ending(snapshot, state, log):
            return state  # a completion the driver did not intend: said; the run goes on
        completed = snapshot.run_status is RunStatus.COMPLETED
        # The step that ended the run, if the crash came before its state write.
        change = logged_change(folder, state)

        def end(s: RunState) -> None:
            if change is not None:
                absorb(s, change)
            s.terminated = True
            s.termination_reason = snapshot.reason if isinstance(snapshot.reason, str) else None
            s.termination_note = snapshot.note if isinstance(snapshot.note, str) else None
            terminal = EventType.COMPLETE if completed else EventType.ABORT
            s.status = status_for(terminal, s.termination_reason or "")
            s.iteration_open = False
            s.pid = s.agent_pid = None

        state = store.update(end)
    elif state.terminated and not snapshot.terminal:
        completed = state.status is RunStatus.COMPLETED
        log.emit(
            EventType.COMPLETE if completed else EventType.ABORT,
            reason=state.termination_reason or ("completion_promise" if completed else None),
            note=state.termination_note,
            iteration=state.iteration,
            repaired=True,
        )
        log.sync()
    return state


_NEW_LOG_BYTES = 64 * 1024
"""The most a new run's log (its ``armed`` event) is read for, in bytes."""


def is_new_run(folder: RunDir, state: RunState) -> bool:
    """Whether no driver has driven the run yet: ``state.json`` records no driver, no
    iteration and no ending, and the log holds only the ``armed`` event, its line
    whole (read with ``json``: it is short). Such a run has nothing a relaunch
    repairs (no attempt left, no spend or ending on one record only), so the driver
    that starts it reads its log no further (``reconcile_terminal``,
    ``relaunch.crashed_attempt``). A log that cannot be read, is longer or holds
    anything else is not a new run's.
    """
    if state.terminated or state.pid is not None or state.agent_pid is not None:
        return False
    if state.iteration or state.iteration_open or state.spend.iterations:
        return False
    try:
        with open(folder.events, "rb") as handle:
            data = handle.read(_NEW_LOG_BYTES + 1)
    except OSError:
        return False
    if len(data) > _NEW_LOG_BYTES or not data.endswith(b"\n"):
        return False
    try:
        events = [json.loads(line) for line in data.splitlines()]
    except (ValueError, RecursionError):
        return False
    return all(isinstance(e, dict) and e.get("type") == EventType.ARMED.value for e in events)


def _drivers_ending(snapshot: Any, state: RunState, log: EventLog) -> bool:
    """Whether the log's terminal event (``snapshot``'s) can be the driver's
    (``store.logged_end.is_drivers``); a ``complete`` that cannot is a ``warning``."""
    completed = snapshot.run_status is RunStatus.COMPLETED
    reason = snapshot.reason if isinstance(snapshot.reason, str) else None
    event = {"type": EventType.COMPLETE if completed else EventType.ABORT, "reason": reason}
    if is_drivers(event, state):
        return True
    log.emit(
        EventType.WARNING,
        note=(
            f"the event log's complete ({reason}) was not written by the run's driver: "
            "state.json records no intent to complete, so it is ignored and the run goes on"
        ),
    )
    return False


def remove_stale_temp_files(folder: RunDir) -> None:
    """Remove ``state.json.tmp.*`` left by writers that died mid-write."""
    for leftover in folder.path.glob(f"{folder.state.name}.tmp.*"):
        import psutil  # only where a temp file was left

        pid = leftover.name.split(".")[3] if leftover.name.count(".") >= 3 else ""
        if pid.isdigit() and psutil.pid_exists(int(pid)):
            continue  # a writer is at work
        with contextlib.suppress(OSError):
            leftover.unlink()


def logged_change(folder: RunDir, state: RunState) -> StateChange | None:
    """The ``decision_applied`` record of the open attempt, if the log has one.

    A driver appends a step's events (ending with ``decision_applied``) before it
    writes ``state.json``; a crash between the two leaves the attempt open in the
    state although its decision is on record. That record's change is returned, to
    be applied as it was decided.
    """
    if state.attempt_dir is None:
        return None
    return logged_decision(folder.events, Path(state.attempt_dir).name)


def end_left_processes(state: RunState) -> int:
    """End what the agent of a dead driver left running (``loop.leftovers``): the
    run's cgroup, every process carrying its run id and their process groups, and the
    recorded agent's group — unless the run's driver (by pid and identity) is alive,
    or ran on another host.

    Returns:
        How many processes were ended.
    """
    if state.host and state.host != gethostname():
        return 0  # its agent ran on another machine
    if state.pid is not None and (
        is_same_process(state.pid, state.pid_start_time, state.pid_command) is not False
    ):
        return 0  # alive, or it cannot be told: never signal a live driver's agent
    from autopilot.loop.leftovers import end_leftovers  # psutil: only after a crash

    return end_leftovers(
        state.run_id, agent_pid=state.agent_pid, agent_started=state.agent_start_time
    )


def attempt_left(
    record: RunRecord, folder: RunDir, adapter: AgentAdapter, now_ms: int
) -> Attempt | None:
    """On a relaunch: what the dead driver's agent left running is ended
    (``end_left_processes``), and the attempt it left is returned to be concluded
    (``open_attempt_left``, else ``unrecorded_attempt``), or None."""
    outlived = False
    if record.state.pid is not None:  # a driver ran this and did not finish
        outlived = end_left_processes(record.state) > 0
    attempt = open_attempt_left(record, folder, adapter, now_ms, outlived=outlived)
    if attempt is None:
        attempt = unrecorded_attempt(record.state, folder, adapter, now_ms, outlived=outlived)
    return attempt


def open_attempt_left(
    record: RunRecord,
    folder: RunDir,
    adapter: AgentAdapter,
    now_ms: int,
    *,
    outlived: bool = False,
) -> Attempt | None:
    """On a relaunch: the attempt a dead driver left open, to be concluded.

    Call once its leftover processes are ended (``attempt_left``). If the log holds its decision
    (the crash came between the log and the state), that decision is applied here
    and None is returned; otherwise the attempt as its saved output tells it.
    """
    state = record.state
    if state.agent_pid is None or state.agent_pid == os.getpid():
        return None
    change = logged_change(folder, state)
    if change is not None:
        record.update(lambda s: absorb(s, change))
        return None
    return interrupted_attempt(state, folder, adapter, now_ms, outlived=outlived)


def settle_open_attempt(
    folder: RunDir,
    store: StateStore,
    log: EventLog,
    adapter: AgentAdapter,
    now_ms: int,
    *,
    stop_note: str | None = None,
) -> RunState:
    """Where no driver runs (``stop``, the supervisor giving up): the run's spend is
    taken at the larger of ``state.json``'s and the event log's (``restore_spend``),
    what a dead driver's agent left running is ended (``end_left_processes``, also
    when no attempt is open), and the attempt it left open is settled as a relaunch
    would settle it — its logged decision applied, or else the attempt concluded from
    its saved output (``stop_note``: recorded as stopped, with these words); then an
    attempt the log started but ``state.json`` never opened (``unrecorded_attempt``)
    is concluded and charged the same way.

    Call holding the run's ``driver.lock``.

    Returns:
        The state after it (unchanged when no attempt was open).

    Raises:
        StateFileError: the state cannot be read or written.
    """
    state = store.read()
    torn = torn_step(folder, state)  # charged on state.json's spend, told once
    restored = None if torn else _restored_spend(state.spend, folder)
    if restored is not None:
        state = store.update(lambda s: setattr(s, "spend", restored))
        log.emit(EventType.WARNING, note=SPEND_RESTORED_NOTE)
    outlived = end_left_processes(state) > 0

    def warn(note: str) -> None:
        log.emit(EventType.WARNING, note=note)

    adapter = guarded(adapter, warn)
    attempt = None
    if state.agent_pid is not None:
        change = logged_change(folder, state)
        if change is None:
            attempt = interrupted_attempt(state, folder, adapter, now_ms, outlived=outlived)
        else:
            state = store.update(lambda s: absorb(s, change))
    if attempt is None:  # the next attempt may have started before state.json said so
        attempt = unrecorded_attempt(state, folder, adapter, now_ms, outlived=outlived)
    if attempt is None:
        return state
    before = loop_state(
        state,
        interrupted=stop_note is not None,
        stop_note=stop_note or "stop requested",
        agent=state.agent,
    )
    step = conclude(before, attempt, state.config.policy(state.mode), now_ms)
    return write_step(store, log, without_logged(step, torn))


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


def unrecorded_attempt(
    state: RunState,
    folder: RunDir,
    adapter: AgentAdapter,
    now_ms: int,
    *,
    outlived: bool = False,
) -> Attempt | None:
    """On a relaunch: an attempt whose agent started but whose driver died before
    recording it in ``state.json`` (``iteration_start`` is in the log, the state has
    no open attempt). Once its processes are ended (``attempt_left``: found by the
    run's id in their environment and the run's cgroup), the attempt is concluded
    from its saved output like any interrupted attempt.

    Call holding the run's ``driver.lock``.
    """
    number = open_iteration(folder.events)
    if number is None or state.iteration_open or state.agent_pid is not None:
        return None
    attempts = sorted(
        folder.path.glob(f"{folder.attempt(number).path.name}*"),
        key=lambda p: p.stat().st_mtime if p.exists() else 0,
    )
    found = attempts[-1] if attempts else None
    started_ms = iteration_started_ms(folder.events, number)
    return attempt_from_output(
        number, found, adapter, now_ms, started_ms=started_ms, outlived=outlived
    )


def interrupted_attempt(
    state: RunState,
    folder: RunDir,
    adapter: AgentAdapter,
    now_ms: int,
    *,
    outlived: bool = False,
) -> Attempt | None:
    """The attempt a dead driver left open, as far as its saved output tells.

    Its tokens and cost come from the output; its time is ``cut_short_ms``'s, from
    its ``iteration_start`` in the log (``outlived``: recovery ended processes it
    left running).
    If the agent had printed its final result (agents often linger after it), its
    verdict stands as if the driver had seen it end; otherwise it counts as
    ``killed``. Either way it spends an iteration (budgets hold across crashes).

    Returns:
        The ``Attempt`` (``ended_by`` ``DRIVER_DIED``), or None when none was open.
    """
    if state.agent_pid is None:
        return None
    attempt = Path(state.attempt_dir) if state.attempt_dir is not None else None
    started_ms = iteration_started_ms(folder.events, state.iteration)
    return attempt_from_output(
        state.iteration, attempt, adapter, now_ms, started_ms=started_ms, outlived=outlived
    )


SPEND_RESTORED_NOTE = "spend restored from the event log, which records more than state.json"


def restore_spend(record: RunRecord, folder: RunDir) -> None:
    """On a relaunch, spend is the larger of state.json's and the event log's: a
    ``state.json`` rewritten while no driver ran can only raise it (logged)."""
    restored = _restored_spend(record.state.spend, folder)
    if restored is not None:
        record.update(lambda s: setattr(s, "spend", restored))
        record.emit(EventType.WARNING, note=SPEND_RESTORED_NOTE)


def _restored_spend(spend: Spend, folder: RunDir) -> Spend | None:
    """Each figure at the larger of ``spend`` and the log's; None when ``spend``
    already holds them all."""
    restored = larger(spend, logged_spend(folder))
    return None if restored == spend else restored


def logged_spend(folder: RunDir) -> Spend:
    """The run's spend as its event log tells it (cumulative figures of the last
    ``iteration_end``), to be compared with ``state.json``'s on a relaunch."""
    from autopilot.store.reader import read_snapshot  # msgspec: only for a relaunch

    snapshot = read_snapshot(folder.events)
    tokens = snapshot.tokens
    return Spend(
        cost_usd=float(snapshot.costUsd),
        tokens=Tokens(int(tokens.get("input") or 0), int(tokens.get("output") or 0)),
        active_ms=int(snapshot.activeMs),
        iterations=snapshot.iterationsSpent,
    )
