"""The driver: iterate an armed run (see ``arming``) until it ends.

Each iteration is one visible sequence (``Driver._run``): **boundary** (stop, pause,
budgets, a usage-limit wait), **start** (``iteration_start``, the prompt saved, the
work tree marked), **agent** (the runner starts the adapter's argv and streams its
output through the adapter's parser), **conclude** (``core.step.conclude``: pure,
from the run before and the attempt's facts to the decision, the new counters and
the events) and **apply** (``RunRecord.apply``: events appended and fsynced, then
``state.json``). What the agent is told beyond its prompt — queued messages, the
memory file, budget warnings — goes through ``Briefing``. Signal handlers only set
flags (``Interrupts``). The agent runner, the workspace (git) and the clock are
injected, so every path runs in-process in tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from autopilot.agents.base import AgentAdapter
from autopilot.agents.environment import env_matches
from autopilot.agents.guard import guarded
from autopilot.core.change import LoopState
from autopilot.core.delivery import MessageKind
from autopilot.core.ending import RunResult, io_reason
from autopilot.core.policy import Decision, budget_note, budget_reached
from autopilot.core.step import Step, conclude, spend_counters
from autopilot.core.verification import verify_notice
from autopilot.core.vocabulary import PARALLEL_MODE, Action, EventType, Reason
from autopilot.errors import BacklogWriteError, StateFileError, UsageError
from autopilot.loop.armed_limits import held_limits, put_back_limits
from autopilot.loop.backlog import Begun
from autopilot.loop.backlog_recovery import concluded_after_crash, record_started
from autopilot.loop.backlog_run import backlog_boundary, backlog_shell, with_item_facts
from autopilot.loop.briefing import Briefing
from autopilot.loop.clock import Clock
from autopilot.loop.cut_short import with_commits_since_start
from autopilot.loop.descendants import RUN_ID_ENV
from autopilot.loop.lanes import run_lanes
from autopilot.loop.launch import Launcher
from autopilot.loop.observe import attempt_of
from autopilot.loop.prompt import PromptReader
from autopilot.loop.record import RunRecord, loop_state
from autopilot.loop.recovery import (
    attempt_left,
    reconcile_terminal,
    remove_stale_temp_files,
    restore_spend,
)
from autopilot.loop.runner import AgentRunner, DriverLocks, SubprocessRunner
from autopilot.loop.signals import Interrupts
from autopilot.loop.torn import torn_step, without_logged
from autopilot.loop.verify import run_verify
from autopilot.loop.waits import Waits
from autopilot.runtime.notify import RunNotifier
from autopilot.store.events import EventLog
from autopilot.store.paths import run_dir
from autopilot.store.private import write_private
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore
from autopilot.workspace.marks import GitWorkspace, Workspace
from autopilot.workspace.worktrees import RunWorktree


class Driver:
    """Drives one armed run to its terminal event.

    Args:
        root: The runs root.
        run_id: The run to drive (armed, not terminated).
        adapter: The agent adapter.
        clock: Wall and monotonic time, and the sleep of every wait.
        interrupts: Flags set by signal handlers.
        locks: Taken for the whole drive (``runtime.locks.RunLocks``).
        on_event: Called with every event written (for the plain or live view).
        base_env: The environment agents inherit (default ``os.environ``).
        runner: Starts agent processes (default: real subprocesses).
        workspace: Marks the work tree (default: git in the run's directory).
        store: The run's ``state.json`` (default: the run folder's).

    Raises:
        StateFileError: the run's state cannot be read, or names no work tree or
            prompt (a run written by another implementation).
    """

    def __init__(
        self,
        root: Path,
        run_id: str,
        adapter: AgentAdapter,
        clock: Clock,
        interrupts: Interrupts,
        *,
        locks: DriverLocks,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        base_env: dict[str, str] | None = None,
        runner: AgentRunner | None = None,
        workspace: Workspace | None = None,
        store: StateStore | None = None,
    ) -> None:
        self.run_id = run_id
        self.run_dir = RunDir(run_dir(root, run_id))
        self.clock, self.interrupts = clock, interrupts
        self.log = EventLog(self.run_dir.events, run_id, clock.now_ms)
        self.record = RunRecord(store or StateStore(self.run_dir.state), self.log, on_event)
        # The one guard between the agent's output and the loop: an adapter that
        # raises on damaged output is a warning, never the end of the run.
        self.adapter = guarded(adapter, self._warn)
        state = self.record.state
        if state.cwd is None or (state.prompt.text is None and state.prompt.path is None):
            raise StateFileError(f"{self.run_dir.state} has no work tree or prompt to run")
        if state.mode == PARALLEL_MODE:
            raise UsageError(f"run {run_id} is a parallel run: its agents' runs are driven")
        self.cwd = Path(state.cwd)
        # The limits are the armed event's, never state.json's alone (``armed_limits``).
        self._held = held_limits(self.run_dir.events, run_id, state.config)
        self.config = self._held if not isinstance(self._held, str) else state.config
        self.policy = self.config.policy(state.mode)
        self.notifier = RunNotifier(self.config.notify, run_id) if self.config.notify else None
        self.record.notify = self.notifier
        self.prompts = PromptReader(state.prompt, self.cwd, self._warn)
        place = RunWorktree.from_json(state.extra.get("worktree"))
        self.workspace = workspace or GitWorkspace(
            self.cwd, self.run_dir.path, branch=place.branch if place else None
        )
        self.waits = Waits(self.record, clock, interrupts, self.cwd)
        self.briefing = Briefing(self.run_dir, self.record, self.cwd, clock, self.policy)
        self.launcher = Launcher(
            self.adapter,
            runner or SubprocessRunner(),
            self.record,
            self.cwd,
            base_env,
            run_id,
            should_kill=self.waits.kill_requested,
            handoff=self.briefing,
        )
        self._locks = locks
        # Checks and verify commands carry the run's id, so a relaunch after a crash
        # ends what they left running (``loop.descendants``).
        self.command_env = {**self.launcher.base_env, RUN_ID_ENV: run_id}
        self.lanes = run_lanes(root, run_id, state)
        self.backlog = backlog_shell(
            self.record, root, run_id, self.command_env, self.lanes, self.waits.kill_requested
        )
        if self.backlog is not None:  # an item's surface is checked against its start
            self.backlog.tree = self.workspace
        self._begun: Begun | None = None
        self._iterated = False  # this driver has run an iteration

    @property
    def state(self) -> RunState:
        """The driver's own (authoritative) copy of the run's state."""
        return self.record.state

    def _warn(self, note: str, **fields: Any) -> None:
        self.record.emit(EventType.WARNING, note=note, **fields)

    def _report_notify_failures(self) -> None:
        if self.notifier is not None:
            for failure in self.notifier.drain_failures():
                self._warn(failure)

    def run(self) -> RunResult:
        """Iterate until a terminal event; returns how the run ended.

        Any unexpected error ends the run with one ``abort`` (reason ``disk_full`` or
        ``io_error`` when the run's files refuse a write, else ``internal_error``,
        with the message) before it is raised again, so no run is ever left dangling.

        Raises:
            RunLockedError: another driver holds the run or the project.
            UsageError: the run has already ended.
        """
        self._locks.acquire()
        try:
            # Checked under the lock: another driver may have just ended the run.
            self.record.state = reconcile_terminal(self.run_dir, self.record.store, self.log)
            if self.state.terminated:
                raise UsageError(
                    f"run {self.run_id} has already ended ({self.state.termination_reason})"
                )
            try:
                return self._run()
            except BaseException as error:
                self._end_after(error)
                raise
        finally:
            if self.notifier is not None:
                self.notifier.close()
                self._report_notify_failures()
            self.log.close()
            self._locks.release()

    def _run(self) -> RunResult:
        remove_stale_temp_files(self.run_dir)
        ended = self._relaunch_repairs()
        if ended is not None:
            return ended
        self._checkpoint(0)  # the work tree as the run finds it, before the memory file
        self.briefing.start()
        self._attach()
        while True:
            ended = self._boundary()
            if ended is not None:
                return ended
            step = self._iteration()  # start, agent, conclude
            self._iterated = True
            self.briefing.keep_memory()
            ended = self._apply(step)
            if ended is not None:
                return ended
            if step.decision.wait_until_ms:
                self.waits.wait(step.decision)

    def _apply(self, step: Step) -> RunResult | None:
        """Apply a step durably, and what follows it for the agent's messages."""
        spend_before = self.state.spend
        if step.ending is not None:
            self.briefing.undelivered()
        self.record.apply(step)
        if step.change.max_iterations is not None:  # the budget was extended
            self.config = self.state.config
            self.policy = self.config.policy(self.state.mode)
        self.briefing.after(spend_before, ended=step.ending is not None)
        ending = step.ending
        if ending is None:
            return None
        return RunResult(self.run_id, ending.event, ending.reason, ending.note, ending.exit_code)

    # -- before the first iteration ------------------------------------------------

    def _relaunch_repairs(self) -> RunResult | None:
        """Spend is the larger of state.json's and the log's; an attempt a dead
        driver left open is concluded (its logged decision, else its saved output),
        also one whose agent started before the driver recorded it. An attempt whose
        step was cut short on the log (``loop.torn``) is told and charged once.
        First, the limits are the armed event's (put back where state.json differs);
        a log that cannot tell them ends the run (``tampered``)."""
        if isinstance(self._held, str):
            note = f"{self._held}, so the run's budgets cannot be checked"
            return self._finish(EventType.ABORT, Reason.TAMPERED, note)
        put_back_limits(self.record, self._held)
        torn = torn_step(self.run_dir, self.state)
        if not torn:
            restore_spend(self.record, self.run_dir)
        now_ms = self.clock.now_ms()
        attempt = attempt_left(self.record, self.run_dir, self.adapter, now_ms)
        ended = None
        if attempt is not None:
            attempt = with_commits_since_start(attempt, self.run_dir.events, self.workspace)
            if self.backlog is not None:
                attempt = concluded_after_crash(
                    self.backlog, attempt, self.run_dir.path, self.workspace, self.cwd
                )
                self.briefing.reopened(attempt)
            step = conclude(self._loop_state(), attempt, self.policy, now_ms)
            ended = self._apply(without_logged(step, torn))
        if torn and ended is None:
            restore_spend(self.record, self.run_dir)
        return ended

    def _attach(self) -> None:
        needed = self.adapter.env_needed
        self.record.attach(
            agent=self.adapter.name,
            verified_version=self.adapter.verified_version,
            agent_env=tuple(sorted(k for k in self.launcher.base_env if env_matches(k, needed))),
        )
        if not self.workspace.repository and self.workspace.gone() is None:
            self._warn(
                f"{self.cwd} is not a git repository: progress is unknown, so stagnation "
                "counts only identical responses, and there are no checkpoints"
            )

    def _checkpoint(self, iteration: int) -> None:
        """Checkpoint the work tree (0: the baseline) as a ``checkpoint`` event; a
        failure is a warning and never ends the run. Off with ``--no-checkpoints``."""
        if self.config.checkpoints != "on":
            return
        facts = self.workspace.checkpoint(iteration)
        problem = self.workspace.problem()
        if problem is not None:
            self._warn(problem, iteration=iteration)
        if facts is not None:
            self.record.emit(EventType.CHECKPOINT, **facts.event_fields())

    # -- the boundary ----------------------------------------------------------------

    def _boundary(self) -> RunResult | None:
        """Honour stop and pause before starting an iteration; check budgets; wait
        out a usage limit a relaunch found in progress."""
        self._report_notify_failures()
        while True:
            state = self.record.refresh()
            if self.waits.stopping(state):
                return self._finish(EventType.ABORT, Reason.USER_STOPPED, self.waits.stop_note())
            gone = self.workspace.gone()
            if gone is not None:
                return self._finish(EventType.ABORT, Reason.WORKSPACE_GONE, gone)
            off = self.waits.off()
            if state.paused or off:
                self.waits.hold_paused("OFF file present" if off and not state.paused else None)
                continue
            spend = state.spend
            if self.lanes is not None:  # the lanes of a parallel run share one budget
                spend = self.lanes.shared_spend(
                    spend,
                    starting=not state.iteration_open,
                    max_iterations=self.policy.max_iterations,
                )
            reached = budget_reached(
                spend_counters(spend), self.policy, iterations=not state.iteration_open
            )
            if reached is not None:
                reason, budget = reached
                note = budget_note(reason, budget)
                if self.lanes:
                    note = f"{note} (every lane's spend)"
                elif not self._iterated:  # the spend this driver found, not its own
                    note = f"{note} (spend restored from state.json)"
                return self._finish(EventType.ABORT, reason, note)
            until = state.waiting_until_ms
            if until is None or until <= self.clock.now_ms():
                if self.backlog is None:
                    return None
                found = backlog_boundary(self.backlog, state, self.waits)
                if found.done:
                    return self._finish(EventType.COMPLETE, Reason.BACKLOG_DONE, found.done)
                if found.stop is not None:
                    return self._finish(EventType.ABORT, *found.stop)
                if not found.again:
                    self._begun = found.begun
                    return None
                continue
            note = "resuming the wait after a restart"
            self.waits.wait(Decision(Action.WAIT, "rate_limited", note=note, wait_until_ms=until))

    # -- one iteration ---------------------------------------------------------------

    def _iteration(self) -> Step:
        """Start the next iteration, run the agent, and conclude the attempt."""
        state = self.state
        number = state.iteration + (0 if state.iteration_open else 1)
        begun, self._begun = self._begun, None
        base = begun.prompt if begun is not None and begun.prompt else self.prompts.read()
        prompt = self.briefing.prompt(base, number)
        attempt = self.run_dir.new_attempt(number)
        write_private(attempt.prompt, prompt.encode("utf-8", "replace"))
        before = self.workspace.mark()
        if begun is not None and begun.item is not None:
            record_started(attempt.path, begun.item, number, before)
        started = self.clock.monotonic()
        head = {"head": before.head} if before.head else {}
        self.record.emit(EventType.ITERATION_START, iteration=number, **head)
        resume = self.launcher.resume_session()
        texts: list[str] = []
        result, parser = self.launcher.run(number, prompt, attempt, resume, texts)
        after = self.workspace.mark()
        moved = self.workspace.head_move(before, after)
        if moved is not None:
            self.record.emit(EventType.HEAD_MOVED, iteration=number, **moved.event_fields())
        kept = self.workspace.keep_branch()  # before its work is checkpointed or landed
        if kept is not None:
            self._warn(kept, iteration=number)
        self._checkpoint(number)
        facts = attempt_of(
            adapter=self.adapter,
            number=number,
            folder=attempt.path.name,
            prompt=prompt,
            result=result,
            raw_report=parser.report(),
            baseline=state.usage_baseline,
            now_ms=self.clock.now_ms(),
            workspace=self.workspace,
            before=before,
            after=after,
            started_monotonic=started,
            now_monotonic=self.clock.monotonic,
            resumed_session=resume,
            last_root_text=texts[-1] if texts else None,
        )
        if self.backlog and begun and begun.item and not facts.usage_limited:
            paths = self.workspace.changed_paths(before, self.workspace.mark()) or []
            facts = with_item_facts(self.backlog, facts, attempt.path, paths, self.cwd)
            self.briefing.reopened(facts)
        for note in self.workspace.take_warnings():  # git timed out or could not run
            self._warn(note, iteration=number)
        step = conclude(self._loop_state(), facts, self.policy, self.clock.now_ms())
        if not step.awaits_verification:
            return step
        verification = run_verify(
            self.config.verify,
            cwd=self.cwd,
            folder=attempt.path,
            timeout_seconds=self.config.check_timeout_seconds,
            env=self.command_env,
            should_stop=self.waits.kill_requested,
        )
        step = conclude(
            self._loop_state(),
            replace(facts, verification=verification),
            self.policy,
            self.clock.now_ms(),
        )
        if step.ending is None and verification.failure:
            self.briefing.notice(MessageKind.VERIFY_FAILED, verify_notice(verification))
        return step

    def _loop_state(self) -> LoopState:
        return loop_state(
            self.state,
            interrupted=self.interrupts.stop,
            stop_note=self.waits.stop_note(),
            agent=self.adapter.name,
        )

    # -- the end ---------------------------------------------------------------------

    def _finish(self, terminal: EventType, reason: str, note: str | None) -> RunResult:
        """End the run at a boundary (or after an error), saying what never reached
        the agent."""
        self.briefing.undelivered()
        return self.record.finish(terminal, reason, note)

    def _end_after(self, error: BaseException) -> None:
        """An error escaped the loop: end the run with one ``abort`` if it has not
        ended (best effort: the disk may be what failed). The run's files (or
        ``tasks.jsonl``) refusing a write is ``disk_full`` or ``io_error``; anything
        else ``internal_error``."""
        if self.state.terminated or not isinstance(error, Exception):
            return
        written = OSError | StateFileError | BacklogWriteError
        number = error.errno if isinstance(error, written) else None
        if number is not None:
            reason = io_reason(number)
            note = f"the run's files cannot be written: {error}"
        else:
            reason, note = Reason.INTERNAL_ERROR, f"internal error: {type(error).__name__}: {error}"
        try:
            self._finish(EventType.ABORT, reason, note)
        except Exception:
            pass
