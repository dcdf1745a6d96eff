"""Signal handling for the driver: handlers only set flags (STYLE: shutdown is not an
exception). The loop reads them at its boundaries and while an agent runs."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from types import FrameType


@dataclass
class Interrupts:
    """Flags set by signal handlers and read by the loop.

    The first SIGINT or a SIGTERM asks for a stop at the next boundary; a second
    one ends the agent's process group now. SIGHUP (the terminal went away) ends it
    now.
    """

    stop: bool = False
    kill_now: bool = False
    hangup: bool = False
    signals: int = 0

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """Signal handler: set flags, nothing else."""
        self.signals += 1
        if signum == signal.SIGHUP:
            self.hangup = True
        if signum == signal.SIGHUP or self.signals > 1:
            self.kill_now = True
        self.stop = True

    def install(self) -> None:
        """Install the handlers for SIGINT, SIGTERM and SIGHUP."""
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self.handle)
