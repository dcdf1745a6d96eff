"""The driver's record of its run: its own copy of the state, and durable writes.

While a driver runs, its own figures are authoritative. Other processes may change
only the control fields of ``state.json`` (pause, stop, ``stopNow`` and their times;
a detached run's supervisor its own record), so every write starts from the driver's
copy, takes the control fields (and fields this version does not know) from the file,
and ignores the rest: an agent that rewrites ``spend`` in ``state.json`` cannot reset
a budget; the change is logged as a ``warning`` event.

A step is applied log first: its events appended in one write and fsynced, then the
state written. A crash between leaves its ``decision_applied`` in the log, which
recovery applies (``recovery.logged_change``); a crash before leaves an open attempt,
which recovery concludes from its saved output. A step that only goes on to the next
attempt may be *held* (``RunRecord.apply``): its events are appended, and the log's
fsync and the state write are made by the write that opens the next attempt, so an
iteration costs one state write, not two (``docs/architecture.md``, "One state write
per iteration"). That write is made on a thread of its own while the agent runs
(``open_soon``); the log's fsync, started just before the agent (``sync_soon``), runs
while the state's temp file is written and synced, and the state's rename waits for
it. The driver takes its outcome (``collect``) before reading or writing its state
again (after the end mark, ``git status`` running meanwhile) or logging the next step.
"""

from __future__ import annotations

import _thread  # a lock, without threading's imports
import contextlib
import copy
import os
from _socket import gethostname  # socket.gethostname itself, without socket's imports
from collections.abc import Callable
from typing import Any

from autopilot.core.ending import RunResult, exit_code_for, status_for
from autopilot.core.step import Step
from autopilot.core.structs import assign
from autopilot.core.vocabulary import EventType, RunStatus
from autopilot.errors import StateFileError
from autopilot.loop.identity import process_identity
from autopilot.loop.step_state import CONTROL_FIELDS, absorb, changed_owned, missing_env_note
from autopilot.store.atomic import fsync_folder, soon
from autopilot.store.events import EventLog
from autopilot.store.run_state import RunState
from autopilot.store.state import StateStore, copy_state


