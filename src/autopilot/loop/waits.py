"""Where the driver waits between iterations — a pause, a usage limit, a backoff —
and how it hears a stop: each wait polls the run's control fields every half second
(through the injected clock's ``sleep``), so ``stop`` and ``pause`` interrupt it at
once; while an agent runs, ``stop --now`` is read from ``state.json`` once a second.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from autopilot.core.policy import Decision
from autopilot.core.vocabulary import Action, EventType, RunStatus
from autopilot.errors import StateFileError
from autopilot.loop.clock import Clock
from autopilot.loop.record import RunRecord
from autopilot.loop.signals import Interrupts
from autopilot.store.project_files import run_off_switch
from autopilot.store.run_state import RunState

FLAG_POLL_SECONDS = 0.5
STATE_POLL_SECONDS = 1.0
"""While an agent runs, ``state.json`` is read at most this often (``stop --now``)."""


def off_removed_note(path: Path) -> str:
    """The ``warning`` for an OFF file ``path`` removed while an iteration ran."""
    return (
        f"the OFF switch {path} was removed while an iteration ran (by its agent, unless"
        " you ran autopilot on): the run goes on; autopilot off holds it again"
    )


class Waits:
    """Pauses and waits of one driver.

    Args:
        record: The driver's record of its run.
        clock: The injected clock (its ``sleep`` is the only one used).
        interrupts: Signal flags.
        cwd: The work tree (for the ``.autopilot/OFF`` file).
    """

    def __init__(self, record: RunRecord, clock: Clock, interrupts: Interrupts, cwd: Path) -> None:
        self.record = record
        self.clock = clock
        self.interrupts = interrupts
        self.cwd = cwd
        self._last_state_read = 0.0
        self._off_seen: Path | None = None  # the OFF file last seen holding the run
        self.holds = 0  # how many times the run has been held here (any wait)

    def off(self) -> bool:
        """The project's OFF switch (``.autopilot/OFF``) is set: in the work tree, or
        for a ``--worktree`` run also in the user's checkout.

        Looked at while an agent runs too (``kill_requested``): an OFF file seen
        before and gone now, while the run was not held by it, was removed while an
        iteration ran (autopilot never removes it; the agent may) and is a
        ``warning`` naming it. One removed while it held the run is ``autopilot on``.
        """
        switch = run_off_switch(self.record.state)
        seen, self._off_seen = self._off_seen, switch
        if seen is not None and switch is None:
            self.record.emit(EventType.WARNING, note=off_removed_note(seen))
        return switch is not None

    def stopping(self, state: RunState) -> bool:
        """A stop is asked for (by flag or signal)."""
        return self.interrupts.stop or state.stop_requested

    def stop_note(self) -> str:
        """Why the run is being stopped, in words, for its terminal event."""
        state = self.record.state
        reason = state.stop_reason
        if self.interrupts.stop and not state.stop_requested:
            if self.interrupts.kill_now:
                return "interrupted by signal; the agent was ended"
            return "interrupted by signal"
        if state.stop_now:
            return f"{reason or 'stop requested'} (--now: the agent was ended)"
        return str(reason) if reason else "stop requested"

    def kill_requested(self) -> bool:
        """While an agent runs: is the agent to be ended now (a second Ctrl-C, or
        ``stop --now``)? ``state.json`` is read at most once a second."""
        if self.interrupts.kill_now:
            return True
        now = self.clock.monotonic()
        if now - self._last_state_read >= STATE_POLL_SECONDS:
            self._last_state_read = now
            self.off()  # an OFF switch set or removed meanwhile
            try:
                self.record.refresh()
            except StateFileError:
                return False
        return self.record.state.stop_now

    def hold_paused(self, why: str | None) -> None:
        """Pause at the boundary until resumed (or stopped), writing ``pause``/``resume``."""
        self.holds += 1
        paused_at = self.clock.now_ms()

        def mark(s: RunState) -> None:
            s.status = RunStatus.PAUSED
            if not s.paused_at_ms:
                s.paused_at_ms = paused_at

        self.record.update(mark)
        off = run_off_switch(self.record.state) is not None
        self.record.emit(EventType.PAUSE, note=why, autopilotOn=False if off else None)
        while True:
            self.clock.sleep(FLAG_POLL_SECONDS)
            state = self.record.refresh()
            self._off_seen = run_off_switch(state)  # removed now: turned on, not a warning
            if self.stopping(state) or not (state.paused or self._off_seen):
                break

        def unmark(s: RunState) -> None:
            if s.paused_at_ms:
                s.total_paused_ms += max(0, self.clock.now_ms() - s.paused_at_ms)
                s.paused_at_ms = None
            s.status = RunStatus.RUNNING

        state = self.record.update(unmark)
        if not self.stopping(state):
            self.record.emit(EventType.RESUME)

    def hold_until(
        self, why: str, ready: Callable[[], bool], *, status: RunStatus = RunStatus.PAUSED
    ) -> None:
        """Hold at the boundary (``status``, ``why`` in ``state.json``'s ``hold``) until
        ``ready()`` or a stop. Paused (a file to fix), it is a ``pause`` event, then a
        ``resume``; ``waiting`` (a lane with no work item for it yet) writes no event:
        the run is not paused, only idle until work frees up."""
        self.holds += 1
        paused = status is RunStatus.PAUSED

        def hold(s: RunState) -> None:
            s.status, s.hold = status, why

        self.record.update(hold)
        if paused:
            self.record.emit(EventType.PAUSE, note=why)
        while True:
            self.clock.sleep(FLAG_POLL_SECONDS)
            if self.stopping(self.record.refresh()) or ready():
                break

        def release(s: RunState) -> None:
            s.status, s.hold = RunStatus.RUNNING, None

        self.record.update(release)
        if paused and not self.stopping(self.record.state):
            self.record.emit(EventType.RESUME)

    def wait(self, decision: Decision) -> None:
        """Wait until ``decision.wait_until_ms``: a usage limit (``WAIT``, status
        ``rate_limited``) or a backoff after a quick failure (``BACKOFF``)."""
        self.holds += 1
        until = int(decision.wait_until_ms or 0)
        limited = decision.action is Action.WAIT
        waiting_status = RunStatus.RATE_LIMITED if limited else RunStatus.WAITING

        def start(s: RunState) -> None:
            s.status, s.waiting_until_ms = waiting_status, until

        self.record.update(start)
        if limited:
            self.record.emit(EventType.RATE_LIMITED, waitingUntil=until, note=decision.note)
        else:
            left_s = max(0, until - self.clock.now_ms()) // 1000
            self.record.emit(
                EventType.WARNING,
                note=f"backing off {left_s} s after: {decision.note}",
                waitingUntil=until,
            )
        started = self.clock.monotonic()
        while self.clock.now_ms() < until:
            left = max(0.0, (until - self.clock.now_ms()) / 1000)
            self.clock.sleep(min(FLAG_POLL_SECONDS, left))
            state = self.record.refresh()
            if self.stopping(state) or state.paused:
                break
        waited = int((self.clock.monotonic() - started) * 1000)
        still_limited = limited and self.clock.now_ms() < until

        def done(s: RunState) -> None:
            s.spend.waiting_ms += waited
            # A pause during a limit wait keeps the reset time: after resume the
            # boundary waits out the rest instead of relaunching into the limit.
            s.status = RunStatus.RUNNING
            s.waiting_until_ms = until if still_limited else None

        self.record.update(done)

    def await_answer(self, released: Callable[[], bool] = lambda: False) -> str | None:
        """Wait at a gate (status ``awaiting_user``) until a person answers (``autopilot
        answer``/``approve``), ``released()`` (polled as the answer is) or the run is
        stopped; returns the answer (None: stopped, the gate kept; or released, the
        gate cleared).

        The answer is taken from ``state.json`` and the gate cleared."""
        self.holds += 1
        self.record.update(lambda s: setattr(s, "status", RunStatus.AWAITING_USER))
        while True:
            state = self.record.refresh()
            if self.stopping(state):
                return None
            if state.gate_answer is not None:
                break
            if released():
                break  # no answer: None, the gate cleared
            self.clock.sleep(FLAG_POLL_SECONDS)
        taken = [state.gate_answer]

        def clear(s: RunState) -> None:
            if s.gate_answer is not None:  # an answer that came as the gate was released
                taken[0] = s.gate_answer
            s.gate = s.gate_answer = None
            s.status = RunStatus.RUNNING

        self.record.update(clear)
        return taken[0]
