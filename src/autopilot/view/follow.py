"""Following a run's files with file-system notifications (watchfiles), never busy polling.

``watch_run_dir`` yields the names of the run files that changed (``events.jsonl``,
``state.json``, an iteration's ``stdout.log``) as the kernel reports them, plus an
empty set after ``quiet_seconds`` without changes, which callers use for slow checks
(is the driver still alive?) and as a safety net on file systems without
notifications. ``follow_plain`` is ``watch --plain``: one line per event
(``format_event``) until the run's terminal event, or until the run's driver is gone
— told from ``state.json``, or, when that cannot be read, from the driver lock and
the pid of the log's last ``driver_start``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import watchfiles

from autopilot.runtime.liveness import driver_lock_held, driver_running, process_alive
from autopilot.store.events import TERMINAL_EVENT_TYPES
from autopilot.store.run_state import RunState
from autopilot.store.rundir import EVENTS_FILE, STATE_FILE, STDOUT_FILE, RunDir
from autopilot.store.state import read_state_quietly
from autopilot.view.plain import format_event
from autopilot.view.tail import LogFollower, log_end

WATCHED_NAMES = frozenset({EVENTS_FILE, STATE_FILE, STDOUT_FILE})
"""The files whose changes matter to a view of a run."""

STEP_MS = 15
"""How long watchfiles waits for more changes before reporting a batch."""

DEBOUNCE_MS = 200
"""A steady stream of changes is still reported at least this often."""

CATCH_UP_BYTES = 4 * 1024 * 1024

Liveness = Callable[[Path, RunState | None], bool | None]


def _interesting(change: watchfiles.Change, path: str) -> bool:
    return Path(path).name in WATCHED_NAMES


def watch_run_dir(
    run_dir: Path, stop: threading.Event, *, quiet_seconds: float = 5.0
) -> Iterator[frozenset[str]]:
    """Yield names of changed run files; an empty set after ``quiet_seconds`` of quiet.

    Args:
        run_dir: The run's folder (watched recursively, for ``iter-*/stdout.log``).
        stop: Set it to end the iteration (checked every few milliseconds).
        quiet_seconds: How often to yield an empty set when nothing changes.

    Raises:
        OSError: the folder cannot be watched (e.g. it was removed).
    """
    for changes in watchfiles.watch(
        run_dir,
        watch_filter=_interesting,
        debounce=DEBOUNCE_MS,
        step=STEP_MS,
        stop_event=stop,
        rust_timeout=max(1, int(quiet_seconds * 1000)),
        yield_on_timeout=True,
    ):
        yield frozenset(Path(path).name for _, path in changes)


def _gone_without_state(run_dir: Path, driver_pid: int | None) -> bool:
    """With ``state.json`` unreadable: no driver holds the run's lock and the process
    the log last named as its driver (``driver_start``) is not running."""
    if driver_lock_held(run_dir) is not False:
        return False
    return driver_pid is None or process_alive(driver_pid, None) is False


def follow_plain(
    run_dir: Path,
    write: Callable[[str], None],
    *,
    stop: threading.Event | None = None,
    liveness: Liveness = driver_running,
    quiet_seconds: float = 5.0,
    warn: Callable[[str], None] | None = None,
    from_end: bool = False,
) -> int:
    """Print every event of a run, one line each, until its terminal event.

    Args:
        run_dir: The run's folder.
        write: Called with each line (no newline).
        stop: Set to end following early (returns 0 after printing what the log
            holds by then).
        liveness: Tells whether the driver is alive (False: gone).
        quiet_seconds: After this long without changes the driver is checked.
        warn: Where notes go (default stderr).
        from_end: Print only events appended from now on.

    Returns:
        0 when the terminal event was printed (or ``stop`` was set); 1 when the
        run's driver is gone and the run was left without a terminal event (also
        when ``state.json`` cannot be read: no driver holds the run's lock and the
        log's last ``driver_start`` names no running process).
    """
    say = warn or (lambda text: print(text, file=sys.stderr))
    path = RunDir(run_dir).events
    end = log_end(path) if from_end else None
    follower = LogFollower(path, end.offset, end.inode) if end else LogFollower(path)
    driver_pid: int | None = None

    def drain() -> bool:
        nonlocal driver_pid
        while True:
            result = follower.read_new(CATCH_UP_BYTES)
            if result.reset:
                say("autopilot: the event log was replaced or truncated; reading it again")
                continue
            if not result.events:
                return False
            for event in result.events:
                write(format_event(event))
                if event.get("type") in TERMINAL_EVENT_TYPES:
                    return True
                pid = event.get("pid")
                if event.get("type") == "driver_start" and isinstance(pid, int) and pid > 0:
                    driver_pid = pid

    if drain():
        return 0
    stop = stop or threading.Event()
    for names in watch_run_dir(run_dir, stop, quiet_seconds=quiet_seconds):
        if drain():
            return 0
        if names and STATE_FILE not in names:
            continue
        state = read_state_quietly(RunDir(run_dir).state)
        if state is not None and state.terminated and not names:
            say(f"autopilot: run {run_dir.name} has ended but its log has no terminal event")
            return 0
        if names:
            continue
        if liveness(run_dir, state) is False:
            say(
                f"autopilot: run {run_dir.name} is not running (its driver is gone); "
                f"relaunch it with: autopilot start {run_dir.name}"
            )
            return 1
        if state is None and _gone_without_state(run_dir, driver_pid):
            say(
                f"autopilot: run {run_dir.name}: state.json cannot be read and no driver is "
                f"running it; see autopilot status {run_dir.name}"
            )
            return 1
    drain()  # stopped: what was written until now is still shown
    return 0