class RunRecord:
    """The driver's authoritative copy of its run's state, and its writes.

    Args:
        store: The run's ``state.json``.
        log: The run's event log.
        on_events: Called with the events written, in order, in batches (the view).
        notify: Also called with every event written (notifications; it decides
            which events matter and must never block).
    """

    def __init__(
        self,
        store: StateStore,
        log: EventLog,
        on_events: Callable[[list[dict[str, Any]]], None] | None = None,
        notify: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.store = store
        self.log = log
        self.on_events = on_events
        self.notify = notify
        self.state = store.read()
        # While a step is held (``apply``): the state as state.json holds it.
        self._held: RunState | None = None
        # The write that opens an attempt, under way (``open_soon``), and the folder
        # fsync after it, when it took a held step.
        self._opening: _Opening | None = None
        self._synced_later: Callable[[], None] | None = None
        # The held step's log fsync under way (``sync_soon``), and the log's end it covers.
        self._log_syncing: tuple[object, Callable[[], None]] | None = None
        # The events shown while a step was held, not yet given to ``on_events``.
        self._unshown: list[dict[str, Any]] = []

    def emit(self, event_type: EventType, **fields: Any) -> dict[str, Any] | None:
        """Append one event and show it; returns it (None: the log refused it)."""
        event = self.log.emit(event_type, **fields)
        if event is not None:
            self._show(event)
        return event

    def _show(self, event: dict[str, Any]) -> None:
        if self.notify is not None:
            self.notify(event)
        if self.on_events is None:
            return
        if self._held is not None:
            # A step that goes on is held: its lines, and those after it, are shown
            # with the write that takes it (the next agent has started by then).
            self._unshown.append(event)
            return
        self._show_unshown()
        self._print([event])

    def _show_all(self, events: list[dict[str, Any] | None]) -> None:
        for event in events:
            if event is not None:
                self._show(event)

    def _show_unshown(self) -> None:
        """Show the lines held back with a step (``_show``), in order."""
        unshown, self._unshown = self._unshown, []
        if unshown:
            self._print(unshown)

    def _print(self, events: list[dict[str, Any]]) -> None:
        if self.on_events is None:
            return
        try:
            self.on_events(events)
        except (OSError, ValueError):
            # The terminal or pipe went away; the run goes on, on the record.
            self.on_events = None

    def update(self, change: Callable[[RunState], None]) -> RunState:
        """Apply ``change`` to the driver's copy, with the file's control fields.

        A held step (``apply``) is written with it: the log is fsynced before the
        rename, so ``state.json`` on disk is never ahead of the log, nor more than one
        step behind it.

        Args:
            change: Changes the state in place.

        Raises:
            StateFileError: the file cannot be written (or the write that opened the
                attempt could not be: ``collect``).
        """
        self.collect()
        write = self._writer(change)
        changed, self.state = write()
        if changed:
            self._report_outside_change(changed)
        return self.state

    def open_soon(self, change: Callable[[RunState], None], then: Callable[[], None]) -> None:
        """``update(change)`` on a thread of its own: the write that opens an attempt,
        made while its agent runs. ``then`` (the hand-off's events) is called on this
        thread once the write is done (``collect``)."""
        self.collect()
        # A held step's rename is made durable here, after the outcome is given (the
        # next step waits for it: ``_settle``); an attempt's opening alone is made
        # durable by the write that concludes it (a power cut ends the agent too).
        held = self._held is not None
        write = self._writer(change, sync_dir=False)
        opening = _Opening(then)

        def run() -> None:
            try:
                opening.outcome = write()
            except BaseException as error:  # raised again by ``collect``
                opening.outcome = error
            opening.done = True
            opening.written.release()
            if held and not isinstance(opening.outcome, BaseException):
                fsync_folder(self.store.path.parent)

        opening.wait = soon(run)
        self._opening = opening

    def collect(self, *, block: bool = True) -> None:
        """Take the outcome of the write ``open_soon`` started (waiting for it unless
        ``block`` is False and it is still under way): the state it wrote, or its error.

        Raises:
            StateFileError: that write failed.
        """
        opening = self._opening
        if opening is None or not (block or opening.done):
            return
        self._opening = None
        with opening.written:
            self._synced_later = opening.wait  # the folder's fsync, still under way
        if isinstance(opening.outcome, BaseException):
            raise opening.outcome
        assert opening.outcome is not None
        changed, self.state = opening.outcome
        if changed:
            self._report_outside_change(changed)
        opening.then()

    def drain(self) -> None:
        """Wait for a write ``open_soon`` started, whatever its outcome (the driver is
        closing after an error)."""
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.wait()
        self._settle_folder()
        self._show_unshown()

    def _settle_folder(self) -> None:
        """Wait for the folder fsync of the write that took a held step."""
        wait, self._synced_later = self._synced_later, None
        if wait is not None:
            wait()

    def _writer(
        self, change: Callable[[RunState], None], *, sync_dir: bool = True
    ) -> Callable[[], _Written]:
        """The write of ``change`` over the driver's copy as it is now (with the file's
        control fields); it returns the owned fields someone else changed, and the
        state written. A held step goes with it (``_held`` is cleared now)."""
        base, held = copy_state(self.state), self._held
        # The held step's events are synced before the state that absorbs them is
        # renamed into place; meanwhile its temp file is written and synced.
        log_synced = self._log_synced_soon() if held is not None else None
        self._held = None
        self._show_unshown()
        changed: list[str] = []

        def merge(on_disk: RunState) -> None:
            changed[:] = changed_owned(on_disk, held or base)
            mine = copy_state(base)
            for name in CONTROL_FIELDS:
                setattr(mine, name, getattr(on_disk, name))
            change(mine)
            mine.version = on_disk.version
            assign(on_disk, mine)

        def write() -> _Written:
            try:
                state = self.store.update(
                    merge, fallback=base, sync_dir=sync_dir, before_rename=log_synced
                )
                return changed, state
            finally:
                if log_synced is not None:
                    log_synced()

        return write

    def sync_soon(self) -> None:
        """While a step is held: start the log's fsync now, on a thread of its own
        (an agent is about to start); the write that takes the step waits for it."""
        if self._held is not None and self._log_syncing is None:
            self._log_syncing = (self.log.last_written, soon(self.log.sync))

    def _log_synced_soon(self) -> Callable[[], None]:
        """The log fsync under way, if it covers every event appended so far; else one
        started now."""
        syncing, self._log_syncing = self._log_syncing, None
        if syncing is not None:
            if syncing[0] == self.log.last_written:
                return syncing[1]
            syncing[1]()  # events were appended since it started
        return soon(self.log.sync)

    def _settle(self) -> None:
        """Take the write that opened the attempt (``collect``) and wait for its folder
        fsync: it is durable before the log gets the next step or the run's end."""
        self.collect()
        self._settle_folder()
        syncing, self._log_syncing = self._log_syncing, None
        if syncing is not None:  # an agent that never started: no write took it
            syncing[1]()

    def refresh(self) -> RunState:
        """Take the file's control fields; a corrupt file is rewritten from memory, and
        one whose driver-owned fields were changed gets the driver's back (reported
        once, not at every read)."""
        self.collect()
        try:
            on_disk = self.store.read()
        except StateFileError as error:
            self.emit(EventType.WARNING, note=f"{error}; rewriting it from memory")
            return self.update(lambda s: None)
        if self._changed_outside(on_disk):
            return self.update(lambda s: None)  # reports it, and writes the driver's figures
        for name in CONTROL_FIELDS:
            setattr(self.state, name, getattr(on_disk, name))
        return self.state

    def apply(self, step: Step, *, hold: bool = False) -> RunState:
        """Apply a step durably: its events appended in one write and fsynced (a crash
        leaves all of them or none), then the state. A completion is first recorded
        as the driver's intent (``intend_completion``).

        ``hold``: the caller goes straight on to the next attempt. A step that only
        goes on (no ending, no gate, every event on the log, no message to retire) is
        then absorbed into the driver's copy alone; the next write (the one that
        opens the next attempt, or any other: ``update``) fsyncs the log and writes
        it. Until then ``state.json`` holds the attempt open, and a crash leaves the
        step's ``decision_applied`` on the log for recovery to apply, as a crash
        between the log and the state does.
        """
        self._settle()
        if step.ending is not None and step.ending.event is EventType.COMPLETE:
            self.intend_completion(step.ending.reason)
        written = self.log.emit_all([(event.type, event.fields) for event in step.events])
        held = hold and step.ending is None and step.change.gate is None
        if not (held and all(event is not None for event in written)):
            self.log.sync()
            held = False
        if not held:
            self._show_all(written)
            return self.update(lambda s: absorb(s, step.change))
        if self._held is None:
            self._held = copy.copy(self.state)  # what state.json holds
        self._show_all(written)  # held back with the step (``_show``)
        absorb(self.state, step.change)
        if self.state.delivery.retired:  # their files move once the step is written
            return self.update(lambda s: None)
        return self.state

    def attach(self, *, agent: str, verified_version: str, agent_env: tuple[str, ...]) -> None:
        """Record this process as the run's driver (pid and identity) and say so.

        ``agent_env`` names the agent's variables in this driver's environment: the
        first driver's are the run's own (``agentEnv``); a later driver (a relaunch
        from another environment) that lacks some of them says which, in a
        ``warning`` and in ``envMissing``.
        """
        pid = os.getpid()
        identity = process_identity(pid)

        def attach(s: RunState) -> None:
            s.pid, s.host, s.status = pid, gethostname(), RunStatus.RUNNING
            s.pid_start_time = identity.start_time if identity else None
            s.pid_command = identity.command if identity else None
            s.agent_pid = s.agent_start_time = None
            if s.agent_env is None:
                s.agent_env = agent_env
            s.env_missing = tuple(sorted(set(s.agent_env) - set(agent_env)))

        missing = self.update(attach).env_missing
        self.emit(EventType.DRIVER_START, pid=pid, agent=agent, verifiedVersion=verified_version)
        if missing:
            self.emit(EventType.WARNING, note=missing_env_note(missing), envMissing=list(missing))

    def finish(self, terminal: EventType, reason: str, note: str | None) -> RunResult:
        """End the run outside a step (at a boundary, or after an error): the terminal
        event first (fsynced), then ``terminated`` in the state. A completion is
        first recorded as the driver's intent (``intend_completion``)."""
        self._settle()
        if terminal is EventType.COMPLETE:
            self.intend_completion(reason)
        spend = self.state.spend
        self.emit(
            terminal,
            reason=reason,
            note=note,
            iteration=self.state.iteration,
            tokens=spend.tokens.to_json(),
            costUsd=spend.cost_usd,
        )
        self.log.sync()
        status = status_for(terminal, reason)

        def end(s: RunState) -> None:
            s.terminated, s.termination_reason, s.termination_note = True, reason, note
            s.status, s.iteration_open, s.waiting_until_ms = status, False, None
            s.agent_pid = s.pid = None

        state = self.update(end)
        return RunResult(state.run_id, terminal, reason, note, exit_code_for(terminal, reason))

    def intend_completion(self, reason: str) -> None:
        """Write ``ending`` (the completion's reason) into ``state.json`` before the
        ``complete`` event is logged: a logged ``complete`` counts for a run whose
        state does not say it ended only with it (``store.logged_end``), so a line
        an agent appends to the log completes nothing. A file that refuses the write
        (a full disk) is left to the state write that follows the event, which
        fails the same way; the step's ``decision_applied`` then carries the ending
        to recovery.
        """
        with contextlib.suppress(StateFileError):
            self.update(lambda s: setattr(s, "ending", reason))

    def _changed_outside(self, on_disk: RunState) -> list[str]:
        return changed_owned(on_disk, self._held or self.state)  # a held step is not on disk yet

    def _report_outside_change(self, changed: list[str]) -> None:
        self.emit(
            EventType.WARNING,
            note=f"state.json's {', '.join(changed)} changed outside the driver; "
            "the driver's own figures stand",
            outsideChange=changed,
        )


_Written = tuple[list[str], RunState]
"""What a write returns: the owned fields changed outside the driver, the state."""


class _Opening:
    """A write ``open_soon`` started: what to do once it is done, its outcome."""

    def __init__(self, then: Callable[[], None]) -> None:
        self.then = then
        self.wait: Callable[[], None] = lambda: None  # the whole thread
        self.outcome: _Written | BaseException | None = None
        self.done = False
        self.written = _thread.allocate_lock()  # released once ``outcome`` is set
        self.written.acquire()
