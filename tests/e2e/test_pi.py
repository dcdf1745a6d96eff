"""The real pi coding agent (0.73.1) driven by ``autopilot run``, offline.

pi reads its provider's base URL only from ``models.json``, so that file is a
template the offline runner fills in with the server's port. The model has a price,
so pi reports a cost. pi exits 0 even when the model call failed; the adapter reads
the failure from the stream. A 429 with ``retry-after`` is waited out by pi itself.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import (
    E2ERun,
    argv_recorder,
    assert_auth_halt,
    assert_completed_at_two,
    assert_nothing_left_behind,
    assert_only_model_api,
    assert_recovered_on_its_own,
    assert_spend_agrees,
    cli_path,
    recorded_argvs,
    run_offline,
    sent_prompt,
)

PROMPT = "Make sure hello.txt exists. When it does, say COMPLETE.\n"

MODELS = {
    "providers": {
        "fake": {
            "baseUrl": "{base_url}/v1",
            "api": "openai-completions",
            "apiKey": "dummy",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [
                {
                    "id": "fake-model",
                    "contextWindow": 128000,
                    "maxTokens": 8192,
                    "cost": {"input": 1.0, "output": 2.0, "cacheRead": 0, "cacheWrite": 0},
                }
            ],
        }
    }
}

LIMITS = ["--iteration-timeout", "120", "--idle-timeout", "60"]


def _run(
    tmp_path: Path,
    repo: Path,
    script: str,
    args: list[str],
    *,
    fail_for_seconds: float | None = None,
) -> tuple[E2ERun, Path]:
    agent_dir = tmp_path / "pi-agent"
    agent_dir.mkdir()
    template = tmp_path / "models.json.template"
    template.write_text(json.dumps(MODELS))
    wrapper, argv_folder = argv_recorder(tmp_path, cli_path("pi"))
    (repo / "PROMPT.md").write_text(PROMPT)
    run = run_offline(
        tmp_path,
        repo,
        script=script,
        autopilot_args=[
            "run",
            "--agent",
            "pi",
            "-f",
            "PROMPT.md",
            "--model",
            "fake/fake-model",
            *LIMITS,
            *args,
        ],
        set_env={
            "AUTOPILOT_PI_BIN": str(wrapper),
            "PI_CODING_AGENT_DIR": str(agent_dir),
            "PI_OFFLINE": "1",
            "PI_TELEMETRY": "0",
        },
        templates={template: agent_dir / "models.json"},
        fail_for_seconds=fail_for_seconds,
        unset_env=("OPENAI_API_KEY", "OPENAI_BASE_URL"),
    )
    return run, argv_folder


def test_fresh_sessions_complete_at_iteration_two(tmp_path: Path, e2e_repo: Path) -> None:
    run, argv_folder = _run(tmp_path, e2e_repo, "check-then-write", ["--max-iterations", "5"])
    ends = assert_completed_at_two(run, e2e_repo)
    assert (e2e_repo / "hello.txt").read_text() == "hello from the fake model\n"
    assert ends[0]["progress"] == "made" and ends[0]["filesChanged"] == 1
    assert "<promise>COMPLETE</promise>" in str(ends[1]["excerpt"])
    assert ends[0]["sessionId"] and ends[0]["sessionId"] != ends[1]["sessionId"]
    assert_spend_agrees(run, per_call_usage=True, cost=True)
    assert_only_model_api(run, ["/v1/chat/completions"])
    argvs = recorded_argvs(argv_folder)
    assert sent_prompt(run).startswith(PROMPT)
    assert argvs == [["--mode", "json", "--model", "fake/fake-model", sent_prompt(run)]] * 2
    assert_nothing_left_behind(e2e_repo)


def test_continue_resumes_the_first_session(tmp_path: Path, e2e_repo: Path) -> None:
    run, argv_folder = _run(tmp_path, e2e_repo, "continue", ["--continue", "--max-iterations", "5"])
    ends = assert_completed_at_two(run, e2e_repo)
    session = ends[0]["sessionId"]
    assert session and ends[1]["sessionId"] == session
    assert run.state["sessionId"] == session
    assert "not finished" in str(ends[0]["excerpt"])
    assert (e2e_repo / "hello.txt").read_text().splitlines() == [
        "hello from the fake model",
        "second-turn",
    ]
    first, second = recorded_argvs(argv_folder)
    assert "--session" not in first
    assert second == [
        "--mode", "json", "--model", "fake/fake-model", "--session", session, sent_prompt(run, 2)
    ]  # fmt: skip
    assert "not finished yet" in json.dumps(run.requests[-1]["body"])
    assert_spend_agrees(run, per_call_usage=True, cost=True)
    assert_nothing_left_behind(e2e_repo)


def test_auth_failure_halts_with_the_agents_own_message(tmp_path: Path, e2e_repo: Path) -> None:
    run, _ = _run(tmp_path, e2e_repo, "auth-401", ["--max-iterations", "5"])
    assert_auth_halt(run, "401 Incorrect API key provided")
    assert iteration_exit_codes(run) == [0]  # pi exits 0 on a failed call
    assert_nothing_left_behind(e2e_repo)


def test_rate_limit_is_waited_out_by_pi(tmp_path: Path, e2e_repo: Path) -> None:
    run, _ = _run(
        tmp_path, e2e_repo, "check-then-write", ["--max-iterations", "5"], fail_for_seconds=6
    )
    assert_recovered_on_its_own(run, e2e_repo, needed_calls=5)
    assert_spend_agrees(run, per_call_usage=False, cost=True)
    assert_nothing_left_behind(e2e_repo)


def iteration_exit_codes(run: E2ERun) -> list[object]:
    """The agent's exit code of each iteration."""
    return [e["exitCode"] for e in run.events if e["type"] == "iteration_end"]
