"""What the supervisor (``runtime.supervisor``) does to a run's files: record itself,
decide and act on the daemon's exit (restart, finish a stop, give up), announce an
attempt cut short, and forget itself. Only ever run in the supervisor's forked child,
so importing the store costs the supervisor nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autopilot.core.restart import (
    PROJECT_BUSY_EXIT_CODE,
    USAGE_EXIT_CODE,
    DaemonExit,
    RestartDecision,
    Verdict,
)
from autopilot.core.structs import replace
from autopilot.runtime.supervision import DAEMON_ERR, KEEP_GOING, STOP

if TYPE_CHECKING:
    from autopilot.store.run_state import RunState

CRASH_NOTICE = (
    "autopilot's previous attempt at this iteration was cut short ({how}) and has been "
    "started again. Files it wrote are still in the work tree: check what is there "
    "before you go on."
)


def say(line: str) -> None:
    """A line in ``supervisor.log`` (the supervisor's stderr), or nowhere when the disk
    refuses it too."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def io_errno(error: BaseException) -> int | None:
    """The OS error number of an error of the run's files (``OSError``, or a
    ``StateFileError`` the disk caused); None for any other error."""
    from autopilot.errors import StateFileError

    if isinstance(error, OSError | StateFileError) and error.errno is not None:
        return int(error.errno)
    return None


def _end(state: RunState, reason: str, note: str) -> None:
    """``state`` ended in status ``error`` with ``reason`` and ``note``."""
    from autopilot.core.vocabulary import RunStatus

    state.terminated, state.termination_reason = True, reason
    state.termination_note, state.status = note, RunStatus.ERROR
    state.iteration_open, state.waiting_until_ms = False, None
    state.agent_pid = state.pid = None


class SupervisorActs:
    """What the supervisor does to the run's files; only ever run in a forked child
    (``_in_child``), where importing the store costs the supervisor nothing.

    Args:
        folder: The run's folder.
        run_id: The run.
    """

    def __init__(self, folder: Path, run_id: str) -> None:
        from autopilot.loop.clock import SystemClock
        from autopilot.store.events import EventLog
        from autopilot.store.rundir import RunDir
        from autopilot.store.state import StateStore

        self.folder = RunDir(folder)
        self.run_id = run_id
        self.clock = SystemClock()
        self.store = StateStore(self.folder.state)
        self.log = EventLog(self.folder.events, self.run_id, self.clock.now_ms)

    def _state(self) -> RunState:
        from autopilot.store.run_state import RunState
        from autopilot.store.state import read_state_quietly

        return read_state_quietly(self.store.path) or RunState()

    def attach(self, me: int) -> int:
        """Record the supervisor in ``state.json``; 4 when that cannot be done (a run
        whose files refuse the write is ended: ``end_on_io_error``)."""
        import socket

        from autopilot.loop.identity import process_start_time
        from autopilot.store.state import read_state_quietly

        if read_state_quietly(self.store.path) is None:
            say(f"autopilot: supervisor: cannot read {self.store.path}")
            return 4
        started = process_start_time(me)

        def record(s: RunState) -> None:
            s.supervisor_pid, s.supervisor_start_time = me, started
            s.host = socket.gethostname()

        try:
            self.store.update(record)
        except Exception as error:
            if io_errno(error) is None:
                raise
            self.end_on_io_error(error)
            return 4
        say(f"{time.strftime('%Y-%m-%d %H:%M:%S')} supervisor {me} for {self.run_id}")
        return 0

    def forget(self, me: int) -> int:
        def clear(s: RunState) -> None:
            if s.supervisor_pid == me:
                s.supervisor_pid = s.supervisor_start_time = None

        self.store.update(clear)
        return 0

    def after_exit(self, ended: DaemonExit) -> int:
        """Decide and act on the daemon's exit; ``KEEP_GOING`` means start it again.

        The run's files refusing a write (a full disk) never kills the supervisor: the
        run is ended with ``disk_full`` or ``io_error`` (``end_on_io_error``).
        """
        try:
            return self._after_exit(ended)
        except Exception as error:
            if io_errno(error) is None:
                raise
            self.end_on_io_error(error)
            return STOP

    def _after_exit(self, ended: DaemonExit) -> int:
        if ended.signal is None and ended.code in (USAGE_EXIT_CODE, PROJECT_BUSY_EXIT_CODE):
            ended = replace(ended, error=self._last_error_line())
        decision = self._decide(ended)
        say(
            f"{time.strftime('%Y-%m-%d %H:%M:%S')} daemon ended ({ended.describe()}): "
            f"{decision.verdict.value}, {decision.reason}"
        )
        if decision.verdict is Verdict.RESTART:
            self._restarted(ended, decision)
            return KEEP_GOING
        self._conclude(ended, decision)
        return STOP

    def end_on_io_error(self, error: Exception) -> None:
        """The run's files refused a write: end the run with ``disk_full`` or
        ``io_error``, recording what the disk still takes — its ``abort`` (unless the
        log has a terminal event already), then ``terminated`` in ``state.json`` — and
        a line in ``supervisor.log`` whatever happens. Nothing is done to a run another
        driver holds."""
        from autopilot.core.ending import io_reason
        from autopilot.core.vocabulary import EventType
        from autopilot.store.flock import FileLock
        from autopilot.store.logged_end import logged_ending

        reason = io_reason(io_errno(error))
        note = f"the run's files cannot be written: {error}"
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        lock = FileLock(self.folder.driver_lock)
        try:
            taken = lock.acquire()
        except OSError:
            taken = False
        if not taken:
            say(f"{stamp} {note}; another driver holds the run")
            return
        try:
            state = self._state()
            written = logged_ending(self.folder.events, state) is not None
            if not written:
                spend = state.spend
                written = (
                    self.log.emit(
                        EventType.ABORT,
                        reason=reason.value,
                        note=note,
                        iteration=state.iteration,
                        tokens=spend.tokens.to_json(),
                        costUsd=spend.cost_usd,
                    )
                    is not None
                )
                self.log.sync()
            with contextlib.suppress(Exception):
                self.store.update(lambda s: _end(s, reason.value, note))
        finally:
            lock.release()
        if written:
            say(f"{stamp} run ended ({reason.value}): {note}")
        else:
            say(
                f"{stamp} {reason.value}: {note}; the run's end could not be recorded "
                f"either: autopilot stop {self.run_id} once there is room"
            )

    def _last_error_line(self) -> str | None:
        """The daemon's last line on stderr (its one-line error), if any."""
        try:
            with open(self.folder.path / DAEMON_ERR, "rb") as err:
                err.seek(max(0, err.seek(0, os.SEEK_END) - 4096))
                tail = err.read().decode("utf-8", "replace")
        except OSError:
            return None
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        return lines[-1].removeprefix("autopilot: error: ") if lines else None

    def _decide(self, ended: DaemonExit) -> RestartDecision:
        from autopilot.core.restart import RunFacts, decide_restart
        from autopilot.runtime.liveness import driver_running
        from autopilot.store.logged_end import logged_ending
        from autopilot.store.project_files import run_off_switch

        state = self._state()
        facts = RunFacts(
            # The log is written first: its terminal event ends the run whatever
            # state.json says (a full disk may have refused that write).
            terminated=state.terminated or logged_ending(self.folder.events, state) is not None,
            stop_requested=state.stop_requested,
            status=state.status.value,
            off=run_off_switch(state) is not None,
            # Another driver recorded itself, or holds the lock (the one liveness check).
            driven_elsewhere=driver_running(self.folder.path, state) is True,
        )
        restarts = list(state.supervisor_restarts)
        return decide_restart(ended, facts, restarts, self.clock.now_ms())

    def _autopilot_on(self) -> bool:
        from autopilot.store.project_files import run_off_switch

        return run_off_switch(self._state()) is None

    def _restarted(self, ended: DaemonExit, decision: RestartDecision) -> None:
        from autopilot.store.events import EventType

        restarts = tuple(int(t) for t in decision.restarts_ms)
        state = self.store.update(lambda s: setattr(s, "supervisor_restarts", restarts))
        self.log.emit(
            EventType.SUPERVISOR_RESTART,
            exitCode=ended.code,
            signal=ended.signal,
            note=decision.reason,
            restarts=len(decision.restarts_ms),
            iteration=state.iteration,
            autopilotOn=self._autopilot_on(),
        )
        from autopilot.loop.recovery import logged_change, open_iteration

        # An attempt whose decision is on the log (a crash before the state write)
        # was finished, not cut short.
        left_open = state.agent_pid is not None or state.iteration_open
        cut_short = left_open and logged_change(self.folder, state) is None
        if cut_short or open_iteration(self.folder.events) is not None:
            self._notice(CRASH_NOTICE.format(how=ended.describe()))

    def _notice(self, text: str) -> None:
        from autopilot.core.delivery import MessageKind, MessageSource
        from autopilot.loop.messages import queue_message

        with contextlib.suppress(Exception):  # the notice is help, never a reason to stop
            queue_message(
                self.folder.path,
                text,
                self.clock,
                source=MessageSource.DRIVER,
                kind=MessageKind.SUPERVISOR_NOTICE,
                log=self.log,
            )

    def _conclude(self, ended: DaemonExit, decision: RestartDecision) -> None:
        from autopilot.store.events import EventType

        if decision.verdict is Verdict.GIVE_UP:
            self._give_up(ended, decision)
        elif decision.verdict is Verdict.FINISH_STOP:
            from autopilot.runtime.ending import stop_without_driver

            state = self._state()
            stop_without_driver(self.folder.path, self.clock, state.stop_reason or "")
        elif decision.verdict is Verdict.LEAVE and (ended.signal is not None or ended.code):
            self.log.emit(
                EventType.WARNING,
                note=f"the daemon ended ({ended.describe()}); not restarted: {decision.reason}",
                autopilotOn=self._autopilot_on(),
            )

    def _give_up(self, ended: DaemonExit, decision: RestartDecision) -> None:
        """End the run in ``error``: one ``supervisor_giveup``, one ``abort``."""
        from autopilot.core.vocabulary import EventType, Reason
        from autopilot.loop.recovery import (
            end_left_processes,
            reconcile_terminal,
            settle_open_attempt,
        )
        from autopilot.runtime.agents import adapter_for_state
        from autopilot.store.flock import FileLock

        lock = FileLock(self.folder.driver_lock)
        if not lock.acquire():
            return  # another driver took the run meanwhile: it is theirs now
        try:
            state = reconcile_terminal(self.folder, self.store, self.log)
            if state.terminated:
                return
            if state.agent_pid is not None:
                with contextlib.suppress(Exception):
                    adapter = adapter_for_state(state)
                    now_ms = self.clock.now_ms()
                    state = settle_open_attempt(self.folder, self.store, self.log, adapter, now_ms)
                if state.terminated:
                    return  # the attempt the daemon left had ended the run
            else:
                with contextlib.suppress(Exception):
                    end_left_processes(state)  # a crash during the spawn: no agent pid
            giveup = self.log.emit(
                EventType.SUPERVISOR_GIVEUP,
                note=decision.reason,
                restarts=len(decision.restarts_ms),
                exitCode=ended.code,
                signal=ended.signal,
            )

            state = self.store.update(
                lambda s: _end(s, Reason.SUPERVISOR_GIVEUP.value, decision.reason)
            )
            spend = state.spend
            self.log.emit(
                EventType.ABORT,
                reason=Reason.SUPERVISOR_GIVEUP.value,
                note=decision.reason,
                iteration=state.iteration,
                tokens=spend.tokens.to_json(),
                costUsd=spend.cost_usd,
            )
            self.log.sync()
        finally:
            lock.release()
        if giveup is not None:
            self._notify(giveup, state)

    def _notify(self, event: dict[str, Any], state: RunState) -> None:
        from autopilot.store.events import EventType

        urls = state.config.notify
        if not urls:
            return
        from autopilot.loop.notify import Notifier, notification_for

        notification = notification_for(event, self.run_id)
        if notification is None:
            return
        notifier = Notifier(urls)
        notifier.send(notification)
        notifier.close()
        for failure in notifier.drain_failures():
            self.log.emit(EventType.WARNING, note=failure)
