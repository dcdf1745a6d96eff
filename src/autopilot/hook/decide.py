"""Which armed run a Stop belongs to, and what the hook does with it (pure).

``match_arming`` finds the run armed for the stopping session in the Stop's project:
its owner is the session (an empty owner never matches: a run is scoped to its
session, https://github.com/anthropics/claude-code/issues/26514), or it is still
unclaimed, armed for the same agent, and inside its claim window.
``decide_stop`` then lets the stop through (with the reason), asks the shell to read
the transcript again after a short wait (the flush race), or says that this stop is
an iteration whose final message the run's ``conclude`` step judges.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from autopilot.core.vocabulary import HookAgent
from autopilot.hook.inputs import STOP_EVENT, HookInput
from autopilot.hook.transcript import TurnEnd, TurnView
from autopilot.store.hook_registry import Arming
from autopilot.store.run_state import RunState

CLAUDE_BLOCK_CAP = 8
"""Claude Code 2.1.197 ends a turn after this many consecutive Stop hook blocks
(``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`` changes it; 0 or less: no cap)."""

FLUSH_WAIT_SECONDS = 2.0
"""How long the hook waits for the turn's final assistant entry to reach the transcript."""


@dataclass(frozen=True)
class Match:
    """The arming a Stop belongs to; ``claims`` when this Stop claims it now."""

    arming: Arming
    claims: bool


def _inside(cwd: str, project: str) -> bool:
    if not cwd or not project:
        return False
    cwd, project = os.path.normpath(cwd), os.path.normpath(project)
    return cwd == project or cwd.startswith(project.rstrip(os.sep) + os.sep)


def match_arming(hook: HookInput, armings: Sequence[Arming], now_ms: int) -> Match | None:
    """The arming ``hook``'s session owns, else the oldest one it may claim.

    A session id that is empty never matches and never claims; an arming owned by
    another session is never taken, nor one of this session armed for another project:
    the Stop's ``cwd`` must be the run's project or a folder inside it (so also when
    the project is the cwd's git toplevel), whichever way it matches — a session
    resumed in another project does not continue the run.
    """
    if not hook.session_id:
        return None
    for arming in armings:
        if arming.session_id and arming.session_id == hook.session_id:
            return Match(arming, claims=False) if _inside(hook.cwd, arming.project) else None
    for arming in armings:
        if (
            not arming.session_id
            and arming.agent is hook.agent
            and now_ms <= arming.claim_until_ms
            and _inside(hook.cwd, arming.project)
        ):
            return Match(arming, claims=True)
    return None


def claim_expired(arming: Arming, now_ms: int) -> bool:
    """True for an arming no session claimed before its claim window closed."""
    return not arming.session_id and arming.claim_until_ms < now_ms


@dataclass(frozen=True)
class RunRead:
    """The run's ``state.json`` as a Stop read it.

    Attributes:
        state: The run's state; None when it cannot be read.
        gone: The run's folder is gone (``state`` is None).
        problem: Why ``state`` is None, in words.
    """

    state: RunState | None
    gone: bool = False
    problem: str | None = None

    @property
    def armed_no_more(self) -> bool:
        """The run has ended or its folder is gone: its arming can be dropped."""
        return self.gone or (self.state is not None and self.state.terminated)


class StopAction(StrEnum):
    """What the hook does with a Stop."""

    LET_STOP = "let_stop"
    WAIT = "wait"
    ITERATE = "iterate"


class LetStopReason(StrEnum):
    """Why a Stop is let through."""

    NOT_STOP_EVENT = "not_stop_event"
    STATE_UNREADABLE = "state_unreadable"
    RUN_MISSING = "run_missing"
    RUN_ENDED = "run_ended"
    STOP_REQUESTED = "stop_requested"
    PAUSED = "paused"
    OFF_SWITCH = "off_switch"
    INTERRUPTED = "interrupted"
    COMPACTION = "compaction"
    BLOCK_CAP = "block_cap"


