"""The live view's keys: pause, resume, stop, message, leave; each offered only when
it makes sense for the run's state, and acting through ``autopilot.control`` exactly
like ``autopilot pause|resume|stop``. Leaving the view never stops the run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from textual.app import App
from textual.binding import Binding, BindingType

from autopilot import control
from autopilot.core.vocabulary import RunStatus
from autopilot.errors import AutopilotError
from autopilot.view.badge import run_status
from autopilot.view.dialogs import ConfirmStop, MessagePrompt
from autopilot.view.safe import shown

if TYPE_CHECKING:
    from autopilot.loop.clock import Clock
    from autopilot.store.fold import Snapshot

SendMessage = Callable[[str], str]
"""Sends a message to the run's agent and returns a line for the user."""


class RunKeys(App[None]):
    """The keys of the live view of one run, and its notifications (``WatchApp``
    holds the state they read and draws it)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "pause", "Pause"),
        Binding("r", "resume", "Resume"),
        Binding("s", "stop", "Stop…"),
        Binding("m", "message", "Message"),
        Binding("q", "leave", "Leave (run goes on)"),
        Binding("q", "close", "Close"),
        Binding("ctrl+c", "interrupt", show=False, priority=True),
    ]

    if TYPE_CHECKING:  # set and drawn by the view (``WatchApp``)
        run_dir: Path
        clock: Clock
        state: dict[str, Any] | None
        snapshot: Snapshot
        _send_message: SendMessage | None
        _on_interrupt: Callable[[], str] | None
        _interrupted: str | None
        _keys_shown: tuple[bool, bool, bool] | None

        def _reload_state(self) -> None: ...

        def _render_all(self) -> None: ...

        def _render_header(self) -> None: ...

    def _key_state(self) -> tuple[bool, bool, bool]:
        state = self.state or {}
        ended = self._ended() or self.state is None
        paused = bool(state.get("paused")) or run_status(state, self.snapshot) is RunStatus.PAUSED
        return ended, paused, bool(state.get("stopRequested")) or self._interrupted is not None

    def _ended(self) -> bool:
        return bool((self.state or {}).get("terminated")) or self.snapshot.terminal

    def _say(
        self,
        message: str,
        *,
        severity: Literal["information", "warning", "error"] = "information",
        timeout: float | None = None,
    ) -> None:
        """A notification, shown as text (never markup), redacted and escaped."""
        self.notify(shown(message), severity=severity, timeout=timeout, markup=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Offer only the keys that make sense for the run's state."""
        ended, paused, stopping = self._key_state()
        if action == "pause":
            return not ended and not paused
        if action == "resume":
            return not ended and paused
        if action == "stop":
            return not ended and not stopping
        if action == "message":
            return self._send_message is not None and not ended
        if action == "leave":
            return not self._ended()
        if action == "close":
            return self._ended()
        return True

    def _control(self, act: Callable[[], control.ControlResult]) -> None:
        try:
            result = act()
        except AutopilotError as error:
            self._say(str(error), severity="error")
            return
        self._say(result.message)
        self._reload_state()
        self._render_all()

    def action_pause(self) -> None:
        """Ask the run to pause at its next boundary."""
        self._control(lambda: control.pause(self.run_dir, self.clock))

    def action_resume(self) -> None:
        """Resume a paused run."""
        self._control(lambda: control.resume(self.run_dir, self.clock))

    def action_stop(self) -> None:
        """Ask first, then stop the run at its next boundary."""

        def answered(stop: bool | None) -> None:
            if stop:
                self._control(lambda: control.stop(self.run_dir, self.clock, reason="watch: stop"))

        self.push_screen(ConfirmStop(self.run_dir.name), answered)

    def action_message(self) -> None:
        """Ask for a message and send it (only offered when the run has an inbox)."""
        send = self._send_message
        if send is None:
            return

        def answered(text: str | None) -> None:
            if text:
                try:
                    self._say(send(text))
                except AutopilotError as error:
                    self._say(str(error), severity="error")

        self.push_screen(MessagePrompt(), answered)

    def action_leave(self) -> None:
        """Close the view; the run goes on."""
        self.exit()

    def action_close(self) -> None:
        """Close the view of a run that has ended."""
        self.exit()

    def action_interrupt(self) -> None:
        """ctrl+c: the run's own interrupt when driving it here, else leave."""
        if self._on_interrupt is None:
            self.exit()
            return
        self._interrupted = self._on_interrupt()
        self._say(self._interrupted)
        self._render_header()
        self._keys_shown = self._key_state()
        self.refresh_bindings()
