"""What a driver is built from: one armed run's record and the collaborators of each
phase of its iterations, wired once (``assemble``), so the driver (``loop.driver``)
holds only the sequence.

The agent runner, the workspace (git), the clock and the state store are injected;
left out, they are the real ones (subprocesses, git in the run's work tree, the
run folder's ``state.json``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from msgspec import Struct

from autopilot.agents.base import AgentAdapter
from autopilot.agents.environment import env_matches
from autopilot.agents.guard import guarded
from autopilot.config import RunConfig
from autopilot.core.change import LoopState
from autopilot.core.ending import RunResult, error_ending
from autopilot.core.policy import PolicyConfig
from autopilot.core.vocabulary import PARALLEL_MODE, EventType
from autopilot.errors import BacklogWriteError, StateFileError, UsageError
from autopilot.loop.armed_limits import held_config, logged_limits, on_disk_limits
from autopilot.loop.briefing import Briefing
from autopilot.loop.clock import Clock
from autopilot.loop.descendants import RUN_ID_ENV
from autopilot.loop.launch import Launcher
from autopilot.loop.prompt import PromptReader
from autopilot.loop.record import RunRecord
from autopilot.loop.runner import AgentRunner, SubprocessRunner
from autopilot.loop.signals import Interrupts
from autopilot.loop.step_state import loop_state
from autopilot.loop.tree_marks import IterationMarks
from autopilot.loop.waits import Waits
from autopilot.store.events import EventLog, read_events
from autopilot.store.paths import run_dir
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore
from autopilot.workspace.marks import GitWorkspace, Workspace
from autopilot.workspace.worktrees import RunWorktree

if TYPE_CHECKING:  # only a backlog run or a lane loads them (``assemble``)
    from autopilot.loop.backlog import BacklogShell
    from autopilot.loop.lanes import RunLanes
    from autopilot.loop.notify import RunNotifier  # only a run with notify URLs loads it


class RunParts(Struct):
    """One run's record and the collaborators of its iterations (see ``assemble``).

    Attributes:
        run_id: The run.
        run_dir: Its folder.
        clock: Wall and monotonic time, and the sleep of every wait.
        interrupts: Flags set by signal handlers.
        log: Its event log.
        record: Its ``state.json`` and log, written together (the driver's copy of
            the state is ``record.state``).
        adapter: The agent adapter, guarded: an adapter that raises on damaged
            output is a warning, never the end of the run.
        cwd: The work tree.
        held: The limits the run's ``armed`` event holds
            (``armed_limits.logged_limits``), or why its log cannot tell them (the
            driver then ends the run, ``tampered``).
        config: The run's configuration, each limit the stricter of ``state.json``'s
            and ``held``'s (``armed_limits.stricter_limits``; ``state.json``'s when
            ``held`` is a note); a budget extension replaces it.
        policy: The policy of the run's mode under ``config``.
        notifier: Notifies the run's end and its warnings, if configured.
        prompts: Reads the run's prompt for each iteration.
        workspace: Marks and checkpoints the work tree.
        marks: The start and end marks of each iteration (``loop.tree_marks``).
        waits: Stop, pause and usage-limit waits.
        briefing: What the agent is told beyond its prompt.
        launcher: Starts the agent and reads its output.
        command_env: The environment of checks and verify commands (it carries the
            run's id, so a relaunch after a crash ends what they left running).
        lanes: The lanes of a parallel run this run is one of, else None.
        backlog: A backlog run's ``tasks.jsonl`` shell, else None.
    """

    run_id: str
    run_dir: RunDir
    clock: Clock
    interrupts: Interrupts
    log: EventLog
    record: RunRecord
    adapter: AgentAdapter
    cwd: Path
    held: RunConfig | str
    config: RunConfig
    policy: PolicyConfig
    notifier: RunNotifier | None
    prompts: PromptReader
    workspace: Workspace
    marks: IterationMarks
    waits: Waits
    briefing: Briefing
    launcher: Launcher
    command_env: dict[str, str]
    lanes: RunLanes | None
    backlog: BacklogShell | None

    @property
    def state(self) -> RunState:
        """The driver's own (authoritative) copy of the run's state (once the write
        that opened the attempt is done: ``RunRecord.collect``)."""
        self.record.collect()
        return self.record.state

    def warn(self, note: str, **fields: Any) -> None:
        """Log a ``warning`` event."""
        self.record.emit(EventType.WARNING, note=note, **fields)

    def report_notify_failures(self) -> None:
        """Log the notifications that could not be sent, as warnings."""
        if self.notifier is not None:
            for failure in self.notifier.drain_failures():
                self.warn(failure)

    def close(self) -> None:
        """After the drive: the notifications sent (what failed logged), the cgroup
        the agents ran in removed (``SubprocessRunner.close``), the log closed."""
        if self.notifier is not None:
            self.notifier.close()
            self.report_notify_failures()
        close = getattr(self.launcher.runner, "close", None)  # an injected one may have none
        if close is not None:
            close()
        self.record.drain()  # a write an error left under way
        self.log.close()

    def take_config(self) -> None:
        """Use the configuration ``state.json`` holds now (a budget was extended)."""
        self.config = self.state.config
        self.policy = self.config.policy(self.state.mode)

    def loop_state(self) -> LoopState:
        """The core's view of the run before the next step (``core.step.conclude``)."""
        return loop_state(
            self.state,  # the attempt's opening taken, after the work tree's end mark
            interrupted=self.interrupts.stop,
            stop_note=self.waits.stop_note(),
            agent=self.adapter.name,
        )

    def attach(self) -> None:
        """Record the agent this driver runs (its version and the environment it
        reads); a work tree that is not a git repository is a warning."""
        needed = self.adapter.env_needed
        self.record.attach(
            agent=self.adapter.name,
            verified_version=self.adapter.verified_version,
            agent_env=tuple(sorted(k for k in self.launcher.base_env if env_matches(k, needed))),
        )
        if not self.workspace.repository and self.workspace.gone() is None:
            self.warn(
                f"{self.cwd} is not a git repository: progress is unknown, so stagnation "
                "counts only identical responses, and there are no checkpoints"
            )

    def checkpoint(self, iteration: int) -> None:
        """Checkpoint the work tree (0: the baseline) as a ``checkpoint`` event; a
        failure is a warning and never ends the run. Off with ``--no-checkpoints``."""
        if self.config.checkpoints != "on":
            return
        if iteration == 0:
            self.marks.opening()  # HEAD and the tree key for the baseline
        facts = self.workspace.checkpoint(iteration)
        problem = self.workspace.problem()
        if problem is not None:
            self.warn(problem, iteration=iteration)
        if facts is not None:
            self.record.emit(EventType.CHECKPOINT, **facts.event_fields())

    def finish(self, terminal: EventType, reason: str, note: str | None) -> RunResult:
        """End the run at a boundary (or after an error), saying what never reached
        the agent."""
        self.briefing.undelivered()
        return self.record.finish(terminal, reason, note)

    def end_after(self, error: BaseException) -> None:
        """An error escaped the driver's loop: end the run with one ``abort`` if it
        has not ended (best effort: the disk may be what failed). The run's files (or
        ``tasks.jsonl``) refusing a write is ``disk_full`` or ``io_error``; anything
        else ``internal_error``, with the message."""
        if self.state.terminated or not isinstance(error, Exception):
            return
        written = OSError | StateFileError | BacklogWriteError
        number = error.errno if isinstance(error, written) else None
        try:
            self.finish(EventType.ABORT, *error_ending(error, number))
        except Exception:
            pass


class Seams(TypedDict, total=False):
    """What a driver's caller may inject; each left out is the real one.

    Attributes:
        on_events: Called with the events written, in order, a batch at a time (for the
            plain view).
        base_env: The environment agents inherit (default ``os.environ``).
        runner: Starts agent processes (default: real subprocesses).
        workspace: Marks the work tree (default: git in the run's work tree, keeping
            a ``--worktree`` run's branch).
        store: The run's ``state.json`` (default: the run folder's).
    """

    on_events: Callable[[list[dict[str, Any]]], None] | None
    base_env: dict[str, str] | None
    runner: AgentRunner | None
    workspace: Workspace | None
    store: StateStore | None


def assemble(
    root: Path,
    run_id: str,
    adapter: AgentAdapter,
    clock: Clock,
    interrupts: Interrupts,
    **seams: Unpack[Seams],
) -> RunParts:
    """Wire the parts of a driver of an armed run.

    Args:
        root: The runs root.
        run_id: The run to drive (armed, not terminated).
        adapter: The agent adapter.
        clock: Wall and monotonic time, and the sleep of every wait.
        interrupts: Flags set by signal handlers.
        **seams: What is injected instead of the real ones (``Seams``).

    Raises:
        StateFileError: the run's state cannot be read, or names no work tree or
            prompt (a run written by another implementation).
        UsageError: the run is a parallel run (its lanes' runs are driven).
    """
    folder = RunDir(run_dir(root, run_id))
    log = EventLog(folder.events, run_id, clock.now_ms)
    store = seams.get("store") or StateStore(folder.state)
    record = RunRecord(store, log, seams.get("on_events"))

    def warn(note: str) -> None:
        record.emit(EventType.WARNING, note=note)

    state = record.state
    if state.cwd is None or (state.prompt.text is None and state.prompt.path is None):
        raise StateFileError(f"{folder.state} has no work tree or prompt to run")
    if state.mode == PARALLEL_MODE:
        raise UsageError(f"run {run_id} is a parallel run: its agents' runs are driven")
    cwd = Path(state.cwd)
    # Each limit is the stricter of state.json's and the armed event's (``armed_limits``).
    held = logged_limits(read_events(folder.events), run_id, on_disk_limits(state))
    config = held_config(state, held)
    policy = config.policy(state.mode)
    notifier = None
    if config.notify:
        from autopilot.loop.notify import RunNotifier

        notifier = RunNotifier(config.notify, run_id)
    record.notify = notifier
    guarded_adapter = guarded(adapter, warn)
    waits = Waits(record, clock, interrupts, cwd)
    briefing = Briefing(folder, record, cwd, clock, policy)
    launcher = Launcher(
        guarded_adapter,
        seams.get("runner") or SubprocessRunner(),
        record,
        cwd,
        seams.get("base_env"),
        run_id,
        should_kill=waits.kill_requested,
        handoff=briefing,
    )
    command_env = {**launcher.base_env, RUN_ID_ENV: run_id}
    lanes: RunLanes | None = None
    if state.extra.get("lane") is not None:
        from autopilot.loop.lanes import run_lanes

        lanes = run_lanes(root, run_id, state)
    place = RunWorktree.from_json(state.extra.get("worktree"))
    branch = place.branch if place else None
    workspace = seams.get("workspace") or GitWorkspace(cwd, folder.path, branch=branch)
    backlog: BacklogShell | None = None
    if state.mode == "backlog":
        from autopilot.loop.backlog_run import backlog_shell

        backlog = backlog_shell(
            record, root, run_id, command_env, lanes, waits.kill_requested, limits=config
        )
    if backlog is not None:  # an item's surface is checked against its start
        backlog.tree = workspace
    return RunParts(
        run_id=run_id,
        run_dir=folder,
        clock=clock,
        interrupts=interrupts,
        log=log,
        record=record,
        adapter=guarded_adapter,
        cwd=cwd,
        held=held,
        config=config,
        policy=policy,
        notifier=notifier,
        prompts=PromptReader(state.prompt, cwd, warn),
        workspace=workspace,
        marks=IterationMarks(
            workspace,
            clock,
            lambda: (waits.holds, briefing.tree_writes),
            reuse=backlog is None and lanes is None,
        ),
        waits=waits,
        briefing=briefing,
        launcher=launcher,
        command_env=command_env,
        lanes=lanes,
        backlog=backlog,
    )
