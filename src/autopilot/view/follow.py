"""Following a run's files with file-system notifications (inotify, else watchfiles).

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
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import watchfiles

from autopilot.runtime.liveness import driver_lock_held, driver_running, process_alive
from autopilot.store.events import TERMINAL_EVENT_TYPES
from autopilot.store.run_state import RunState
from autopilot.store.rundir import EVENTS_FILE, STATE_FILE, STDOUT_FILE, RunDir
from autopilot.store.state import read_state_quietly
from autopilot.view.inotify import RunDirNotify, Unavailable
from autopilot.view.plain import format_event
from autopilot.view.tail import LogFollower, log_end

WATCHED_NAMES = frozenset({EVENTS_FILE, STATE_FILE, STDOUT_FILE})
"""The files whose changes matter to a view of a run."""

STEP_MS = 15
"""How long to wait for more changes before reporting a batch (milliseconds)."""

DEBOUNCE_MS = 200
"""A steady stream of changes is still reported at least this often (milliseconds)."""

STOP_CHECK_SECONDS = 0.1
"""How long a quiet wait goes before looking at a plain ``threading.Event`` ``stop``
again (a ``StopEvent`` wakes it at once instead)."""

CATCH_UP_BYTES = 4 * 1024 * 1024

Liveness = Callable[[Path, RunState | None], bool | None]


def _interesting(change: watchfiles.Change, path: str) -> bool:
    return Path(path).name in WATCHED_NAMES


class StopEvent(threading.Event):
    """A ``threading.Event`` whose ``set`` also ends ``watch_run_dir``'s wait at once,
    so the waiting thread sleeps until a change, the quiet period's end or this."""

    def __init__(self) -> None:
        super().__init__()
        self._wakers: list[Callable[[], None]] = []
        self._wakers_lock = threading.Lock()

    def set(self) -> None:
        """Set the flag and wake every waiting ``watch_run_dir``."""
        with self._wakers_lock:
            super().set()
            wakers = list(self._wakers)
        for wake in wakers:
            wake()

    def add_waker(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` on ``set`` (at once if already set)."""
        with self._wakers_lock:
            self._wakers.append(wake)
            done = self.is_set()
        if done:
            wake()

    def remove_waker(self, wake: Callable[[], None]) -> None:
        """Forget ``wake``."""
        with self._wakers_lock:
            if wake in self._wakers:
                self._wakers.remove(wake)


def watch_run_dir(
    run_dir: Path, stop: threading.Event, *, quiet_seconds: float = 5.0
) -> Iterator[frozenset[str]]:
    """Yield names of changed run files; an empty set after ``quiet_seconds`` of quiet.

    On Linux the kernel's notifications wake the waiting thread (``inotify``), and the
    folder is watched from the moment this returns; elsewhere, or when the system's
    inotify limits are reached, watchfiles does, from the first ``next``.

    Args:
        run_dir: The run's folder (and its subfolders, for ``iter-*/stdout.log``).
        stop: Set it to end the iteration: seen at once if a ``StopEvent``, else
            within ``STOP_CHECK_SECONDS``.
        quiet_seconds: How often to yield an empty set when nothing changes.

    Raises:
        OSError: the folder cannot be watched (e.g. it does not exist).
    """
    try:
        notify = RunDirNotify(run_dir, WATCHED_NAMES)
    except Unavailable:
        return _watch_polling(run_dir, stop, quiet_seconds)
    return _watch_notified(notify, stop, quiet_seconds)


def _watch_notified(
    notify: RunDirNotify, stop: threading.Event, quiet_seconds: float
) -> Iterator[frozenset[str]]:
    """``watch_run_dir`` by inotify: batches of ``STEP_MS`` of calm, at most ``DEBOUNCE_MS``."""
    waking = stop if isinstance(stop, StopEvent) else None
    if waking is not None:
        waking.add_waker(notify.wake)
    try:
        deadline = time.monotonic() + quiet_seconds
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                deadline = time.monotonic() + quiet_seconds
                yield frozenset()
                continue
            if not notify.wait(left if waking else min(left, STOP_CHECK_SECONDS)):
                continue
            names = notify.read()
            batch_end = time.monotonic() + DEBOUNCE_MS / 1000
            while time.monotonic() < batch_end and notify.wait(STEP_MS / 1000):
                names |= notify.read()
            if names and not stop.is_set():
                deadline = time.monotonic() + quiet_seconds
                yield frozenset(names)
    finally:
        if waking is not None:
            waking.remove_waker(notify.wake)
        notify.close()


def _watch_polling(
    run_dir: Path, stop: threading.Event, quiet_seconds: float
) -> Iterator[frozenset[str]]:
    """``watch_run_dir`` by watchfiles, which looks for changes every ``STEP_MS``."""
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
            holds by then); a ``StopEvent`` is seen at once.
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
    stop = stop or StopEvent()
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
