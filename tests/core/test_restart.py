"""The supervisor's restart policy as a pure function."""

from __future__ import annotations

import signal

import pytest

from autopilot.core.restart import (
    RESTART_WINDOW_MS,
    DaemonExit,
    RelaunchCandidate,
    RunFacts,
    Verdict,
    decide_restart,
    one_per_work_tree,
    relaunch_verdict,
)

KILLED = DaemonExit(None, signal.SIGKILL)
ACTIVE = RunFacts(
    terminated=False, stop_requested=False, status="running", off=False, driven_elsewhere=False
)
NOW = 10_000_000


def _facts(**changes: object) -> RunFacts:
    return RunFacts(**{**ACTIVE.__dict__, **changes})  # type: ignore[arg-type]


def test_a_crash_of_an_active_run_is_restarted_and_remembered() -> None:
    decision = decide_restart(KILLED, ACTIVE, [], NOW)
    assert decision.verdict is Verdict.RESTART
    assert decision.restarts_ms == (NOW,)
    assert "SIGKILL" in decision.reason


@pytest.mark.parametrize(
    ("facts", "ended", "verdict"),
    [
        (_facts(terminated=True), KILLED, Verdict.DONE),
        (_facts(stop_requested=True), KILLED, Verdict.FINISH_STOP),
        (_facts(status="gated"), KILLED, Verdict.LEAVE),
        (_facts(status="awaiting_user"), KILLED, Verdict.LEAVE),
        (_facts(off=True), KILLED, Verdict.LEAVE),
        (_facts(driven_elsewhere=True), KILLED, Verdict.LEAVE),
        (ACTIVE, DaemonExit(0), Verdict.LEAVE),  # it left on purpose
        (_facts(status="paused"), KILLED, Verdict.RESTART),  # a crash while paused
        (_facts(status="rate_limited"), DaemonExit(1), Verdict.RESTART),
        (ACTIVE, DaemonExit(None), Verdict.RESTART),  # an adopted daemon: status unknown
    ],
)
def test_what_follows_an_exit(facts: RunFacts, ended: DaemonExit, verdict: Verdict) -> None:
    assert decide_restart(ended, facts, [], NOW).verdict is verdict


def test_more_than_five_restarts_in_five_minutes_is_a_give_up() -> None:
    restarts: list[int] = []
    now = NOW
    verdicts = []
    for _ in range(6):
        decision = decide_restart(KILLED, ACTIVE, restarts, now)
        verdicts.append(decision.verdict)
        restarts = list(decision.restarts_ms)
        now += 1000
    assert verdicts == [Verdict.RESTART] * 5 + [Verdict.GIVE_UP]
    assert "6 times within 5 minutes" in decide_restart(KILLED, ACTIVE, restarts, now).reason


def test_a_usage_error_of_the_daemon_is_given_up_at_once_with_its_error() -> None:
    ended = DaemonExit(2, error="../agent.sh is not an executable file")
    decision = decide_restart(ended, ACTIVE, [], NOW)
    assert (decision.verdict, decision.restarts_ms) == (Verdict.GIVE_UP, ())
    assert decision.reason == (
        "the daemon cannot drive the run: ../agent.sh is not an executable file"
    )


def test_restarts_older_than_the_window_do_not_count() -> None:
    old = [NOW - RESTART_WINDOW_MS - 1] * 5
    decision = decide_restart(KILLED, ACTIVE, old, NOW)
    assert decision.verdict is Verdict.RESTART and decision.restarts_ms == (NOW,)
    recent = [NOW - RESTART_WINDOW_MS + 1000] * 5
    assert decide_restart(KILLED, ACTIVE, recent, NOW).verdict is Verdict.GIVE_UP


def test_exits_are_described() -> None:
    assert DaemonExit.from_returncode(-9).describe() == "signal SIGKILL"
    assert DaemonExit.from_returncode(4).describe() == "exit code 4"
    assert DaemonExit.from_returncode(-200).describe() == "signal 200"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({}, None),
        ({"status": "planning"}, None),
        ({"status": "waiting"}, None),
        ({"status": "rate_limited"}, None),
        ({"status": "paused"}, "it is paused: start it with autopilot start"),
        ({"status": "gated"}, "it is gated: start it with autopilot start"),
        ({"status": "awaiting_user"}, "it is awaiting_user: start it with autopilot start"),
        ({"terminated": True, "status": "completed"}, "it has ended"),
        ({"daemon_alive": True}, "its daemon is running"),
        ({"daemon_alive": True, "supervisor_alive": True}, "its daemon is running"),
        (
            {"daemon_alive": True, "supervisor_alive": False},
            "its daemon is running without its supervisor: autopilot start adopts it",
        ),
        ({"supervisor_alive": True}, "its supervisor is running"),
        ({"off": True}, "autopilot is OFF in its project"),
        ({"daemon_alive": False, "supervisor_alive": False}, None),
        # Its agent would start without the variables it logged in with.
        (
            {"env_missing": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")},
            "its agent started with ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, which this "
            "environment lacks (its agent would not be logged in): autopilot start it from "
            "a shell that has them",
        ),
        ({"env_missing": ("X",), "daemon_alive": True}, "its daemon is running"),
        (
            {"env_missing": ("X",), "status": "paused"},
            "it is paused: start it with autopilot start",
        ),
    ],
)
def test_which_runs_bare_autopilot_relaunches(changes: dict[str, object], why: str | None) -> None:
    facts: dict[str, object] = {
        "status": "running",
        "terminated": False,
        "daemon_alive": None,
        "supervisor_alive": None,
        "off": False,
        **changes,
    }
    assert relaunch_verdict(**facts) == why  # type: ignore[arg-type]


def test_a_daemon_refused_for_another_run_in_its_directory_is_left_alone() -> None:
    ended = DaemonExit(5, error="another run (a-1) is active in /w; stop it first")
    decision = decide_restart(ended, ACTIVE, [], NOW)
    assert (decision.verdict, decision.reason) == (
        Verdict.LEAVE,
        "another run (a-1) is active in /w; stop it first",
    )


def test_one_run_per_work_tree_is_relaunched_the_newest() -> None:
    verdicts = one_per_work_tree(
        [
            RelaunchCandidate("w-1", "/w", 1_000, None),
            RelaunchCandidate("w-2", "/w", 2_000, None),
            RelaunchCandidate("v-1", "/v", 1_500, None),
            RelaunchCandidate("w-0", "/w", 500, "it is paused: start it with autopilot start"),
        ]
    )
    assert verdicts == [
        (
            "w-1",
            "run w-2 is relaunched in the same directory; start this one with autopilot "
            "start once that one has ended",
        ),
        ("w-2", None),
        ("v-1", None),
        ("w-0", "it is paused: start it with autopilot start"),
    ]


def test_no_relaunch_in_a_work_tree_where_a_run_is_driven() -> None:
    verdicts = one_per_work_tree(
        [
            RelaunchCandidate("w-2", "/w", 2_000, None),
            RelaunchCandidate("w-1", "/w", 1_000, "its daemon is running", driven=True),
        ]
    )
    assert verdicts[0] == (
        "w-2",
        "run w-1 is running in the same directory; start this one with autopilot start "
        "once that one has ended",
    )
