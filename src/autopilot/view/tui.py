"""``autopilot watch``: the live view of one run, in Textual (keys in ``README.md``).

Layout: a header (run id, label, agent and model, status badge, iteration N of
max, elapsed time without pauses, tokens and cost with a tokens-per-iteration
sparkline), the stages row, the active stage with its substages, work items and
tasks, the event timeline, a live tail of the current iteration's agent output, the
last commit, and key hints.

How it reads the run: ``state.json`` at once (so the header is right on the first
frame), the end of ``events.jsonl`` for the timeline, then the whole log folded
once in a background thread, streaming (``store.reader.fold_log``); after that every change
the kernel reports (``follow.watch_run_dir``, inotify) is read incrementally and
folded into the same snapshot. Keys act through ``autopilot.control``, exactly like
``autopilot pause|resume|stop``; leaving the view never stops the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Footer

from autopilot.loop.clock import Clock, SystemClock
from autopilot.runtime.liveness import driver_running
from autopilot.store.events import TERMINAL_EVENT_TYPES
from autopilot.store.fold import Snapshot, fold_event
from autopilot.store.project_files import off_switch
from autopilot.store.reader import fold_log
from autopilot.store.run_state import RunState
from autopilot.store.rundir import EVENTS_FILE, STATE_FILE, STDOUT_FILE, RunDir
from autopilot.store.state import read_state_quietly
from autopilot.view import present
from autopilot.view.badge import status_badge
from autopilot.view.follow import Liveness, StopEvent, watch_run_dir
from autopilot.view.keys import RunKeys, SendMessage
from autopilot.view.output import OutputFollower
from autopilot.view.project import read_project_tasks
from autopilot.view.tail import LogFollower, log_end, read_last_events
from autopilot.view.widgets import (
    AgentOutput,
    FilesChanged,
    LastCommit,
    LogFolded,
    RunHeader,
    StagePane,
    StagesRow,
    TailLoaded,
    Timeline,
    WorkPane,
)

TIMELINE_EVENTS = 300
"""Events shown in the timeline on start (read from the end of the log)."""

CATCH_UP_BYTES = 8 * 1024 * 1024


class WatchApp(RunKeys):
    """The live view of one run.

    Args:
        run_dir: The run's folder.
        clock: Wall time for elapsed times and control commands (injected in tests).
        liveness: Whether the run's driver is alive (injected in tests).
        send_message: Sends a message to the agent; without it (no inbox) the
            ``m`` key is hidden.
        driver_thread: When the view runs beside its own driver (``run``), the
            thread driving the run: the view closes when it has finished.
        on_interrupt: What ctrl+c does (default: leave the view).
        follow: Follow changes (False: show what is on disk and stay still).
    """

    TITLE = "autopilot watch"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #middle { height: 1fr; }
    #left { width: 46%; }
    StagePane, WorkPane { height: 1fr; border: round $primary-darken-1; padding: 0 1; }
    Timeline { width: 1fr; border: round $primary-darken-1; overflow-x: hidden; }
    AgentOutput { height: 40%; border: round $accent-darken-1; }
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        clock: Clock | None = None,
        liveness: Liveness = driver_running,
        send_message: SendMessage | None = None,
        driver_thread: threading.Thread | None = None,
        on_interrupt: Callable[[], str] | None = None,
        follow: bool = True,
    ) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.clock: Clock = clock or SystemClock()
        self._liveness = liveness
        self._send_message = send_message
        self._driver_thread = driver_thread
        self._on_interrupt = on_interrupt
        self._follow = follow
        self.log_path = RunDir(run_dir).events
        self.state: dict[str, Any] | None = None
        self._run_state: RunState | None = None
        self.snapshot = Snapshot()
        self.folded = False
        self.alive: bool | None = None
        self.project_tasks: list[dict[str, Any]] = []
        self._tasks_stamp: tuple[int, int] | None = None
        self._follower: LogFollower | None = None
        self._output = OutputFollower(run_dir, None)
        self._stop_watching = StopEvent()
        self._log_bytes = 0
        self._keys_shown: tuple[bool, bool, bool] | None = None
        self._panels: present.Panels | None = None
        self._interrupted: str | None = None
        """What ctrl+c did to the run driven beside the view (None: not pressed)."""
        self.on_shown: Callable[[list[dict[str, Any]]], None] | None = None
        """Called with new events once the screen showing them has been refreshed
        (benchmarks measure latency with it)."""

    # -- layout ------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """Header, stages, stage/work panes beside the timeline, output, commit, keys."""
        yield RunHeader(id="header")
        yield StagesRow(id="stages")
        with Horizontal(id="middle"):
            with Vertical(id="left"):
                yield StagePane(id="stage")
                yield WorkPane(id="work")
            yield Timeline(id="timeline", max_lines=1000, wrap=False, min_width=40)
        yield AgentOutput(id="output", max_lines=2000, wrap=True, min_width=40)
        yield LastCommit(id="commit")
        yield Footer()

    def on_mount(self) -> None:
        """Show state.json at once, then read the log in the background and follow."""
        self.query_one("#stage").border_title = "stage"
        self.query_one("#work").border_title = "work items & tasks"
        self.query_one("#timeline").border_title = "events"
        self.query_one("#output").border_title = "agent output"
        self._reload_state()
        self._output = OutputFollower(self.run_dir, self.state)
        try:
            self._log_bytes = self.log_path.stat().st_size
        except OSError:
            self._log_bytes = 0
        self._render_all()
        self._load_log()
        if self._follow:
            self._watch_files()
        self.set_interval(1.0, self._tick)

    # -- background work -----------------------------------------------------------

    @work(thread=True, exclusive=True, group="load")
    def _load_log(self) -> None:
        end = log_end(self.log_path)
        self.post_message(TailLoaded(read_last_events(self.log_path, TIMELINE_EVENTS, end.offset)))
        snapshot, offset = fold_log(self.log_path, end=end.offset)
        self.post_message(LogFolded(snapshot, offset, end.inode))

    @work(thread=True, group="watch")
    def _watch_files(self) -> None:
        try:
            for names in watch_run_dir(self.run_dir, self._stop_watching):
                self.post_message(FilesChanged(names))
        except OSError as error:
            reason = error.strerror or str(error)
            self.post_message(FilesChanged(frozenset(), f"cannot follow {self.run_dir}: {reason}"))

    def on_unmount(self) -> None:
        """Stop the file watcher thread."""
        self._stop_watching.set()

    # -- messages ----------------------------------------------------------------

    def on_tail_loaded(self, message: TailLoaded) -> None:
        """First frame of the timeline."""
        self.query_one(Timeline).add_events(message.events)

    def on_log_folded(self, message: LogFolded) -> None:
        """The whole log is folded: follow it from where the fold stopped."""
        self.snapshot = message.snapshot
        self._follower = LogFollower(self.log_path, message.offset, message.inode)
        self.folded = True
        self._read_events()
        self._read_output()
        self._render_all()

    def on_files_changed(self, message: FilesChanged) -> None:
        """Read what changed; on a quiet period, check everything once."""
        if message.error is not None:
            self._say(message.error, severity="error", timeout=30)
            return
        names = message.names
        quiet = not names
        if quiet or STATE_FILE in names:
            self._reload_state()
        if quiet or EVENTS_FILE in names:
            self._read_events()
        if quiet or STDOUT_FILE in names:
            self._read_output()
        if quiet:
            self._reload_project_tasks()
        self._render_all()
        self._check_driver_thread()

    # -- reading -----------------------------------------------------------------

    def _reload_state(self) -> None:
        state = read_state_quietly(RunDir(self.run_dir).state)
        if state is not None or self.state is None:
            self.state = state.to_json() if state is not None else None
            self._run_state = state
        self.alive = self._liveness(self.run_dir, self._run_state)
        keys = self._key_state()
        if keys != self._keys_shown:
            self._keys_shown = keys
            self.refresh_bindings()

    def _reload_project_tasks(self) -> None:
        cwd = (self.state or {}).get("cwd")
        if not isinstance(cwd, str):
            return
        path = Path(cwd) / ".autopilot" / "tasks.jsonl"
        try:
            info = path.stat()
            stamp = (info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = None
        if stamp != self._tasks_stamp:
            self._tasks_stamp = stamp
            self.project_tasks = read_project_tasks(path) if stamp else []

    def _read_events(self) -> None:
        if not self.folded or self._follower is None:
            return
        shown: list[dict[str, Any]] = []
        while True:
            result = self._follower.read_new(CATCH_UP_BYTES)
            if result.reset:
                self._restart()
                return
            if not result.events:
                break
            iteration = self.snapshot.iteration
            for event in result.events:
                fold_event(self.snapshot, event)
            shown.extend(result.events)
            if self.snapshot.iteration != iteration or any(
                event.get("type") == "iteration_start" for event in result.events
            ):
                self._attach_output()
            if self.snapshot.terminal or any(
                event.get("type") in TERMINAL_EVENT_TYPES for event in result.events
            ):
                self._reload_state()
        if shown:
            self.query_one(Timeline).add_events(shown[-TIMELINE_EVENTS:])
            self._reload_project_tasks()
            self._render_all()
            if self.on_shown is not None:
                self.call_after_refresh(self.on_shown, shown)

    def _restart(self) -> None:
        self.folded = False
        self._follower = None
        self.snapshot = Snapshot()
        self.query_one(Timeline).clear()
        self._say("the event log was replaced or truncated; reading it again")
        self._load_log()

    def _attach_output(self) -> None:
        iteration = int(self.snapshot.iteration or 0)
        if self._output.attach(iteration):
            self.query_one(AgentOutput).clear_output(iteration)
        self._read_output()

    def _read_output(self) -> None:
        if self._output.iteration is None and self.folded:
            self._attach_output()
            return
        lines = self._output.read_new()
        if lines:
            self.query_one(AgentOutput).add_lines(lines)

    def _check_driver_thread(self) -> None:
        thread = self._driver_thread
        if thread is not None and not thread.is_alive():
            self._reload_state()
            self._read_events()
            self.exit()

    def _tick(self) -> None:
        self._check_driver_thread()
        if not self.snapshot.terminal:
            try:
                self._render_header()
                if self.snapshot.activeStage:
                    self.query_one(StagePane).show(self.snapshot, self.clock.now_ms())
            except NoMatches:  # a tick while the panes are still mounting, or torn down
                return

    # -- rendering ---------------------------------------------------------------

    def _render_header(self) -> None:
        now = self.clock.now_ms()
        interrupted = None if self._ended() else self._interrupted
        badge = status_badge(
            self.state, self.snapshot, self.alive, now, interrupted, self._off_switch()
        )
        note = None
        if not self.folded:
            note = f"reading the log ({self._log_bytes / 1_000_000:.1f} MB)…"
        self.query_one(RunHeader).show(self.state, self.snapshot, badge, now, note)

    def _off_switch(self) -> str | None:
        """The OFF file holding the run, if any (a stat per project folder)."""
        state = self.state
        if state is None or state.get("terminated"):
            return None
        cwd, worktree = state.get("cwd"), state.get("worktree")
        found = off_switch(
            cwd if isinstance(cwd, str) else None, worktree if isinstance(worktree, dict) else None
        )
        return None if found is None else str(found)

    def _render_all(self) -> None:
        self._render_header()
        snapshot = self.snapshot
        shown_panels = present.panels(snapshot, self.project_tasks)
        if shown_panels != self._panels:
            self._panels = shown_panels
            self.query_one(StagesRow).display = shown_panels.stages_row
            self.query_one(StagePane).display = shown_panels.stage
            self.query_one(WorkPane).display = shown_panels.work
            self.query_one("#left").display = shown_panels.stage or shown_panels.work
            # The timeline's size changed: keep its newest line in sight.
            self.call_after_refresh(self._timeline_to_end)
        self.query_one(StagesRow).show(snapshot)
        self.query_one(StagePane).show(snapshot, self.clock.now_ms())
        self.query_one(WorkPane).show(snapshot, self.project_tasks)
        self.query_one(LastCommit).show(snapshot)

    def _timeline_to_end(self) -> None:
        self.query_one(Timeline).scroll_end(animate=False, immediate=True)
