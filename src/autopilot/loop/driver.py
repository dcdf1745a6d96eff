"""The driver: iterate an armed run (see ``arming``) until it ends.

Each iteration is one visible sequence (``Driver._run``, the phases of
``docs/architecture.md``, "The flow of one iteration"): **boundary** (stop, pause,
budgets, a usage-limit wait), **start** (the prompt saved, the work tree marked,
``iteration_start``), **agent** (the runner starts the adapter's argv and streams its
output through the adapter's parser), **checkpoint** (the work tree marked again and
checkpointed), **conclude** (``core.step.conclude``: pure, from the run before and
the attempt's facts to the decision, the new counters and the events) and **apply**
(``RunRecord.apply``: events appended and fsynced, then ``state.json``). Before the
first, a relaunch concludes the attempt a crash cut short (``loop.relaunch``). What
the agent is told beyond its prompt — queued messages, the memory file, budget
warnings — goes through ``Briefing``. Signal handlers only set flags
(``Interrupts``). What the driver is built from is wired in ``loop.parts``; the
agent runner, the workspace (git) and the clock are injected, so every path runs
in-process in tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from autopilot.agents.base import AgentAdapter
from autopilot.core.delivery import MessageKind
from autopilot.core.ending import RunResult
from autopilot.core.policy import Decision
from autopilot.core.step import Step, budget_ending, conclude
from autopilot.core.structs import replace
from autopilot.core.verification import verify_notice
from autopilot.core.vocabulary import Action, EventType, Reason
from autopilot.errors import UsageError
from autopilot.loop.armed_limits import put_back_limits
from autopilot.loop.clock import Clock
from autopilot.loop.observe import attempt_of
from autopilot.loop.parts import RunParts, Seams, assemble
from autopilot.loop.recovery import reconcile_terminal, remove_stale_temp_files, restore_spend
from autopilot.loop.relaunch import crashed_attempt
from autopilot.loop.runner import DriverLocks
from autopilot.loop.signals import Interrupts
from autopilot.loop.torn import without_logged
from autopilot.store.private import write_private

if TYPE_CHECKING:  # a plain run loads no backlog module (tests/cli/test_startup_imports.py)
    from autopilot.core.backlog_step import Begun


class Driver:
    """Drives one armed run to its terminal event.

    Args:
        root: The runs root.
        run_id: The run to drive (armed, not terminated).
        adapter: The agent adapter.
        clock: Wall and monotonic time, and the sleep of every wait.
        interrupts: Flags set by signal handlers.
        locks: Taken for the whole drive (``runtime.locks.RunLocks``).
        **seams: The agent runner, the workspace, the state store, the event
            callback and the agents' environment, injected (``loop.parts.Seams``).

    Raises:
        StateFileError: the run's state cannot be read, or names no work tree or
            prompt (a run written by another implementation).
        UsageError: the run is a parallel run.
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
        **seams: Unpack[Seams],
    ) -> None:
        self.run_id = run_id
        self.parts: RunParts = assemble(root, run_id, adapter, clock, interrupts, **seams)
        self._locks = locks
        self._begun: Begun | None = None
        self._iterated = False  # this driver has run an iteration

    def run(self) -> RunResult:
        """Iterate until a terminal event; returns how the run ended.

        Any unexpected error ends the run with one ``abort`` (reason ``disk_full`` or
        ``io_error`` when the run's files refuse a write, else ``internal_error``,
        with the message) before it is raised again, so no run is ever left dangling.

        Raises:
            RunLockedError: another driver holds the run or the project.
            UsageError: the run has already ended.
        """
        p = self.parts
        self._locks.acquire()
        try:
            # Checked under the lock: another driver may have just ended the run.
            p.record.state = reconcile_terminal(p.run_dir, p.record.store, p.log)
            if p.state.terminated:
                raise UsageError(
                    f"run {self.run_id} has already ended ({p.state.termination_reason})"
                )
            try:
                return self._run()
            except BaseException as error:
                p.end_after(error)
                raise
        finally:
            p.close()
            self._locks.release()

    def _run(self) -> RunResult:
        p = self.parts
        remove_stale_temp_files(p.run_dir)
        ended = self._relaunch_repairs()
        if ended is not None:
            return ended
        p.checkpoint(0)  # the work tree as the run finds it, before the memory file
        p.briefing.start()
        p.attach()
        while True:
            ended = self._boundary()
            if ended is not None:
                return ended
            step = self._iteration()  # start, agent, checkpoint, conclude
            self._iterated = True
            p.briefing.keep_memory()
            ended = self._apply(step)
            if ended is not None:
                return ended
            if step.decision.wait_until_ms:
                p.waits.wait(step.decision)

    def _apply(self, step: Step) -> RunResult | None:
        """Apply a step durably, and what follows it for the agent's messages."""
        p = self.parts
        spend_before = p.state.spend
        if step.ending is not None:
            p.briefing.undelivered()
        p.record.apply(step, hold=p.backlog is None and p.lanes is None)
        if step.change.max_iterations is not None:  # the budget was extended
            p.take_config()
        p.briefing.after(spend_before, ended=step.ending is not None)
        ending = step.ending
        if ending is None:
            return None
        return RunResult(self.run_id, ending.event, ending.reason, ending.note, ending.exit_code)

    def _relaunch_repairs(self) -> RunResult | None:
        """Each limit is the stricter of state.json's and the armed event's (put
        back into state.json where it was looser; a log that cannot tell them ends
        the run, ``tampered``). The attempt a dead
        driver left open is concluded and applied like any other
        (``relaunch.crashed_attempt``: charged once, spend restored)."""
        p = self.parts
        if isinstance(p.held, str):
            note = f"{p.held}, so the run's budgets cannot be checked"
            return p.finish(EventType.ABORT, Reason.TAMPERED, note)
        put_back_limits(p.record, p.held)
        now_ms = p.clock.now_ms()
        crashed = crashed_attempt(
            p.record, p.run_dir, p.adapter, p.workspace, p.backlog, p.cwd, now_ms
        )
        ended = None
        if crashed.attempt is not None:
            if p.backlog is not None:
                p.briefing.reopened(crashed.attempt)
            step = conclude(p.loop_state(), crashed.attempt, p.policy, now_ms)
            ended = self._apply(without_logged(step, crashed.torn))
        if crashed.torn and ended is None:
            restore_spend(p.record, p.run_dir)
        return ended

    def _boundary(self) -> RunResult | None:
        """Honour stop and pause before starting an iteration; check budgets; wait
        out a usage limit a relaunch found in progress."""
        p = self.parts
        p.report_notify_failures()
        while True:
            state = p.record.refresh()
            if p.waits.stopping(state):
                return p.finish(EventType.ABORT, Reason.USER_STOPPED, p.waits.stop_note())
            gone = p.workspace.gone()
            if gone is not None:
                return p.finish(EventType.ABORT, Reason.WORKSPACE_GONE, gone)
            off = p.waits.off()
            if state.paused or off:
                p.waits.hold_paused("OFF file present" if off and not state.paused else None)
                continue
            spend = state.spend
            if p.lanes is not None:  # the lanes of a parallel run share one budget
                spend = p.lanes.shared_spend(
                    spend,
                    starting=not state.iteration_open,
                    max_iterations=p.policy.max_iterations,
                )
            reached = budget_ending(
                spend,
                p.policy,
                iteration_open=state.iteration_open,
                lanes=bool(p.lanes),
                restored=not self._iterated,  # the spend this driver found, not its own
            )
            if reached is not None:
                return p.finish(EventType.ABORT, *reached)
            until = state.waiting_until_ms
            if until is None or until <= p.clock.now_ms():
                if p.backlog is None:
                    return None
                from autopilot.loop.backlog_run import backlog_boundary

                found = backlog_boundary(p.backlog, state, p.waits)
                if found.done:
                    return p.finish(EventType.COMPLETE, Reason.BACKLOG_DONE, found.done)
                if found.stop is not None:
                    return p.finish(EventType.ABORT, *found.stop)
                if not found.again:
                    self._begun = found.begun
                    return None
                continue
            note = "resuming the wait after a restart"
            p.waits.wait(Decision(Action.WAIT, "rate_limited", note=note, wait_until_ms=until))

    def _iteration(self) -> Step:
        """Start the next iteration, run the agent, checkpoint the work tree, and
        conclude the attempt."""
        p = self.parts
        state = p.state  # start
        number = state.iteration + (0 if state.iteration_open else 1)
        begun, self._begun = self._begun, None
        base = begun.prompt if begun is not None and begun.prompt else p.prompts.read()
        prompt = p.briefing.prompt(base, number)
        attempt = p.run_dir.new_attempt(number)
        write_private(attempt.prompt, prompt.encode("utf-8", "replace"))
        before = p.marks.start()  # the last end mark, when it may serve
        if begun is not None and begun.item is not None:
            from autopilot.loop.backlog_recovery import record_started

            record_started(attempt.path, begun.item, number, before, p.backlog)
        started = p.clock.monotonic()
        head = {"head": before.head} if before.head else {}
        p.record.emit(EventType.ITERATION_START, iteration=number, **head)
        resume = p.launcher.resume_session()  # agent
        texts: list[str] = []
        result, parser = p.launcher.run(number, prompt, attempt, resume, texts)
        after = p.marks.end()  # checkpoint
        moved = p.workspace.head_move(before, after)
        if moved is not None:
            p.record.emit(EventType.HEAD_MOVED, iteration=number, **moved.event_fields())
        kept = p.workspace.keep_branch()  # before its work is checkpointed or landed
        if kept is not None:
            p.warn(kept, iteration=number)
            p.marks.forget()
        p.checkpoint(number)
        facts = attempt_of(  # conclude
            adapter=p.adapter,
            number=number,
            folder=attempt.path.name,
            prompt=prompt,
            result=result,
            raw_report=parser.report(),
            baseline=state.usage_baseline,
            now_ms=p.clock.now_ms(),
            workspace=p.workspace,
            before=before,
            after=after,
            started_monotonic=started,
            now_monotonic=p.clock.monotonic,
            resumed_session=resume,
            last_root_text=texts[-1] if texts else None,
        )
        if p.backlog and begun and begun.item and not facts.usage_limited:
            from autopilot.loop.backlog_run import with_item_facts

            paths = p.workspace.changed_paths(before, p.workspace.mark()) or []
            facts = with_item_facts(p.backlog, facts, attempt.path, paths, p.cwd)
            p.briefing.reopened(facts)
        for note in p.workspace.take_warnings():  # git timed out or could not run
            p.warn(note, iteration=number)
        step = conclude(p.loop_state(), facts, p.policy, p.clock.now_ms())
        if not step.awaits_verification:
            return step
        from autopilot.loop.verify import run_verify  # its checks load psutil

        verification = run_verify(
            p.config.verify,
            cwd=p.cwd,
            folder=attempt.path,
            timeout_seconds=p.config.check_timeout_seconds,
            env=p.command_env,
            should_stop=p.waits.kill_requested,
        )
        p.marks.forget()  # the verify command ran in the work tree
        facts = replace(facts, verification=verification)
        step = conclude(p.loop_state(), facts, p.policy, p.clock.now_ms())
        if step.ending is None and verification.failure:
            p.briefing.notice(MessageKind.VERIFY_FAILED, verify_notice(verification))
        return step
