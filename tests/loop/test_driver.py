"""Every path of the driver, in-process: fake runner, fake workspace, fake clock.

No subprocess and no real sleep: each test plays scripted agent output through the
real driver, adapter (Claude Code's stream-json parser), state store and event log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autopilot.agents.command import CommandAdapter
from autopilot.config import RunConfig
from autopilot.loop.runner import RunRequest
from autopilot.store.state import read_state
from tests.conftest import read_jsonl
from tests.fakes import Rig, Scripted, arm, claude_lines


def _events(rig: Rig) -> list[dict[str, Any]]:
    return read_jsonl(rig.folder / "events.jsonl")


def _of(rig: Rig, kind: str) -> list[dict[str, Any]]:
    return [e for e in _events(rig) if e["type"] == kind]


def _terminal(rig: Rig) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in _events(rig) if e["type"] in ("complete", "abort")]


def working(rig: Rig, text: str = "did a step", **options: Any) -> Scripted:
    """An attempt that edits the work tree and answers ``text``."""
    return Scripted(claude_lines(text, **options), on_start=lambda _: rig.workspace.edit())


def test_completion_ends_the_run_with_exit_0(tmp_path: Path) -> None:
    rig = arm(tmp_path)
    driver, runner = rig.driver([working(rig), working(rig, "All done.\n\nCOMPLETE")])
    result = driver.run()
    assert (result.terminal_type, result.reason, result.exit_code) == (
        "complete",
        "completion_promise",
        0,
    )
    assert len(runner.requests) == 2
    state = read_state(rig.folder / "state.json")
    assert (state.terminated, state.status, state.spend.iterations) == (True, "completed", 2)
    assert state.spend.tokens.to_json() == {"input": 200, "output": 20}
    assert state.spend.cost_usd == 0.02
    types = [e["type"] for e in _events(rig)]
    assert types[-3:] == ["iteration_end", "decision_applied", "complete"]
    assert [e["iterationsSpent"] for e in _of(rig, "iteration_end")] == [1, 2]
    assert [e["sub"] for e in _of(rig, "substage")] == [1, 1]
    # The agent gets the run id and iteration, not the run folder.
    env = runner.requests[1].env
    assert env["AUTOPILOT_ITERATION"] == "2" and "AUTOPILOT_RUN_DIR" not in env


def test_abort_promise_aborts(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(abort_promise="GIVE_UP"))
    driver, _ = rig.driver([working(rig, "GIVE_UP")])
    result = driver.run()
    assert (result.reason, result.exit_code) == ("abort_promise", 1)
    assert _terminal(rig) == [("abort", "abort_promise")]


def test_stagnation_warns_then_aborts(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=20))
    same = Scripted(claude_lines("still thinking", tools=0))
    driver, runner = rig.driver([same])
    result = driver.run()
    assert (result.reason, result.exit_code) == ("stagnation", 1)
    streaks = [e["streak"] for e in _of(rig, "stagnation")]
    assert streaks[-1] == 3 and streaks == sorted(streaks)
    warnings = [e["note"] for e in _of(rig, "warning")]
    assert any("one more halts the run" in note for note in warnings)
    assert "agent claude" in str(result.note)
    assert len(runner.requests) == 3


def test_an_empty_answer_again_is_stagnation_even_with_no_iteration_budget(
    tmp_path: Path,
) -> None:
    # A program that prints nothing, in a loop with no iteration budget: each empty
    # answer repeats the previous one, and nothing else can end the run.
    rig = arm(tmp_path, RunConfig(max_iterations=0))
    silent = Scripted([], seconds=0.01)
    driver, runner = rig.driver([silent], adapter=CommandAdapter(["/bin/echo"]))
    result = driver.run()
    assert (result.reason, result.exit_code) == ("stagnation", 1)
    assert [e["streak"] for e in _of(rig, "stagnation")] == [2, 3]
    assert len(runner.requests) == 3


def test_the_iteration_budget(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=3))
    driver, runner = rig.driver([working(rig)])
    result = driver.run()
    assert (result.reason, result.exit_code, len(runner.requests)) == ("max_iterations", 3, 3)


def test_the_cost_budget(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_cost_usd=1.0))
    driver, runner = rig.driver([working(rig, cost_usd=0.4)])
    result = driver.run()
    assert (result.reason, result.exit_code, len(runner.requests)) == ("max_cost", 3, 3)
    assert read_state(rig.folder / "state.json").spend.cost_usd == 1.2


def test_the_token_budget(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_tokens=250))
    driver, runner = rig.driver([working(rig, input_tokens=100, output_tokens=20)])
    result = driver.run()
    assert (result.reason, len(runner.requests)) == ("max_tokens", 3)


def test_the_duration_budget_also_caps_the_iteration_timeout(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_duration_seconds=5, iteration_timeout_seconds=60))
    driver, runner = rig.driver(
        [Scripted(claude_lines("step"), seconds=3.0, on_start=lambda _: rig.workspace.edit())]
    )
    result = driver.run()
    assert (result.reason, len(runner.requests)) == ("max_duration", 2)
    assert runner.requests[0].limits.timeout_seconds == 5.0
    assert runner.requests[1].limits.timeout_seconds == 2.0


def test_a_usage_limit_is_waited_out_and_the_same_iteration_retried(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    limited = Scripted(
        claude_lines(
            "API Error: Request rejected (429)", is_error=True, api_error_status=429, cost_usd=0.0
        ),
        exit_code=1,
    )
    driver, runner = rig.driver([limited, working(rig, "COMPLETE")])
    result = driver.run()
    assert result.reason == "completion_promise"
    ends = _of(rig, "iteration_end")
    assert [(e["iteration"], e["outcome"]) for e in ends] == [(1, "rate_limited"), (1, "ok")]
    assert [e["iterationsSpent"] for e in ends] == [0, 1]
    waits = _of(rig, "rate_limited")
    assert len(waits) == 1 and waits[0]["waitingUntil"] > ends[0]["ts"]
    assert rig.clock.slept > 0
    assert [r.attempt.path.name for r in runner.requests] == ["iter-0001", "iter-0001.2"]
    assert read_state(rig.folder / "state.json").spend.waiting_ms > 0


def test_the_breaker_halts_identical_quick_failures_with_the_agents_words(
    tmp_path: Path,
) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=10))
    failing = Scripted(
        claude_lines(
            "API Error: 500 Internal server error (req_0123456789ab)",
            is_error=True,
            api_error_status=500,
        ),
        exit_code=1,
    )
    driver, runner = rig.driver([failing])
    result = driver.run()
    assert (result.reason, result.exit_code, len(runner.requests)) == ("agent_failing", 1, 3)
    assert "3 identical failures in a row" in str(result.note)
    assert "Internal server error" in str(result.note)
    backoffs = [e for e in _of(rig, "warning") if "backing off" in e["note"]]
    assert len(backoffs) == 2


def test_the_breaker_reads_a_failure_from_stderr_and_exit_code(tmp_path: Path) -> None:
    # An agent that refuses to start inside another session: no output, exit 1.
    rig = arm(tmp_path, RunConfig(max_iterations=50))
    refusing = Scripted(
        [],
        exit_code=1,
        seconds=0.1,
        stderr="Error: Claude Code cannot be launched inside another Claude Code session.\n",
    )
    driver, runner = rig.driver([refusing])
    result = driver.run()
    assert (result.reason, result.exit_code, len(runner.requests)) == ("agent_failing", 1, 3)
    ends = _of(rig, "iteration_end")
    assert [e["outcome"] for e in ends] == ["agent_error"] * 3
    assert _terminal(rig) == [("abort", "agent_failing")]
    assert "cannot be launched inside another Claude Code session" in str(result.note)
    # It backed off between the failures, 2 s then 4 s, on the fake clock.
    assert rig.clock.slept >= 6.0


def test_stop_at_the_boundary_lets_the_iteration_finish(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=10))

    def ask_to_stop(request: RunRequest) -> None:
        rig.workspace.edit()
        from autopilot.control import stop

        stop(rig.folder, rig.clock)

    driver, runner = rig.driver([Scripted(claude_lines("step"), on_start=ask_to_stop)])
    # The fake driver holds no driver.lock: stop() finds it alive by its pid and identity.
    result = driver.run()
    assert (result.reason, result.exit_code, len(runner.requests)) == ("user_stopped", 130, 1)
    assert [e["outcome"] for e in _of(rig, "iteration_end")] == ["ok"]
    assert _terminal(rig) == [("abort", "user_stopped")]


def test_pause_holds_at_the_boundary_until_resumed(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=2))
    from autopilot.control import pause, resume

    def pause_now(request: RunRequest) -> None:
        rig.workspace.edit()
        pause(rig.folder, rig.clock)

    resumed_at: list[int] = []

    def resume_later(seconds: float) -> None:
        rig.clock.advance(seconds)
        if rig.clock.slept > 30 and not resumed_at:
            resumed_at.append(rig.clock.now_ms())
            resume(rig.folder, rig.clock)
        rig.clock.slept += seconds

    rig.clock.sleep = resume_later  # type: ignore[method-assign]
    driver, runner = rig.driver([Scripted(claude_lines("step"), on_start=pause_now), working(rig)])
    result = driver.run()
    assert result.reason == "max_iterations" and len(runner.requests) == 2
    types = [e["type"] for e in _events(rig)]
    assert types.index("pause") < types.index("resume") < len(types)
    assert types.count("iteration_start") == 2
    assert types.index("resume") < [i for i, t in enumerate(types) if t == "iteration_start"][1]
    state = read_state(rig.folder / "state.json")
    assert state.total_paused_ms >= 30_000 and not state.paused


def test_stop_now_ends_the_agent(tmp_path: Path) -> None:
    rig = arm(tmp_path)

    def stop_now(request: RunRequest) -> None:
        state_file = rig.folder / "state.json"
        data = json.loads(state_file.read_text())
        data.update(stopRequested=True, stopNow=True, stopReason="autopilot stop")
        state_file.write_text(json.dumps(data))

    driver, _ = rig.driver([Scripted(claude_lines("long work", tools=3), on_start=stop_now)])
    result = driver.run()
    assert (result.reason, result.exit_code) == ("user_stopped", 130)
    assert [e["outcome"] for e in _of(rig, "iteration_end")] == ["killed"]
    assert "--now" in str(result.note)


def test_a_baseline_and_a_checkpoint_after_every_iteration(tmp_path: Path) -> None:
    rig = arm(tmp_path)
    driver, _ = rig.driver([working(rig), working(rig), working(rig, "COMPLETE")])
    driver.run()
    checkpoints = _of(rig, "checkpoint")
    assert [(c["name"], c["iteration"]) for c in checkpoints] == [
        ("baseline", 0),
        ("iter-0001", 1),
        ("iter-0002", 2),
        ("iter-0003", 3),
    ]
    assert [c["sha"] for c in checkpoints] == [c.sha for c in rig.workspace.checkpoints]
    assert checkpoints[2]["files"] == ["M file.txt@2"]
    types = [e["type"] for e in _events(rig)]
    # Each iteration's checkpoint comes before its end: the terminal event stays last.
    assert types.index("checkpoint", types.index("iteration_start")) < types.index("iteration_end")
    assert types[-1] == "complete"


def test_no_checkpoints(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(checkpoints="off"))
    driver, _ = rig.driver([working(rig, "COMPLETE")])
    driver.run()
    assert _of(rig, "checkpoint") == [] and rig.workspace.checkpoints == []


def test_a_work_tree_deleted_under_the_run_ends_it_with_a_reason(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=5))

    def delete(_: RunRequest) -> None:
        rig.workspace.deleted = True

    driver, runner = rig.driver([working(rig), Scripted(claude_lines("step"), on_start=delete)])
    result = driver.run()
    assert (result.terminal_type, result.reason, result.exit_code) == (
        "abort",
        "workspace_gone",
        1,
    )
    assert len(runner.requests) == 2
    assert _events(rig)[-1]["note"] == "the work tree was deleted"
    assert [c["name"] for c in _of(rig, "checkpoint")] == ["baseline", "iter-0001"]


def test_a_git_call_that_timed_out_is_a_warning_of_its_iteration(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(max_iterations=1))

    def stalled(_: RunRequest) -> None:
        rig.workspace.warnings.append("git status took longer than 30 s in /w")

    driver, _ = rig.driver([Scripted(claude_lines("step"), on_start=stalled)])
    assert driver.run().reason == "max_iterations"
    warnings = [(e["iteration"], e["note"]) for e in _of(rig, "warning") if "git" in e["note"]]
    assert warnings == [(1, "git status took longer than 30 s in /w")]
    (end,) = _of(rig, "iteration_end")
    assert _events(rig).index(end) > _events(rig).index(_of(rig, "warning")[-1])
