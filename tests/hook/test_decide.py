"""The hook's decision from its inputs, table-tested (hook.decide)."""

from __future__ import annotations

import pytest

from autopilot.core.structs import replace
from autopilot.core.vocabulary import HookAgent
from autopilot.hook.decide import (
    LetStopReason,
    RunRead,
    StopAction,
    StopDecision,
    StopFacts,
    block_cap_from,
    decide_stop,
    match_arming,
)
from autopilot.hook.inputs import HookInput
from autopilot.hook.transcript import TurnEnd, TurnView
from autopilot.store.hook_registry import Arming
from autopilot.store.run_state import RunState

SESSION = "f3087397-0bfe-46de-bb16-164086ded675"
PROJECT = "/home/dev/work"
NOW_MS = 1_800_000_000_000

HOOK = HookInput(
    agent=HookAgent.CLAUDE,
    session_id=SESSION,
    transcript_path="/t.jsonl",
    cwd=PROJECT,
    hook_event_name="Stop",
    stop_hook_active=False,
    last_assistant_message="done. <promise>COMPLETE</promise>",
)
OWNED = Arming("hook-1800000000000", HookAgent.CLAUDE, PROJECT, session_id=SESSION)
UNCLAIMED = Arming("hook-1800000000001", HookAgent.CLAUDE, PROJECT, claim_until_ms=NOW_MS + 60_000)


@pytest.mark.parametrize(
    ("hook", "armings", "expected"),
    [
        pytest.param(HOOK, [OWNED], (OWNED.run_id, False), id="owned-by-this-session"),
        pytest.param(
            HOOK, [replace(OWNED, session_id="other-session")], None, id="another-session"
        ),
        pytest.param(
            replace(HOOK, session_id=""), [replace(OWNED, session_id="")], None, id="both-empty"
        ),
        pytest.param(replace(HOOK, session_id=""), [UNCLAIMED], None, id="empty-session-id"),
        pytest.param(HOOK, [UNCLAIMED], (UNCLAIMED.run_id, True), id="claims-in-window"),
        pytest.param(HOOK, [replace(UNCLAIMED, claim_until_ms=NOW_MS - 1)], None, id="window-over"),
        pytest.param(replace(HOOK, cwd="/home/dev/other"), [UNCLAIMED], None, id="other-project"),
        pytest.param(replace(HOOK, cwd="/home/dev/work-2"), [UNCLAIMED], None, id="sibling-prefix"),
        pytest.param(
            replace(HOOK, cwd=PROJECT + "/src"),
            [UNCLAIMED],
            (UNCLAIMED.run_id, True),
            id="project-subfolder",
        ),
        pytest.param(replace(HOOK, agent=HookAgent.CODEX), [UNCLAIMED], None, id="other-agent"),
        pytest.param(HOOK, [UNCLAIMED, OWNED], (OWNED.run_id, False), id="owned-before-claimable"),
        pytest.param(HOOK, [], None, id="nothing-armed"),
        pytest.param(
            replace(HOOK, cwd="/home/dev/other"), [OWNED], None, id="owned-from-another-project"
        ),
        pytest.param(replace(HOOK, cwd=""), [OWNED], None, id="owned-without-a-cwd"),
        pytest.param(
            replace(HOOK, cwd=PROJECT + "/src/deep"),
            [OWNED],
            (OWNED.run_id, False),
            id="owned-from-a-project-subfolder",
        ),
    ],
)
def test_a_stop_matches_only_its_own_sessions_run(
    hook: HookInput, armings: list[Arming], expected: tuple[str, bool] | None
) -> None:
    match = match_arming(hook, armings, NOW_MS)
    assert (None if match is None else (match.arming.run_id, match.claims)) == expected


TURN = TurnView(newest_assistant_key="a2", turn_text="working on it")
STATE = RunState(run_id=OWNED.run_id, mode="hook")
FACTS = StopFacts(hook=HOOK, arming=OWNED, run=RunRead(STATE), off=False, turn=TURN)


def _run(**fields: bool) -> RunRead:
    return RunRead(replace(STATE, **fields))


def _let(reason: LetStopReason) -> StopDecision:
    return StopDecision(StopAction.LET_STOP, reason)


