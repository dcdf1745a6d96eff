"""One Stop of an armed run's own session, recorded the driver's way.

A hook run has no driver process: each Stop is a short-lived ``autopilot hook
…-stop`` that holds the registry's lock. Iteration N starts when a Stop answers with
a block (the block's reason is its prompt) and ends at the next Stop of the session;
the first Stop after arming starts iteration 1. Ending an iteration goes through the
same ``core.step.conclude`` as the driver and is written through ``loop.record``
(events first, then ``state.json``), so ``status``, ``watch``, ``list``, ``replay``
and ``stats`` read a hook run like any other. Messages from the inbox reach the agent
through the driver's ``Briefing`` (``loop.delivery``'s one ``deliver()``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from autopilot.core.attempt import Attempt
from autopilot.core.change import LoopState
from autopilot.core.delivery import MessageKind
from autopilot.core.ending import describe_ending
from autopilot.core.step import Step, budget_ending, conclude
from autopilot.core.structs import replace
from autopilot.core.vocabulary import Action, EndedBy, EventType, Reason, RunStatus
from autopilot.hook import slow_checks
from autopilot.hook.backlog import HookBacklog
from autopilot.hook.cut_short import (
    begin_ending,
    clean_up_after,
    ending_done,
    read_ending,
    seen_ending,
    settle_logged,
    start_logged,
)
from autopilot.hook.decide import LetStopReason, StopAction, StopDecision
from autopilot.hook.inputs import keep_going, let_stop
from autopilot.hook.transcript import TokenTotals, TurnView, read_turn
from autopilot.hook.tree_mark import mark_now, write_tree_mark
from autopilot.loop.armed_limits import held_config, logged_limits, put_back_limits
from autopilot.loop.briefing import Briefing
from autopilot.loop.clock import Clock
from autopilot.loop.prompt import PromptReader
from autopilot.loop.record import RunRecord
from autopilot.loop.step_state import loop_state
from autopilot.store.events import EventLog, read_events
from autopilot.store.hook_registry import Arming
from autopilot.store.private import make_private_dir, write_private
from autopilot.store.run_state import RunState
from autopilot.store.rundir import RunDir
from autopilot.store.state import StateStore

_NEXT_ITERATION_HELD = {
    LetStopReason.PAUSED: "paused: the session stops; after autopilot resume, your next "
    "prompt in it picks the run up",
    LetStopReason.OFF_SWITCH: ".autopilot/OFF is set: the session stops; remove it and "
    "prompt again to go on",
    LetStopReason.BLOCK_CAP: "Claude Code allows no more consecutive continuations in this "
    "turn: the session stops; your next prompt in it picks the run up",
    LetStopReason.INTERRUPTED: "interrupted: the session stops; your next prompt in it "
    "picks the run up",
    LetStopReason.COMPACTION: "the session is compacting: it stops; your next prompt in it "
    "picks the run up",
}


@dataclass(frozen=True)
class HookOutcome:
    """What one Stop did.

    Attributes:
        answer: The hook's stdout ("" lets the session stop).
        arming: The run's arming to keep, or None when the run has ended (its
            registry entry goes).
    """

    answer: str
    arming: Arming | None


def _tokens(turn: TurnView | None) -> TokenTotals | None:
    return turn.tokens if turn is not None else None


class HookStop:
    """The run's side of one Stop.

    Args:
        root: The runs root.
        arming: The run's arming (already matched to this session).
        clock: Wall and monotonic time.
        state_store: Opens the run's ``state.json`` (its writer is the seam a full
            disk is tried through).
    """

    def __init__(
        self,
        root: Path,
        arming: Arming,
        clock: Clock,
        state_store: Callable[[Path], StateStore] = StateStore,
    ) -> None:
        self.arming = arming
        self.clock = clock
        self.folder = RunDir(root / arming.run_id)
        self.log = EventLog(self.folder.events, arming.run_id, clock.now_ms)
        self.record = RunRecord(state_store(self.folder.state), self.log)
        state = self.record.state
        self.cwd = Path(state.cwd or arming.project)
        # Each limit is the stricter of state.json's and the armed event's (``armed_limits``).
        self.logged = logged_limits(read_events(self.folder.events), arming.run_id, state.config)
        self.policy = held_config(state, self.logged).policy()
        self.briefing = Briefing(self.folder, self.record, self.cwd, clock, self.policy)
        self.backlog = (
            HookBacklog(root, arming.run_id, self.cwd, self.folder.path, self.record.emit, state)
            if arming.backlog
            else None
        )

    def close(self) -> None:
        """Close the event log."""
        self.log.close()

    # -- the decision's effects ------------------------------------------------------

    def handle(self, decision: StopDecision, turn: TurnView | None) -> HookOutcome:
        """Record the Stop and answer it.

        Raises:
            StateFileError: the run's state cannot be written.
        """
        if decision.action is StopAction.LET_STOP and decision.reason is LetStopReason.RUN_ENDED:
            return HookOutcome(let_stop(), None)
        ended = settle_logged(self.record, self.folder)
        if ended is not None:
            return HookOutcome(
                let_stop(f"autopilot: run {self.arming.run_id} ended: {ended}"), None
            )
        if isinstance(self.logged, str):
            why = f"{self.logged}, so the run's budgets cannot be checked"
            self.record.finish(EventType.ABORT, Reason.TAMPERED, why)
            return HookOutcome(let_stop(f"autopilot: run {self.arming.run_id} ended: {why}"), None)
        put_back_limits(self.record, self.logged)
        if self.backlog is None:
            return self._handle(decision, turn, 0)
        with slow_checks.busy(self.folder.path, self.record.state) as cut:
            return self._handle(decision, turn, cut)

    def _handle(self, decision: StopDecision, turn: TurnView | None, cut: int) -> HookOutcome:
        """``handle``'s work after ``cut`` Stops in a row were cut short at this point
        (``hook.slow_checks``: from ``GIVE_UP_AFTER`` on, no check runs; ``_give_up``)."""
        state = self.record.state
        give_up = cut >= slow_checks.GIVE_UP_AFTER
        if state.iteration_open:
            final = decision.final_message if decision.action is StopAction.ITERATE else None
            step = self._conclude(final, turn, checks=not give_up)
            if step.ending is not None:
                return HookOutcome(self._ended_note(step), None)
            if give_up:
                return self._give_up(f"ending iteration {state.iteration}", turn)
            if self.backlog is not None:  # a new point: the count starts again
                slow_checks.mark_busy(self.folder.path, state.iteration, False, 0)
        elif decision.reason is LetStopReason.STOP_REQUESTED:
            result = self.record.finish(EventType.ABORT, Reason.USER_STOPPED, self._stop_note())
            self.briefing.undelivered()
            return HookOutcome(let_stop(f"autopilot: run {result.run_id} stopped"), None)
        if decision.action is StopAction.LET_STOP:
            held = _NEXT_ITERATION_HELD.get(decision.reason) if decision.reason else None
            arming = replace(
                self.arming, block_streak=0, last_assistant_key=_key(turn, self.arming)
            )
            note = f"autopilot: run {self.arming.run_id} {held}" if held else None
            return HookOutcome(let_stop(note), arming)
        if give_up and not state.iteration_open and not self.record.state.gate:
            return self._give_up(f"starting the iteration after {state.iteration}", turn)
        return self._start_next(decision, turn)

    def _stop_note(self) -> str:
        reason = self.record.state.stop_reason
        return str(reason) if reason else "stop requested"

    def _ended_note(self, step: Step) -> str:
        ending = step.ending
        assert ending is not None
        words = describe_ending(ending.reason, completed=ending.event is EventType.COMPLETE)
        return let_stop(f"autopilot: run {self.arming.run_id} ended: {words}")

    def _loop_state(self) -> LoopState:
        return loop_state(
            self.record.state,
            interrupted=False,
            stop_note=self._stop_note(),
            agent=self.record.state.agent,
        )

    def close_stopped(self, note: str) -> RunState:
        """End the run for ``autopilot stop`` from another terminal: the open
        iteration, if any, ends through ``conclude`` (one ``iteration_end``, ended by
        ``stopped``, charged what the transcript shows so far), then the run
        (``abort``, ``user_stopped``). Call holding the registry's lock.

        Raises:
            StateFileError: the run's state cannot be written.
        """

        def request(s: RunState) -> None:
            s.stop_requested, s.stop_reason = True, note

        if settle_logged(self.record, self.folder) is not None:
            return self.record.state
        state = self.record.update(request)
        if state.iteration_open:
            turn = read_turn(self.arming.agent, self.arming.transcript_path or "")
            step = self._conclude(None, turn, EndedBy.STOPPED)
            if step.ending is not None:
                return self.record.state
        self.briefing.undelivered()
        self.record.finish(EventType.ABORT, Reason.USER_STOPPED, note)
        return self.record.state

    def close_unclaimed(self, note: str) -> RunState:
        """End a run that no session claimed within its claim window (``abort``,
        ``unclaimed``); it never started an iteration. Call holding the registry's lock.

        Raises:
            StateFileError: the run's state cannot be written.
        """
        self.briefing.undelivered()
        self.record.finish(EventType.ABORT, Reason.UNCLAIMED, note)
        return self.record.state

    def _give_up(self, where: str, turn: TurnView | None) -> HookOutcome:
        """The run asks a person (``hook.slow_checks.ask_person``); the session stops."""
        assert self.backlog is not None
        checks = self.backlog.checks_named()
        note = slow_checks.ask_person(self.record, self.arming.run_id, where, checks)
        arming = replace(self.arming, block_streak=0, last_assistant_key=_key(turn, self.arming))
        return HookOutcome(let_stop(note), arming)

    def _conclude(
        self,
        final: str | None,
        turn: TurnView | None,
        ended_by: EndedBy = EndedBy.EXIT,
        *,
        checks: bool = True,
    ) -> Step:
        """End the open iteration through ``conclude`` and write it (``final``: the
        turn's text in which the completion promise is looked for). An iteration a
        Stop was cut short while ending is ended from what that Stop saw
        (``hook.cut_short``), ``endedBy`` ``killed``. Without ``checks`` the
        running item is left as it is (its reports wait for the next end)."""
        state = self.record.state
        number = state.iteration
        folder = self.folder.attempt(number).path
        ending = read_ending(folder, number)
        if ending is not None:
            ended = clean_up_after(self.arming.run_id, self.folder.path, ending)
            self._warn(
                f"the Stop that ended iteration {number} was cut short; it is ended from "
                f"what that Stop saw ({ended} of its check processes ended)"
            )
            ended_by = EndedBy.KILLED
        else:
            ending = seen_ending(
                self.arming,
                number,
                folder,
                self.cwd,
                final,
                turn,
                self.clock.now_ms(),
                changed=self.backlog is not None,
                warn=self._warn,
            )
            make_private_dir(folder, exist_ok=True)
            begin_ending(folder, ending)
        attempt = Attempt(
            number=number,
            folder=folder.name,
            prompt=_read_prompt(self.folder, number),
            ended_by=ended_by,
            exit_code=0,
            result_seen=True,
            final_message=ending.final_message,
            last_root_text=ending.final_message,
            tool_calls=None,
            session_id=self.arming.session_id,
            input_tokens=ending.input_tokens,
            output_tokens=ending.output_tokens,
            cost_usd=ending.cost_usd,
            progress=ending.progress,
            duration_ms=ending.duration_ms,
        )
        if self.backlog is not None and checks:
            attempt = self.backlog.with_item(attempt, folder, ending.changed_paths)
            if attempt.backlog is not None and attempt.backlog.reopened_notice:
                self.briefing.notice(MessageKind.REOPENED, attempt.backlog.reopened_notice)
        now_ms = self.clock.now_ms()
        step = conclude(self._loop_state(), attempt, self.policy, now_ms)
        spend_before = state.spend
        if step.ending is not None:
            self.briefing.undelivered()
        self.record.apply(step)
        ending_done(folder)
        self.briefing.after(spend_before, ended=step.ending is not None)
        if step.decision.action is Action.PAUSE:
            self.record.emit(EventType.PAUSE, iteration=number)
            self.record.update(lambda s: setattr(s, "status", RunStatus.PAUSED))
        return step

    def _start_next(self, decision: StopDecision, turn: TurnView | None) -> HookOutcome:
        """Start the next iteration: its prompt is the block's reason."""
        state = self.record.refresh()
        if state.stop_requested or state.stop_now:  # asked while this Stop was answered
            self.briefing.undelivered()
            result = self.record.finish(EventType.ABORT, Reason.USER_STOPPED, self._stop_note())
            return HookOutcome(let_stop(f"autopilot: run {result.run_id} stopped"), None)
        reached = budget_ending(
            state.spend, self.policy, iteration_open=False, lanes=False, restored=False
        )
        if reached is not None:
            reason, note = reached
            self.briefing.undelivered()
            self.record.finish(EventType.ABORT, reason, note)
            return HookOutcome(let_stop(f"autopilot: run {self.arming.run_id} ended: {note}"), None)
        number = state.iteration + 1
        if number == 1:
            self.briefing.start()  # the memory file, as the driver makes it
        if self.backlog is not None:
            found = self.backlog.boundary(self.record)
            if found.done is not None:
                self.briefing.undelivered()
                self.record.finish(EventType.COMPLETE, Reason.BACKLOG_DONE, found.done)
                ended = f"autopilot: run {self.arming.run_id} complete: {found.done}"
                return HookOutcome(let_stop(ended), None)
            if found.prompt is None:
                held = found.held or "has no work item that can start"
                self._warn(held)
                arming = replace(self.arming, block_streak=0)
                return HookOutcome(let_stop(f"autopilot: run {self.arming.run_id} {held}"), arming)
            base = found.prompt
        else:
            base = PromptReader(state.prompt, self.cwd, self._warn).read()
        prompt = self.briefing.prompt(base, number)
        # One attempt per iteration: a Stop that failed before recording its start
        # (a full disk) left the folder, and the next Stop begins it again there.
        attempt = self.folder.attempt(number)
        make_private_dir(attempt.path, exist_ok=True)
        write_private(attempt.prompt, prompt.encode("utf-8", "replace"))
        mark = mark_now(self.cwd, self._warn)
        write_tree_mark(attempt.path, mark)
        if self.backlog is not None:
            self.backlog.started(mark, number)
        now_ms = self.clock.now_ms()
        if not start_logged(self.folder.events, number):  # else logged by a Stop that failed
            self.record.emit(EventType.ITERATION_START, iteration=number)

        def open_iteration(s: RunState) -> None:
            s.iteration, s.iteration_open, s.status = number, True, RunStatus.RUNNING
            self.briefing.hand_off(s)

        self.record.update(open_iteration)
        self.briefing.handed(number)
        tokens = _tokens(turn)
        arming = replace(
            self.arming,
            block_streak=decision.block_streak + 1,
            last_assistant_key=_key(turn, self.arming),
            iteration_started_at_ms=now_ms,
            input_tokens=tokens.input_tokens if tokens else self.arming.input_tokens,
            output_tokens=tokens.output_tokens if tokens else self.arming.output_tokens,
            cost_usd=turn.cost_usd
            if turn is not None and turn.cost_usd is not None
            else self.arming.cost_usd,
            tree_head=mark.head,
            tree_fingerprint=mark.fingerprint,
        )
        note = f"autopilot: run {self.arming.run_id}, iteration {number}"
        return HookOutcome(keep_going(prompt, note), arming)

    def _warn(self, note: str) -> None:
        self.record.emit(EventType.WARNING, note=note)


def _key(turn: TurnView | None, arming: Arming) -> str | None:
    if turn is None or turn.newest_assistant_key is None:
        return arming.last_assistant_key
    return turn.newest_assistant_key


def _read_prompt(folder: RunDir, number: int) -> str:
    try:
        return folder.attempt(number).prompt.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
