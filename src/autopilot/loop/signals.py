"""Signal handling for the driver: handlers only set flags (STYLE: shutdown is not an
exception). The loop reads them at its boundaries and while an agent runs."""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

from msgspec import Struct


class Interrupts(Struct):
    """Flags set by signal handlers and read by the loop.

    The first SIGINT or a SIGTERM asks for a stop at the next boundary; a second
    one ends the agent's process group now. SIGHUP (the terminal went away) ends it
    now.

    ``announce``, if set, is given one line saying what a SIGINT or SIGTERM was heard
    as, at once (a plain foreground run says so before the iteration ends).
    """

    stop: bool = False
    kill_now: bool = False
    hangup: bool = False
    signals: int = 0
    announce: Callable[[str], None] | None = None

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """Signal handler: set flags, and announce them if asked."""
        self.signals += 1
        if signum == signal.SIGHUP:
            self.hangup = True
        if signum == signal.SIGHUP or self.signals > 1:
            self.kill_now = True
        self.stop = True
        if self.announce is not None and not self.hangup:
            self.announce(interrupt_note(self.kill_now))

    def install(self) -> None:
        """Install the handlers for SIGINT, SIGTERM and SIGHUP."""
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self.handle)


def interrupt_note(kill_now: bool) -> str:
    """What a stop signal was heard as, for the person who sent it."""
    if kill_now:
        return "autopilot: stop heard again: ending the agent now"
    return (
        "autopilot: stop heard: the run stops when this iteration ends; "
        "Ctrl-C again ends the agent now"
    )
