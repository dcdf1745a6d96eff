"""Drive an armed run in this terminal: signals, the driver, and what people see.

``drive`` is what ``autopilot run``, ``start`` and ``demo`` call once a run is armed
(or found left active): the live view in front when both ends are a terminal, else
one line per event; it holds no command-line code. A run with no terminal at all is
the daemon's (``runtime.daemon``).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autopilot.agents.base import AgentAdapter
from autopilot.core.ending import RunResult
from autopilot.loop.clock import SystemClock
from autopilot.loop.driver import Driver
from autopilot.loop.signals import Interrupts
from autopilot.runtime.locks import ProjectLock, RunLocks
from autopilot.store.paths import run_dir
from autopilot.store.rundir import RunDir
from autopilot.store.state import read_state
from autopilot.view.plain import format_event, waiting_hint


def drive(
    root: Path,
    run_id: str,
    adapter: AgentAdapter,
    *,
    echo: Callable[[str], None],
    plain: bool = True,
    project_lock: ProjectLock | None = None,
) -> RunResult:
    """Drive a run to its end here, with signal handling; returns how it ended.

    With ``plain`` False and a terminal on stdin and stdout, the live view is in
    front while the driver works in a thread; otherwise ``echo`` gets one line per
    event.

    Args:
        root: The runs root.
        run_id: An armed run that has not ended.
        adapter: Its agent's adapter.
        echo: Prints one line as it is: every line given is safe to show already
            (``format_event`` and ``waiting_hint`` redact and escape what they format).
        plain: One line per event instead of the live view.
        project_lock: The work tree's lock, if the caller already holds it.

    Raises:
        RunLockedError: another driver holds the run or the project.
        UsageError: the run has already ended.
        StateFileError: its state cannot be read.
    """
    folder = RunDir(run_dir(root, run_id))
    locks = RunLocks(
        project_lock or ProjectLock.of_run(root, read_state(folder.state)), run_id, folder
    )
    interrupts = Interrupts()
    interrupts.install()
    live = not plain and sys.stdout.isatty() and sys.stdin.isatty()
    if not live:
        interrupts.announce = _say_at_once

    def on_events(events: list[dict[str, Any]]) -> None:
        lines = []
        for event in events:
            lines.append(format_event(event))
            hint = waiting_hint(event, run_id)
            if hint is not None:  # the run waits here until a person answers
                lines.append(hint)
        echo("\n".join(lines))  # one write: a pipe's reader wakes once

    driver = Driver(
        root,
        run_id,
        adapter,
        SystemClock(),
        interrupts,
        locks=locks,
        on_events=None if live else on_events,
    )
    if not live:
        return driver.run()
    from autopilot.view.live import drive_live

    def interrupt() -> str:
        interrupts.handle(signal.SIGINT, None)
        if interrupts.kill_now:
            return "ending the agent now"
        return "stopping at the next boundary; ctrl+c again ends the agent now"

    def run_then_leave_if_hung_up() -> RunResult:
        result = driver.run()
        if interrupts.hangup:
            # The terminal is gone and the view cannot draw or close on it; the
            # run is recorded, so leave now rather than hang on a dead terminal.
            os._exit(result.exit_code)
        return result

    return drive_live(run_then_leave_if_hung_up, root, run_id, on_interrupt=interrupt)


def _say_at_once(line: str) -> None:
    """Write ``line`` on stderr from a signal handler: straight to the descriptor, so
    no buffered stream is entered again mid-write."""
    try:
        os.write(sys.stderr.fileno(), (line + "\n").encode("utf-8", "replace"))
    except (OSError, ValueError):
        pass