@dataclass(frozen=True)
class StopFacts:
    """Everything ``decide_stop`` looks at, read by the shell.

    Attributes:
        hook: The hook's input.
        arming: The run's arming (matched to this session).
        run: The run's ``state.json`` as read.
        off: The project's ``.autopilot/OFF`` exists.
        turn: The transcript's view; None when it is missing or unreadable.
        waited: The bounded wait for the transcript is over.
        block_cap: The CLI's cap on consecutive blocks (0: none).
    """

    hook: HookInput
    arming: Arming
    run: RunRead
    off: bool
    turn: TurnView | None
    waited: bool = False
    block_cap: int = CLAUDE_BLOCK_CAP


@dataclass(frozen=True)
class StopDecision:
    """What to do with a Stop.

    Attributes:
        action: Let it stop, wait and decide again, or run an iteration.
        reason: Why it is let through (``LET_STOP`` only).
        final_message: ``ITERATE``: the turn's assistant text in which the completion
            promise is looked for; None means "no promise", never "complete".
        block_streak: ``ITERATE``: the consecutive blocks before this one.
    """

    action: StopAction
    reason: LetStopReason | None = None
    final_message: str | None = None
    block_streak: int = 0


_TURN_REASONS = {
    TurnEnd.INTERRUPT: LetStopReason.INTERRUPTED,
    TurnEnd.COMPACTION: LetStopReason.COMPACTION,
}


def _let(reason: LetStopReason) -> StopDecision:
    return StopDecision(StopAction.LET_STOP, reason)


def _held_by_run(run: RunRead) -> LetStopReason | None:
    """Why the run's state lets the session stop: gone, unreadable, ended, a stop
    asked for (also ``stop --now``) or a pause asked for; None: it goes on."""
    state = run.state
    if state is None:
        return LetStopReason.RUN_MISSING if run.gone else LetStopReason.STATE_UNREADABLE
    if state.terminated:
        return LetStopReason.RUN_ENDED
    if state.stop_requested or state.stop_now:
        return LetStopReason.STOP_REQUESTED
    if state.paused:
        return LetStopReason.PAUSED
    return None


def decide_stop(facts: StopFacts) -> StopDecision:
    """Decide what the hook does with one Stop of the run's own session.

    Order: a non-Stop event, the run's state (its folder gone, unreadable, ended,
    stop requested, paused), the OFF switch, an interrupt or compaction, the CLI's block cap; then
    the turn's final message: ``last_assistant_message`` when the input has text,
    else the transcript's assistant text of the current turn. A transcript whose
    newest assistant entry is still the previous iteration's is waited for (once);
    no transcript, no assistant entry or a turn of tool calls only means "no
    promise", so the run goes on.
    """
    hook = facts.hook
    if hook.hook_event_name != STOP_EVENT:
        return _let(LetStopReason.NOT_STOP_EVENT)
    held = _held_by_run(facts.run)
    if held is not None:
        return _let(held)
    if facts.off:
        return _let(LetStopReason.OFF_SWITCH)
    turn = facts.turn
    if turn is not None and turn.ended_by is not None:
        return _let(_TURN_REASONS[turn.ended_by])
    streak = facts.arming.block_streak if hook.stop_hook_active else 0
    if facts.block_cap > 0 and streak >= facts.block_cap:
        return _let(LetStopReason.BLOCK_CAP)
    if hook.last_assistant_message and hook.last_assistant_message.strip():
        return StopDecision(StopAction.ITERATE, None, hook.last_assistant_message, streak)
    if turn is None or turn.newest_assistant_key is None:
        return StopDecision(StopAction.ITERATE, None, None, streak)
    stale = turn.newest_assistant_key == facts.arming.last_assistant_key
    if stale and not facts.waited:
        return StopDecision(StopAction.WAIT)
    return StopDecision(StopAction.ITERATE, None, None if stale else turn.turn_text, streak)


def block_cap_from(agent: HookAgent, environ: dict[str, str]) -> int:
    """The CLI's consecutive-block cap: Claude Code's 8 or its
    ``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP``; Codex 0.171.0 has none (0)."""
    if agent is not HookAgent.CLAUDE:
        return 0
    try:
        return int(environ.get("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP", ""), 10)
    except ValueError:
        return CLAUDE_BLOCK_CAP
