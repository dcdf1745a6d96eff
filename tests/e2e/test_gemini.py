"""The real Gemini CLI (0.61.0) driven by ``autopilot run``, offline.

Gemini takes the base URL from ``GOOGLE_GEMINI_BASE_URL``; ``settings.json`` selects
API-key auth (otherwise 0.61 resolves to ``gateway`` and exits 41), turns off
telemetry and auto-update, and lowers ``maxAttempts``. The adapter trusts the
folder (``GEMINI_CLI_TRUST_WORKSPACE``): no ``--skip-trust`` is passed here. A 429
with ``retry-after`` is waited out by Gemini itself.
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
    iteration_ends,
    recorded_argvs,
    run_offline,
    sent_prompt,
)

PROMPT = "Make sure hello.txt exists. When it does, say COMPLETE.\n"
MODEL = "gemini-2.5-flash"

SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {
        "enableAutoUpdate": False,
        "enableAutoUpdateNotification": False,
        "maxAttempts": 3,
    },
}

# The 429 window, from the server's start: long enough that the first model call
# falls inside it on a slow machine (Gemini CLI takes ~2 s to make its first call).
WINDOW = 8
LIMITS = ["--iteration-timeout", "120", "--idle-timeout", "60"]
BASE_ARGV = ["--output-format", "stream-json", "--yolo", "--model", MODEL]


def _run(
    tmp_path: Path,
    repo: Path,
    script: str,
    args: list[str],
    *,
    fail_for_seconds: float | None = None,
) -> tuple[E2ERun, Path]:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    wrapper, argv_folder = argv_recorder(tmp_path, cli_path("gemini"))
    (repo / "PROMPT.md").write_text(PROMPT)
    run = run_offline(
        tmp_path,
        repo,
        script=script,
        autopilot_args=[
            "run",
            "--agent",
            "gemini",
            "-f",
            "PROMPT.md",
            "--model",
            MODEL,
            *LIMITS,
            *args,
        ],
        set_env={
            "AUTOPILOT_GEMINI_BIN": str(wrapper),
            "GEMINI_CLI_HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": "{base_url}",
            "GEMINI_API_KEY": "fake-provider-key-0123456789abcdef",
        },
        fail_for_seconds=fail_for_seconds,
        unset_env=(
            "GEMINI_CLI_TRUST_WORKSPACE",
            "GOOGLE_API_KEY",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_GENAI_USE_GCA",
            "GOOGLE_CLOUD_PROJECT",
        ),
    )
    return run, argv_folder


def test_fresh_sessions_complete_at_iteration_two(tmp_path: Path, e2e_repo: Path) -> None:
    run, argv_folder = _run(tmp_path, e2e_repo, "check-then-write", ["--max-iterations", "5"])
    ends = assert_completed_at_two(run, e2e_repo)
    assert (e2e_repo / "hello.txt").read_text() == "hello from the fake model\n"
    assert ends[0]["progress"] == "made" and ends[0]["filesChanged"] == 1
    assert "<promise>COMPLETE</promise>" in str(ends[1]["excerpt"])
    assert ends[0]["sessionId"] and ends[0]["sessionId"] != ends[1]["sessionId"]
    assert_spend_agrees(run, per_call_usage=True, cost=False)
    assert_only_model_api(run, [f"/v1beta/models/{MODEL}:"])
    assert sent_prompt(run).startswith(PROMPT)
    assert recorded_argvs(argv_folder) == [[*BASE_ARGV, "-p", sent_prompt(run)]] * 2
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
    assert first == [*BASE_ARGV, "-p", sent_prompt(run)]
    assert second == [*BASE_ARGV, "--resume", session, "-p", sent_prompt(run, 2)]
    assert "not finished yet" in json.dumps(run.requests[-1]["body"])
    assert_spend_agrees(run, per_call_usage=True, cost=False)
    assert_nothing_left_behind(e2e_repo)


def test_auth_failure_halts_with_the_agents_own_message(tmp_path: Path, e2e_repo: Path) -> None:
    run, _ = _run(tmp_path, e2e_repo, "auth-401", ["--max-iterations", "5"])
    assert_auth_halt(run, "[API Error:")
    assert "invalid authentication credentials" in str(run.state["terminationNote"])
    assert iteration_ends(run)[0]["exitCode"] == 401 % 256  # Gemini exits with the status
    assert_nothing_left_behind(e2e_repo)


def test_rate_limit_is_waited_out_by_gemini(tmp_path: Path, e2e_repo: Path) -> None:
    run, _ = _run(
        tmp_path, e2e_repo, "check-then-write", ["--max-iterations", "5"], fail_for_seconds=WINDOW
    )
    assert_recovered_on_its_own(run, e2e_repo, needed_calls=5)
    assert_spend_agrees(run, per_call_usage=False, cost=False)
    assert_nothing_left_behind(e2e_repo)
