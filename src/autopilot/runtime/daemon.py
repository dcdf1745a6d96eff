"""The daemon: drives one run with no terminal, under its supervisor
(``docs/architecture.md``, "Detached runs").

``python -m autopilot.runtime.daemon RUNS_ROOT RUN_ID``, started by
``runtime.supervisor`` in a session of its own with stdin ``/dev/null`` and its output
in the run folder. It is the ordinary driver with no view: SIGTERM and SIGINT stop the
run at the next boundary (a second one ends the agent now), SIGHUP is ignored. It
holds the platform's sleep inhibitor for as long as it drives the run
(``runtime.keepawake``). Its exit code is the run's (0 complete, 1 aborted, 3 a budget,
130 stopped), or 2/4 for an error it reports on stderr in one line: 2 a usage error
(never restarted), 5 another run is active in the same work tree (left alone), 4 any
other.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from autopilot.errors import AutopilotError
from autopilot.loop.clock import SystemClock
from autopilot.loop.signals import Interrupts

if TYPE_CHECKING:
    from autopilot.store.events import EventLog


def drive_detached(root: Path, run_id: str) -> int:
    """Drive ``run_id`` to its end with no terminal; returns the exit code.

    Raises:
        AutopilotError: the run cannot be driven (ended, locked, agent missing, …).
    """
    from autopilot.core.ending import describe_ending
    from autopilot.loop.driver import Driver
    from autopilot.runtime.agents import adapter_for_state
    from autopilot.runtime.keepawake import KeepAwake
    from autopilot.runtime.locks import ProjectLock, RunLocks
    from autopilot.runtime.parallel import settle
    from autopilot.store.events import EventLog
    from autopilot.store.lanes import LaneOf
    from autopilot.store.paths import run_dir
    from autopilot.store.rundir import RunDir
    from autopilot.store.state import read_state

    interrupts = Interrupts()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, interrupts.handle)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    folder = RunDir(run_dir(root, run_id))
    state = read_state(folder.state)
    adapter = adapter_for_state(state)
    adapter.check_installed()
    locks = RunLocks(ProjectLock.of_run(root, state), run_id, folder)
    clock = SystemClock()
    notes = EventLog(folder.events, run_id, clock.now_ms)
    awake = KeepAwake(f"autopilot run {run_id}", sleep_warning_once(folder.events, notes))
    awake.hold()
    try:
        result = Driver(root, run_id, adapter, clock, interrupts, locks=locks).run()
    finally:
        awake.release()
        notes.close()
    lane = LaneOf.from_json(state.extra.get("lane"))
    if lane is not None:  # the last lane to end ends its parallel run
        settle(root, lane.parent, clock)
    ending = describe_ending(result.reason, completed=result.terminal_type == "complete")
    with contextlib.suppress(OSError, ValueError):  # daemon.out on a full disk
        print(f"autopilot: run {run_id} {ending}", flush=True)
    return result.exit_code


def sleep_warning_once(events: Path, notes: EventLog) -> Callable[[str], None]:
    """Logs the keep-awake warning as a ``warning`` event unless the run's log has it
    already: it is said once per run, not at every start of its daemon."""
    from autopilot.core.vocabulary import EventType
    from autopilot.runtime.keepawake import SLEEP_WARNING
    from autopilot.store.events import read_events

    def note(line: str) -> None:
        for event in read_events(events):
            said = event.get("note")
            if event.get("type") == "warning" and str(said).startswith(SLEEP_WARNING):
                return
        notes.emit(EventType.WARNING, note=line)

    return note


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``RUNS_ROOT RUN_ID``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: daemon RUNS_ROOT RUN_ID", file=sys.stderr)
        return 2
    try:
        return drive_detached(Path(args[0]), args[1])
    except AutopilotError as error:
        from autopilot.core.restart import PROJECT_BUSY_EXIT_CODE
        from autopilot.errors import ProjectBusyError

        with contextlib.suppress(OSError, ValueError):  # a full disk: the exit code says it
            print(f"autopilot: error: {error}", file=sys.stderr, flush=True)
        return PROJECT_BUSY_EXIT_CODE if isinstance(error, ProjectBusyError) else error.exit_code


if __name__ == "__main__":
    sys.exit(main())
