"""The real Claude Code CLI (2.1.197) driven by ``autopilot run``, offline."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import assert_nothing_left_behind, cli_path, run_offline

PROMPT = "Make sure hello.txt exists. When it does, say COMPLETE.\n"


def _claude_env() -> dict[str, str]:
    return {
        "AUTOPILOT_CLAUDE_BIN": str(cli_path("claude")),
        "ANTHROPIC_BASE_URL": "{base_url}",
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        # The driver removes this nesting marker; set it to prove that it does.
        "CLAUDECODE": "1",
    }


def test_fresh_sessions_complete_at_iteration_two(tmp_path: Path, e2e_repo: Path) -> None:
    (e2e_repo / "PROMPT.md").write_text(PROMPT)
    run = run_offline(
        tmp_path,
        e2e_repo,
        script="check-then-write",
        autopilot_args=[
            "run",
            "--agent",
            "claude",
            "--prompt-file",
            "PROMPT.md",
            "--max-iterations",
            "5",
        ],
        set_env=_claude_env(),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (e2e_repo / "hello.txt").read_text() == "hello from the fake model\n"
    events = run.events
    terminal = [e for e in events if e["type"] in ("complete", "abort")]
    assert [(e["type"], e["reason"]) for e in terminal] == [("complete", "completion_promise")]
    ends = [e for e in events if e["type"] == "iteration_end"]
    assert [e["iteration"] for e in ends] == [1, 2]
    assert [e["outcome"] for e in ends] == ["ok", "ok"]
    assert ends[0]["progress"] == "made" and ends[0]["filesChanged"] == 1
    assert "<promise>COMPLETE</promise>" in str(ends[1]["excerpt"])
    sessions = [e["sessionId"] for e in ends]
    assert sessions[0] != sessions[1]  # --fresh: a new session each iteration
    state = run.state
    assert state["terminated"] is True
    assert state["terminationReason"] == "completion_promise"
    assert state["status"] == "completed"
    assert state["iter"] == 2
    spend = state["spend"]
    assert isinstance(spend, dict)
    assert spend["iterations"] == 2
    assert spend["tokens"] == ends[-1]["tokens"]
    assert spend["costUsd"] == ends[-1]["costUsd"] and float(spend["costUsd"]) > 0
    assert all(r["path"].startswith("/v1/messages") or r["method"] == "HEAD" for r in run.requests)
    assert_nothing_left_behind(e2e_repo)


def test_continue_resumes_the_first_session(tmp_path: Path, e2e_repo: Path) -> None:
    (e2e_repo / "PROMPT.md").write_text(PROMPT)
    run = run_offline(
        tmp_path,
        e2e_repo,
        script="continue",
        autopilot_args=[
            "run",
            "--agent",
            "claude",
            "-f",
            "PROMPT.md",
            "--continue",
            "--max-iterations",
            "5",
        ],
        set_env=_claude_env(),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    ends = [e for e in run.events if e["type"] == "iteration_end"]
    assert [e["iteration"] for e in ends] == [1, 2]
    assert ends[0]["sessionId"] == ends[1]["sessionId"]
    assert "not finished" in str(ends[0]["excerpt"])
    assert run.state["terminationReason"] == "completion_promise"
    assert run.state["sessionId"] == ends[0]["sessionId"]
    second_argv = (run.run_dir / "iter-0002" / "prompt.md").exists()
    assert second_argv
    assert (e2e_repo / "hello.txt").read_text().splitlines() == [
        "hello from the fake model",
        "second-turn",
    ]
    assert_nothing_left_behind(e2e_repo)


def test_auth_failure_halts_with_the_agents_own_message(tmp_path: Path, e2e_repo: Path) -> None:
    run = run_offline(
        tmp_path,
        e2e_repo,
        script="auth-401",
        autopilot_args=["run", "--agent", "claude", "-p", PROMPT, "--max-iterations", "5"],
        set_env=_claude_env(),
    )
    assert run.returncode == 1, run.stdout + run.stderr
    ends = [e for e in run.events if e["type"] == "iteration_end"]
    assert len(ends) == 1
    assert ends[0]["outcome"] == "agent_error"
    terminal = run.events[-1]
    assert (terminal["type"], terminal["reason"]) == ("abort", "agent_failing")
    assert "Invalid API key" in str(terminal["note"])
    assert_nothing_left_behind(e2e_repo)