def _iterate(final: str | None, streak: int = 0) -> StopDecision:
    return StopDecision(StopAction.ITERATE, None, final, streak)


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        pytest.param(FACTS, _iterate(HOOK.last_assistant_message), id="last-message-wins"),
        pytest.param(
            replace(FACTS, hook=replace(HOOK, hook_event_name="SubagentStop")),
            _let(LetStopReason.NOT_STOP_EVENT),
            id="subagent-stop",
        ),
        pytest.param(
            replace(FACTS, run=RunRead(None, problem="state.json is not JSON")),
            _let(LetStopReason.STATE_UNREADABLE),
            id="corrupt-state",
        ),
        pytest.param(
            replace(FACTS, run=_run(terminated=True)), _let(LetStopReason.RUN_ENDED), id="ended"
        ),
        pytest.param(
            replace(FACTS, run=RunRead(None, gone=True)),
            _let(LetStopReason.RUN_MISSING),
            id="run-deleted",
        ),
        pytest.param(
            replace(FACTS, run=_run(stop_requested=True)),
            _let(LetStopReason.STOP_REQUESTED),
            id="stop-requested",
        ),
        pytest.param(
            replace(FACTS, run=_run(stop_now=True)),
            _let(LetStopReason.STOP_REQUESTED),
            id="stop-now-requested",
        ),
        pytest.param(
            replace(FACTS, run=_run(terminated=True, stop_requested=True)),
            _let(LetStopReason.RUN_ENDED),
            id="ended-after-a-stop",
        ),
        pytest.param(
            replace(FACTS, run=_run(paused=True)), _let(LetStopReason.PAUSED), id="paused"
        ),
        pytest.param(replace(FACTS, off=True), _let(LetStopReason.OFF_SWITCH), id="off-switch"),
        pytest.param(
            replace(FACTS, turn=replace(TURN, ended_by=TurnEnd.INTERRUPT)),
            _let(LetStopReason.INTERRUPTED),
            id="user-interrupt",
        ),
        pytest.param(
            replace(FACTS, turn=replace(TURN, ended_by=TurnEnd.COMPACTION)),
            _let(LetStopReason.COMPACTION),
            id="compaction",
        ),
        pytest.param(
            replace(
                FACTS,
                hook=replace(HOOK, stop_hook_active=True),
                arming=replace(OWNED, block_streak=8),
            ),
            _let(LetStopReason.BLOCK_CAP),
            id="block-cap-reached",
        ),
        pytest.param(
            replace(
                FACTS,
                hook=replace(HOOK, stop_hook_active=True),
                arming=replace(OWNED, block_streak=7),
            ),
            _iterate(HOOK.last_assistant_message, 7),
            id="stop-hook-active-below-cap",
        ),
        pytest.param(
            replace(FACTS, arming=replace(OWNED, block_streak=8)),
            _iterate(HOOK.last_assistant_message, 0),
            id="streak-restarts-when-not-active",
        ),
        pytest.param(
            replace(
                FACTS,
                hook=replace(HOOK, stop_hook_active=True),
                arming=replace(OWNED, block_streak=50),
                block_cap=0,
            ),
            _iterate(HOOK.last_assistant_message, 50),
            id="no-cap-codex",
        ),
        pytest.param(
            replace(FACTS, hook=replace(HOOK, last_assistant_message=None)),
            _iterate("working on it"),
            id="last-message-missing-transcript-text",
        ),
        pytest.param(
            replace(FACTS, hook=replace(HOOK, last_assistant_message="  ")),
            _iterate("working on it"),
            id="last-message-blank",
        ),
        pytest.param(
            replace(
                FACTS,
                hook=replace(HOOK, last_assistant_message=None),
                turn=replace(TURN, turn_text=None),
            ),
            _iterate(None),
            id="tool-calls-only",
        ),
        pytest.param(
            replace(FACTS, hook=replace(HOOK, last_assistant_message=None), turn=None),
            _iterate(None),
            id="transcript-unreadable",
        ),
        pytest.param(
            replace(FACTS, hook=replace(HOOK, last_assistant_message=None), turn=TurnView()),
            _iterate(None),
            id="empty-transcript",
        ),
        pytest.param(
            replace(
                FACTS,
                hook=replace(HOOK, last_assistant_message=None),
                arming=replace(OWNED, last_assistant_key="a2"),
            ),
            StopDecision(StopAction.WAIT),
            id="flush-race-waits",
        ),
        pytest.param(
            replace(
                FACTS,
                hook=replace(HOOK, last_assistant_message=None),
                arming=replace(OWNED, last_assistant_key="a2"),
                waited=True,
            ),
            _iterate(None),
            id="flush-race-after-wait-no-promise",
        ),
        pytest.param(
            replace(
                FACTS,
                hook=replace(HOOK, last_assistant_message=None),
                arming=replace(OWNED, last_assistant_key="a1"),
            ),
            _iterate("working on it"),
            id="newer-entry-arrived",
        ),
    ],
)
def test_the_decision_from_hook_inputs(facts: StopFacts, expected: StopDecision) -> None:
    assert decide_stop(facts) == expected


def test_the_block_cap_comes_from_the_cli_and_its_variable() -> None:
    assert block_cap_from(HookAgent.CLAUDE, {}) == 8
    assert block_cap_from(HookAgent.CLAUDE, {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "20"}) == 20
    assert block_cap_from(HookAgent.CLAUDE, {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "x"}) == 8
    assert block_cap_from(HookAgent.CODEX, {"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "3"}) == 0
