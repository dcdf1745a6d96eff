"""``--verify`` through the real driver, in-process: fake runner, workspace and clock;
real verify commands in the work tree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autopilot.config import RunConfig
from autopilot.loop.runner import RunRequest
from autopilot.store.state import read_state
from tests.conftest import read_jsonl
from tests.fakes import Rig, Scripted, arm, claude_lines

CHECK = "test -f done.txt || { echo 'done.txt is missing'; exit 3; }"


def _events(rig: Rig, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_jsonl(rig.folder / "events.jsonl") if e["type"] == kind]


def _claims_done(rig: Rig, *, writes: bool) -> Scripted:
    def start(_: RunRequest) -> None:
        rig.workspace.edit()
        if writes:
            (rig.root.parent / "work" / "done.txt").write_text("ok\n")

    return Scripted(claude_lines("All done.\n\nCOMPLETE"), on_start=start)


def test_a_false_completion_is_refused_and_the_next_prompt_carries_the_failure(
    tmp_path: Path,
) -> None:
    rig = arm(tmp_path, RunConfig(verify=(CHECK,)))
    driver, runner = rig.driver([_claims_done(rig, writes=False), _claims_done(rig, writes=True)])
    result = driver.run()
    assert (result.terminal_type, result.reason) == ("complete", "completion_promise")
    assert len(runner.requests) == 2
    verified = _events(rig, "verify")
    assert [(e["iteration"], e["passed"]) for e in verified] == [(1, False), (2, True)]
    assert verified[0]["results"] == [f"$ {CHECK}: exit 3"]
    assert verified[1]["digest"].startswith("sha256:")
    warnings = [e["note"] for e in _events(rig, "warning")]
    assert f"completion promise refused: $ {CHECK}: exit 3; the run goes on" in warnings
    second_prompt = runner.requests[1].attempt.prompt.read_text()
    assert "Verify commands failed" in second_prompt and "done.txt is missing" in second_prompt
    saved = runner.requests[0].attempt.path / "check-verify1.log"
    assert saved.read_text() == "done.txt is missing\n"
    assert read_state(rig.folder / "state.json").spend.iterations == 2


def test_without_a_promise_the_verify_commands_do_not_run(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(verify=(CHECK,), max_iterations=1))
    working = Scripted(claude_lines("did a step"), on_start=lambda _: rig.workspace.edit())
    driver, runner = rig.driver([working])
    result = driver.run()
    assert result.reason == "max_iterations"
    assert _events(rig, "verify") == []
    assert not (runner.requests[0].attempt.path / "check-verify1.log").exists()


def test_a_run_that_ends_on_the_budget_after_a_refusal_is_not_complete(tmp_path: Path) -> None:
    rig = arm(tmp_path, RunConfig(verify=(CHECK,), max_iterations=2))
    driver, _ = rig.driver([_claims_done(rig, writes=False), _claims_done(rig, writes=False)])
    result = driver.run()
    assert (result.terminal_type, result.reason) == ("abort", "max_iterations")
    assert [e["passed"] for e in _events(rig, "verify")] == [False, False]


def test_a_verify_command_runs_for_at_most_the_check_timeout(tmp_path: Path) -> None:
    # --check-timeout 1s: a verify command that hangs is ended and fails; the run
    # goes on (and ends on its budget) instead of waiting out the 10-minute default.
    rig = arm(tmp_path, RunConfig(verify=("sleep 600",), max_iterations=1, check_timeout_seconds=1))
    driver, _ = rig.driver([_claims_done(rig, writes=False)])
    result = driver.run()
    assert (result.terminal_type, result.reason) == ("abort", "max_iterations")
    verified = _events(rig, "verify")
    assert [e["passed"] for e in verified] == [False]
    assert verified[0]["results"][0].startswith("$ sleep 600: timed out after ")


def _repeats(final: str) -> Scripted:
    """An agent that changes nothing and gives the same answer every time."""
    return Scripted(claude_lines(final, tools=0))


def _halt(rig: Rig, final: str) -> tuple[str, str, int, list[tuple[int, int]]]:
    driver, runner = rig.driver([_repeats(final)])
    result = driver.run()
    streaks = [(e["iteration"], e["streak"]) for e in _events(rig, "stagnation")]
    return result.terminal_type, result.reason, len(runner.requests), streaks


def test_a_refused_promise_repeated_halts_on_stagnation_like_a_plain_answer(
    tmp_path: Path,
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "verify").mkdir()
    plain = arm(tmp_path / "plain", RunConfig(max_iterations=20))
    assert _halt(plain, "I did everything.") == ("abort", "stagnation", 3, [(1, 1), (2, 2), (3, 3)])
    verified = arm(tmp_path / "verify", RunConfig(verify=(CHECK,), max_iterations=20))
    assert _halt(verified, "I did everything.\n\nCOMPLETE") == (
        "abort",
        "stagnation",
        3,
        [(1, 1), (2, 2), (3, 3)],
    )
    assert [e["passed"] for e in _events(verified, "verify")] == [False, False, False]
    warnings = [e["note"] for e in _events(verified, "warning")]
    refused = f"completion promise refused: $ {CHECK}: exit 3; the run goes on"
    assert warnings[:2] == [
        refused,
        f"{refused}; 2 of 3 iterations without progress; one more halts the run",
    ]


def test_the_budget_ends_a_run_of_refused_promises_without_claiming_a_restore(
    tmp_path: Path,
) -> None:
    rig = arm(tmp_path, RunConfig(verify=(CHECK,), max_iterations=4, stagnation_limit=0))
    assert _halt(rig, "I did everything.\n\nCOMPLETE") == ("abort", "max_iterations", 4, [])
    (abort,) = _events(rig, "abort")
    assert abort["note"] == "reached max_iterations=4"
