"""The clock the loop reads: injected so tests never patch time."""

from __future__ import annotations

import time

TYPE_CHECKING = False  # as typing's, without importing typing at run time
if TYPE_CHECKING:
    from typing import Protocol
else:  # what a protocol checks is types: at run time it is a plain base
    Protocol = object


class Clock(Protocol):
    """Wall time for records, monotonic time for intervals, and a sleep."""

    def now_ms(self) -> int:
        """Epoch time in milliseconds."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, never going back."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block for ``seconds``."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        """Epoch time in milliseconds."""
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """``time.sleep``."""
        time.sleep(seconds)
