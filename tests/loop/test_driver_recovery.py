"""Crashes, outside writers and broken launches, in-process (fake runner and clock).

A crash is a ``SimulatedCrash`` (a ``BaseException``: nothing after it runs, as
after ``kill -9``); the relaunch is a new ``Driver`` on the same run folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from autopilot import control
from autopilot.config import RunConfig
from autopilot.loop.runner import RunRequest
from autopilot.store.run_state import RunState
from autopilot.store.state import read_state
from tests.fakes import (
    NO_SUCH_PID,
    CrashingStore,
    Rig,
    Scripted,
    SimulatedCrash,
    arm,
    claude_lines,
    crash_once_logged,
)
from tests.loop.test_driver import _of, _terminal, working


def _state(rig: Rig) -> RunState:
    return read_state(rig.folder / "state.json")


def test_a_crash_mid_attempt_charges_it_on_relaunch(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3))
    lost = Scripted(
        claude_lines("half way", cost_usd=0.5), crash=True, on_start=lambda _: rig.workspace.edit()
    )
    driver, _ = rig.driver([working(rig), lost])
    with pytest.raises(SimulatedCrash):
        driver.run()
    crashed = _state(rig)
    assert crashed.iteration_open and crashed.agent_pid is not None
    assert not _terminal(rig)
    relaunched, runner = rig.driver([working(rig)])
    result = relaunched.run()
    assert result.reason == "max_iterations" and len(runner.requests) == 1
    ends = _of(rig, "iteration_end")
    assert [(e["iteration"], e["endedBy"]) for e in ends] == [
        (1, "exit"),
        (2, "driver_died"),
        (3, "exit"),
    ]
    # Its saved output had its result: the agent's verdict stands, and it is charged.
    assert ends[1]["outcome"] == "ok" and ends[1]["iterationCostUsd"] == 0.5
    assert _state(rig).spend.cost_usd == pytest.approx(0.52)


def test_a_crash_before_the_result_is_charged_as_killed(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    lines = claude_lines("never finished")[:-1]  # no result line
    driver, _ = rig.driver([Scripted(lines, crash=True)])
    with pytest.raises(SimulatedCrash):
        driver.run()
    relaunched, _ = rig.driver([working(rig)])
    assert relaunched.run().reason == "max_iterations"
    first = _of(rig, "iteration_end")[0]
    assert (first["outcome"], first["endedBy"], first["iterationsSpent"]) == (
        "killed",
        "driver_died",
        1,
    )


def test_a_lingering_agents_complete_is_honoured_after_a_crash(tmp_path: Path) -> None:
    # It printed its result and lingered; the driver died before ending it.
    rig = arm(tmp_path, RunConfig(max_iterations=5))
    driver, _ = rig.driver([Scripted(claude_lines("Done.\n\nCOMPLETE"), crash=True)])
    with pytest.raises(SimulatedCrash):
        driver.run()
    relaunched, runner = rig.driver([working(rig)])
    result = relaunched.run()
    assert (result.reason, result.exit_code) == ("completion_promise", 0)
    assert runner.requests == []  # nothing ran again
    assert _terminal(rig) == [("complete", "completion_promise")]


@pytest.mark.parametrize(
    ("final", "config", "reason"),
    [
        ("COMPLETE", RunConfig(max_iterations=5), "completion_promise"),
        ("GIVE_UP", RunConfig(max_iterations=5, abort_promise="GIVE_UP"), "abort_promise"),
    ],
)
def test_a_crash_between_the_log_and_the_state_loses_no_decision(
    tmp_path: Path, final: str, config: RunConfig, reason: str
) -> None:
    rig = arm(tmp_path, config)
    store = CrashingStore(rig.folder / "state.json", lambda s: s.terminated)
    driver, _ = rig.driver([working(rig), working(rig, final)], store=store)
    with pytest.raises(SimulatedCrash):
        driver.run()
    assert not _state(rig).terminated  # the state write never happened
    assert _terminal(rig)[-1][1] == reason  # the log has the decision
    relaunched, runner = rig.driver([working(rig)])
    from autopilot.errors import UsageError

    with pytest.raises(UsageError, match=f"already ended \\({reason}\\)"):
        relaunched.run()
    assert runner.requests == []
    state = _state(rig)
    assert (state.terminated, state.termination_reason, state.spend.iterations) == (
        True,
        reason,
        2,
    )


def test_a_crash_after_logging_a_continue_replays_its_counters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=20))
    same = Scripted(claude_lines("no progress", tools=0))
    # Die before the second step's state write: its stagnation streak is only logged.
    crash_once_logged(monkeypatch, 2)
    driver, _ = rig.driver([same])
    with pytest.raises(SimulatedCrash):
        driver.run()
    assert _state(rig).loop.stagnation_streak < 2
    relaunched, runner = rig.driver([same])
    result = relaunched.run()
    # Three identical answers in all halt the run: the logged streak counted.
    assert result.reason == "stagnation" and len(runner.requests) == 1
    assert _state(rig).spend.iterations == 3


def test_a_crash_in_the_write_that_opens_the_next_attempt_loses_neither_attempt(
    tmp_path: Path,
) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=4))
    # The second step is held and written with the opening of the third attempt,
    # whose agent has started: the driver dies in that write.
    store = CrashingStore(rig.folder / "state.json", lambda s: s.spend.iterations == 2)
    driver, _ = rig.driver([working(rig, "step", cost_usd=0.1)], store=store)
    with pytest.raises(SimulatedCrash):
        driver.run()
    crashed = _state(rig)
    assert (crashed.iteration, crashed.iteration_open, crashed.spend.iterations) == (2, True, 1)
    assert [e["iteration"] for e in _of(rig, "decision_applied")] == [1, 2]
    assert [e["iteration"] for e in _of(rig, "iteration_start")] == [1, 2, 3]
    relaunched, runner = rig.driver([working(rig, "step", cost_usd=0.1)])
    assert relaunched.run().reason == "max_iterations"
    assert len(runner.requests) == 1
    ends = _of(rig, "iteration_end")
    # The held step applied from the log; the third attempt charged from its output.
    assert [(e["iteration"], e["endedBy"]) for e in ends] == [
        (1, "exit"),
        (2, "exit"),
        (3, "driver_died"),
        (4, "exit"),
    ]
    state = _state(rig)
    assert (state.spend.iterations, state.iteration, state.iteration_open) == (4, 4, False)
    # The cut-short attempt had printed nothing yet: the three others are charged.
    charged = [e.get("iterationCostUsd", 0) for e in ends]
    assert state.spend.cost_usd == pytest.approx(sum(charged)) == pytest.approx(0.3)


def test_an_agent_rewriting_spend_in_state_json_cannot_reset_the_budget(
    tmp_path: Path,
) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3, stagnation_limit=0))
    state_file = tmp_path / "runs" / rig.run_id / "state.json"

    def reset_spend(request: RunRequest) -> None:
        rig.workspace.edit()
        data = json.loads(state_file.read_text())
        data["spend"] = {"iterations": 0, "costUsd": 0, "tokens": {"input": 0, "output": 0}}
        data["iter"] = 0
        state_file.write_text(json.dumps(data))

    driver, runner = rig.driver([Scripted(claude_lines("step"), on_start=reset_spend)])
    result = driver.run()
    assert (result.reason, len(runner.requests)) == ("max_iterations", 3)
    assert _state(rig).spend.iterations == 3
    outside = [e for e in _of(rig, "warning") if "outside the driver" in e["note"]]
    assert any("spend" in e["outsideChange"] for e in outside)


def test_a_relaunch_takes_the_larger_spend_of_state_and_log(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3))
    first, _ = rig.driver([working(rig), Scripted(claude_lines("x"), crash=True)])
    with pytest.raises(SimulatedCrash):
        first.run()
    # While no driver runs, something rewrites state.json's spend to zero.
    state_file = rig.folder / "state.json"
    data = json.loads(state_file.read_text())
    data["spend"] = {"iterations": 0, "costUsd": 0, "tokens": {"input": 0, "output": 0}}
    data["agentPid"] = None
    state_file.write_text(json.dumps(data))
    relaunched, runner = rig.driver([working(rig)])
    assert relaunched.run().reason == "max_iterations"
    assert len(runner.requests) == 2  # one iteration was already spent, on record
    assert any("restored from the event log" in e["note"] for e in _of(rig, "warning"))
    # Every figure, not only the iteration count, is the larger one.
    spend = _state(rig).spend
    charged = [e["iterationCostUsd"] for e in _of(rig, "iteration_end")]
    assert spend.iterations == len(charged) == 3
    assert spend.cost_usd == pytest.approx(sum(charged))
    assert spend.tokens.to_json() == {"input": 300, "output": 30}


def test_stop_without_a_driver_takes_the_larger_spend_of_state_and_log(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=5))
    lost = Scripted(claude_lines("half way", cost_usd=0.5), crash=True)
    first, _ = rig.driver([working(rig), lost])
    with pytest.raises(SimulatedCrash):
        first.run()
    # While no driver runs, something rewrites state.json's spend to zero.
    state_file = rig.folder / "state.json"
    data = json.loads(state_file.read_text())
    data["spend"] = {"iterations": 0, "costUsd": 0, "tokens": {"input": 0, "output": 0}}
    data["pid"] = None  # the driver ran in this process: record it as gone
    state_file.write_text(json.dumps(data))
    control.stop(rig.folder, rig.clock, reason="enough")
    state = _state(rig)
    # The logged iteration and the interrupted one are both charged.
    assert state.terminated and state.spend.iterations == 2
    assert state.spend.cost_usd == pytest.approx(0.51)
    assert state.spend.tokens.to_json() == {"input": 200, "output": 20}
    assert any("restored from the event log" in e["note"] for e in _of(rig, "warning"))


@pytest.mark.parametrize("state_knew", [False, True])
def test_stop_without_a_driver_charges_an_attempt_only_the_log_started(
    tmp_path: Path, state_knew: bool
) -> None:
    # The driver died after the log's ``iteration_start`` of attempt 2 and before
    # state.json opened it (the opening write is made while the agent runs), its agent
    # having run: state.json still shows attempt 1 (open, its decision on the log, or
    # concluded). ``stop`` charges attempt 2 as a relaunch would.
    rig = arm(tmp_path, RunConfig(max_iterations=5))
    lost = Scripted(claude_lines("half way", cost_usd=0.5), crash=True)
    first, _ = rig.driver([working(rig), lost])
    with pytest.raises(SimulatedCrash):
        first.run()
    state_file = rig.folder / "state.json"
    data = json.loads(state_file.read_text())
    data["pid"] = None  # the driver ran in this process: record it as gone
    data["iteration"] = 1
    if state_knew:  # attempt 1 still open in state.json, its decision on the log
        data["iterationOpen"], data["agentPid"] = True, NO_SUCH_PID
        data["spend"] = {"iterations": 0, "costUsd": 0, "tokens": {"input": 0, "output": 0}}
    else:
        data["iterationOpen"], data["agentPid"] = False, None
    state_file.write_text(json.dumps(data))
    control.stop(rig.folder, rig.clock, reason="enough")
    state = _state(rig)
    ends = _of(rig, "iteration_end")
    assert [e["iteration"] for e in ends] == [1, 2]
    assert ends[1]["endedBy"] == "driver_died" and ends[1]["iterationCostUsd"] == 0.5
    assert state.terminated and state.spend.iterations == 2
    assert state.stop_requested and state.stop_reason == "enough"
    assert state.spend.cost_usd == pytest.approx(0.51)
    assert [e["iteration"] for e in _of(rig, "abort")] == [2]


def test_a_failed_resume_starts_one_fresh_session_and_keeps_the_attempt(
    tmp_path: Path,
) -> None:
    rig = arm(tmp_path, RunConfig(context="continue", max_iterations=2))
    first = "11111111-1111-4111-8111-111111111111"
    fresh = "22222222-2222-4222-8222-222222222222"
    failed = Scripted([], exit_code=1)  # empty stderr, exit 1: nothing to recognise
    driver, runner = rig.driver(
        [
            working(rig, session=first),
            failed,
            working(rig, session=fresh),
        ]
    )
    assert driver.run().reason == "max_iterations"
    argvs = [r.argv for r in runner.requests]
    assert "--resume" in argvs[1] and first in argvs[1]
    assert "--resume" not in argvs[2]
    ends = _of(rig, "iteration_end")
    assert [(e["iteration"], e["outcome"]) for e in ends] == [
        (1, "ok"),
        (2, "agent_error"),
        (2, "ok"),
    ]
    assert [r.attempt.path.name for r in runner.requests] == [
        "iter-0001",
        "iter-0002",
        "iter-0002.2",
    ]
    assert any("resuming session" in e["note"] for e in _of(rig, "warning"))
    assert _state(rig).session_id == fresh


def test_an_invalid_session_id_in_state_json_never_reaches_argv(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(context="continue", max_iterations=1))
    state_file = rig.folder / "state.json"
    data = json.loads(state_file.read_text())
    data["sessionId"] = "--dangerously-do-anything"
    state_file.write_text(json.dumps(data))
    driver, runner = rig.driver([working(rig)])
    driver.run()
    assert "--dangerously-do-anything" not in runner.requests[0].argv
    assert "--resume" not in runner.requests[0].argv


def _denied(rig: Rig, command: str) -> Scripted:
    lines = claude_lines("I could not run it")
    result = json.loads(lines[-1])
    result["permission_denials"] = [
        {"tool_name": "Bash", "tool_use_id": "t1", "tool_input": {"command": command}}
    ]
    return Scripted([*lines[:-1], json.dumps(result)], on_start=lambda _: rig.workspace.edit())


def test_the_same_permission_denial_twice_halts_the_run(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=10))
    driver, runner = rig.driver([_denied(rig, "rm -rf build")])
    result = driver.run()
    assert (result.reason, result.exit_code, len(runner.requests)) == ("permission_denied", 1, 2)
    assert "rm -rf build" in str(result.note) and "allow" in str(result.note)
    denials = _of(rig, "permission_denied")
    assert [(e["tool"], e["command"]) for e in denials] == [("Bash", "rm -rf build")] * 2


def test_different_denials_do_not_halt(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3))
    driver, _ = rig.driver([_denied(rig, "make a"), _denied(rig, "make b"), working(rig)])
    assert driver.run().reason == "max_iterations"


def test_an_invocation_that_cannot_be_built_is_a_launch_failure(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=5))

    class Refusing:
        name, verified_version, supports_sessions = "refusing", "0", False
        env_needed: tuple[str, ...] = ()

        def build_invocation(self, request: Any) -> Any:
            raise ValueError("the prompt is too long for argv")

        def new_parser(self) -> Any:
            from autopilot.agents.claude import ClaudeAdapter

            return ClaudeAdapter("x").new_parser()

    driver, runner = rig.driver([working(rig)], adapter=Refusing())
    result = driver.run()
    assert runner.requests == []
    assert (result.reason, result.exit_code) == ("agent_failing", 1)
    ends = _of(rig, "iteration_end")
    assert {e["outcome"] for e in ends} == {"launch_failed"}
    assert "too long for argv" in ends[0]["error"]


def test_an_unexpected_error_ends_the_run_with_one_abort(tmp_path: Path) -> None:
    rig = arm(tmp_path)

    def explode(request: RunRequest) -> None:
        raise RuntimeError("disk on fire")

    driver, _ = rig.driver([Scripted(claude_lines("x"), on_start=explode)])
    with pytest.raises(RuntimeError, match="disk on fire"):
        driver.run()
    assert _terminal(rig) == [("abort", "internal_error")]
    abort = _of(rig, "abort")[0]
    assert "RuntimeError: disk on fire" in abort["note"]
    state = _state(rig)
    assert (state.terminated, state.termination_reason) == (True, "internal_error")


def test_start_after_such_a_crash_reports_the_completion_with_exit_0(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    rig = arm(tmp_path, RunConfig(max_iterations=5))
    store = CrashingStore(rig.folder / "state.json", lambda s: s.terminated)
    driver, _ = rig.driver([working(rig, "COMPLETE")], store=store)
    with pytest.raises(SimulatedCrash):
        driver.run()
    # The driver was this test's process; as far as the run knows, it died.
    state_file = rig.folder / "state.json"
    state_file.write_text(
        state_file.read_text().replace(f'"pid": {os.getpid()},', f'"pid": {NO_SUCH_PID},')
    )
    done = run_cli(["start", rig.run_id, "--plain"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed (completion_promise)" in done.stdout
    assert _state(rig).terminated and _terminal(rig) == [("complete", "completion_promise")]


def _cut_short(rig: Rig, *, beat_after_seconds: float | None) -> None:
    """The agent runs 20 s without a line; the driver dies 17 s in (its heartbeat on
    the raw stdout, if any, ``beat_after_seconds`` after the iteration started)."""

    driver, _ = rig.driver(
        [Scripted([], seconds=0.0, crash=True, on_start=lambda _: rig.clock.advance(17))]
    )
    with pytest.raises(SimulatedCrash):
        driver.run()
    attempt = next(rig.folder.glob("iter-0001*"))
    if beat_after_seconds is None:  # no output file at all: nothing is known
        (attempt / "stdout.log").unlink()
        (attempt / "stderr.log").unlink()
        return
    started = _of(rig, "iteration_start")[-1]["ts"]
    beat = started + int(beat_after_seconds * 1000)  # the runner rewrote it: the beat again
    os.utime(attempt / "stdout.log", ns=(beat * 1_000_000, beat * 1_000_000))


def test_a_cut_short_attempt_is_charged_until_its_drivers_last_heartbeat(
    tmp_path: Path,
) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    _cut_short(rig, beat_after_seconds=17)
    rig.clock.advance(600)  # the relaunch comes ten minutes later
    relaunched, _ = rig.driver([working(rig)])
    assert relaunched.run().reason == "max_iterations"
    first = _of(rig, "iteration_end")[0]
    assert (first["endedBy"], first["durationMs"]) == ("driver_died", 19_000)
    assert first["activeMs"] == 19_000


def test_a_cut_short_attempt_with_no_trace_is_charged_until_recovery(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3, max_duration_seconds=30))
    _cut_short(rig, beat_after_seconds=None)
    rig.clock.advance(15)
    recovery_ms = rig.clock.now_ms()
    relaunched, runner = rig.driver([working(rig)])
    result = relaunched.run()
    first = _of(rig, "iteration_end")[0]
    started = _of(rig, "iteration_start")[0]["ts"]
    assert first["durationMs"] == recovery_ms - started >= 32_000
    assert (result.reason, len(runner.requests)) == ("max_duration", 0)


def test_a_commit_made_in_a_cut_short_attempt_is_observed_at_recovery(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    rig.workspace.commit("before the run")

    def commits(_: RunRequest) -> None:
        rig.workspace.edit()
        rig.workspace.commit("half the feature")

    lost = Scripted(claude_lines("working")[:-1], crash=True, on_start=commits)
    driver, _ = rig.driver([lost])
    with pytest.raises(SimulatedCrash):
        driver.run()
    relaunched, _ = rig.driver([working(rig)])
    assert relaunched.run().reason == "max_iterations"
    observed = [(e["iteration"], e["subject"]) for e in _of(rig, "commit_observed")]
    assert observed == [(1, "half the feature")]
    first = _of(rig, "iteration_end")[0]
    assert (first["endedBy"], first["progress"], first["commits"]) == ("driver_died", "made", 1)
