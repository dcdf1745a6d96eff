"""The real GitHub Copilot CLI (1.0.102) driven by ``autopilot run``, offline.

Copilot takes a custom provider (BYOK) entirely from the environment, and
``COPILOT_OFFLINE=true`` skips GitHub auth, telemetry and auto-update. The key is long
because Copilot masks the key's text wherever it appears in its output. Tokens come from
``--usage-output-file``; there is no cost. A 429 with ``retry-after`` is waited out by
Copilot itself.
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
# The 429 window, from the server's start: long enough that the first model call
# falls inside it on a slow machine (Copilot takes ~1.5 s to make its first call).
WINDOW = 8
LIMITS = ["--iteration-timeout", "120", "--idle-timeout", "60"]


def _argv(run: E2ERun, repo: Path, iteration: int, *resume: str) -> list[str]:
    usage_file = run.run_dir / f"iter-{iteration:04d}" / "copilot-usage.json"
    prompt = sent_prompt(run, iteration)
    assert prompt.startswith(PROMPT)  # then the memory file's paragraph
    return [
        "--output-format", "json", "--allow-all-tools", "--no-ask-user", "--no-auto-update",
        "-C", str(repo), *resume, "--usage-output-file", str(usage_file), "-p", prompt,
    ]  # fmt: skip


def _run(
    tmp_path: Path,
    repo: Path,
    script: str,
    args: list[str],
    *,
    fail_for_seconds: float | None = None,
) -> tuple[E2ERun, Path]:
    copilot_home = tmp_path / "home" / ".copilot"
    copilot_home.mkdir(parents=True)
    wrapper, argv_folder = argv_recorder(tmp_path, cli_path("copilot"))
    (repo / "PROMPT.md").write_text(PROMPT)
    run = run_offline(
        tmp_path,
        repo,
        script=script,
        autopilot_args=["run", "--agent", "copilot", "-f", "PROMPT.md", *LIMITS, *args],
        set_env={
            "AUTOPILOT_COPILOT_BIN": str(wrapper),
            "COPILOT_HOME": str(copilot_home),
            "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PROVIDER_BASE_URL": "{base_url}/v1",
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_MODEL": "fake-model",
            "COPILOT_PROVIDER_API_KEY": "fake-provider-key-0123456789abcdef",
        },
        fail_for_seconds=fail_for_seconds,
        unset_env=("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN", "COPILOT_ALLOW_ALL"),
    )
    return run, argv_folder


def test_fresh_sessions_complete_at_iteration_two(tmp_path: Path, e2e_repo: Path) -> None:
    run, argv_folder = _run(tmp_path, e2e_repo, "check-then-write", ["--max-iterations", "5"])
    ends = assert_completed_at_two(run, e2e_repo)
    assert (e2e_repo / "hello.txt").read_text() == "hello from the fake model\n"
    assert ends[0]["progress"] == "made" and ends[0]["filesChanged"] == 1
    assert "<promise>COMPLETE</promise>" in str(ends[1]["excerpt"])
    assert ends[0]["sessionId"] and ends[0]["sessionId"] != ends[1]["sessionId"]
    assert [e["toolCalls"] for e in ends] == [2, 1]
    assert_spend_agrees(run, per_call_usage=True, cost=False)  # from --usage-output-file
    assert_only_model_api(run, ["/v1/chat/completions"])
    assert recorded_argvs(argv_folder) == [_argv(run, e2e_repo, 1), _argv(run, e2e_repo, 2)]
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
    assert first == _argv(run, e2e_repo, 1)
    assert second == _argv(run, e2e_repo, 2, f"--resume={session}")
    assert "not finished yet" in json.dumps(run.requests[-1]["body"])
    assert_spend_agrees(run, per_call_usage=True, cost=False)
    assert_nothing_left_behind(e2e_repo)


def test_auth_failure_halts_with_the_agents_own_message(tmp_path: Path, e2e_repo: Path) -> None:
    run, _ = _run(tmp_path, e2e_repo, "auth-401", ["--max-iterations", "5"])
    assert_auth_halt(run, "Authentication failed with provider at")
    assert "(HTTP 401)" in str(run.state["terminationNote"])
    assert_nothing_left_behind(e2e_repo)


def test_rate_limit_is_waited_out_by_copilot(tmp_path: Path, e2e_repo: Path) -> None:
    run, _ = _run(
        tmp_path, e2e_repo, "check-then-write", ["--max-iterations", "5"], fail_for_seconds=WINDOW
    )
    assert_recovered_on_its_own(run, e2e_repo, needed_calls=5)
    stdout = (run.run_dir / "iter-0001" / "stdout.log").read_text()
    assert '"type":"model.call_failure"' in stdout and '"statusCode":429' in stdout
    assert_nothing_left_behind(e2e_repo)
