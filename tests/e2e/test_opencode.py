"""The real opencode (1.18.33) driven by ``autopilot run``, offline.

opencode reads its provider's base URL only from the config file named by
``OPENCODE_CONFIG``, so that file is a template the offline runner fills in with the
server's port. The model has a price, so opencode reports a cost. The adapter passes
the prompt on stdin (an argv message with spaces would be re-quoted by ``run``): the
tests check it arrives verbatim. A 429 with ``retry-after`` is waited out by opencode
itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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

# Quotes and spaces: the text must reach the model exactly as written.
PROMPT = 'Make sure "hello.txt" exists. When it does, say COMPLETE.\n'
MODEL = "fake/fake-model"

CONFIG = {
    "autoupdate": False,
    "share": "disabled",
    "model": MODEL,
    "small_model": MODEL,
    "provider": {
        "fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {
                "baseURL": "{base_url}/v1",
                "apiKey": "fake-provider-key-0123456789abcdef",
            },
            "models": {
                "fake-model": {
                    "name": "Fake",
                    "tool_call": True,
                    "cost": {"input": 1.0, "output": 2.0},
                    "limit": {"context": 128000, "output": 8192},
                }
            },
        }
    },
}

OFFLINE_ENV = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}

# The 429 window, from the server's start: long enough that the first model call
# falls inside it on a slow machine (opencode takes ~4 s to make its first call).
WINDOW = 12
LIMITS = ["--iteration-timeout", "120", "--idle-timeout", "60"]


def _base_argv(repo: Path) -> list[str]:
    return ["run", "--format", "json", "--auto", "--model", MODEL, "--dir", str(repo)]


def _run(
    tmp_path: Path,
    repo: Path,
    script: str,
    args: list[str],
    *,
    fail_for_seconds: float | None = None,
) -> tuple[E2ERun, Path]:
    template = tmp_path / "opencode.json.template"
    template.write_text(json.dumps(CONFIG))
    config = tmp_path / "opencode-config" / "opencode.json"
    wrapper, argv_folder = argv_recorder(tmp_path, cli_path("opencode"))
    (repo / "PROMPT.md").write_text(PROMPT)
    run = run_offline(
        tmp_path,
        repo,
        script=script,
        autopilot_args=[
            "run",
            "--agent",
            "opencode",
            "-f",
            "PROMPT.md",
            "--model",
            MODEL,
            *LIMITS,
            *args,
        ],
        set_env={
            "AUTOPILOT_OPENCODE_BIN": str(wrapper),
            "OPENCODE_CONFIG": str(config),
            **OFFLINE_ENV,
        },
        templates={template: config},
        fail_for_seconds=fail_for_seconds,
        unset_env=("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENCODE_CONFIG_CONTENT"),
    )
    return run, argv_folder


def _user_texts(run: E2ERun) -> set[str]:
    """The text of every user message the CLI sent."""
    texts = set()
    for request in run.requests:
        body: Any = request["body"]
        for message in body.get("messages", []) if isinstance(body, dict) else []:
            if message.get("role") == "user":
                content = message.get("content")
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
                texts.add(str(content))
    return texts


def test_fresh_sessions_complete_at_iteration_two(tmp_path: Path, e2e_repo: Path) -> None:
    run, argv_folder = _run(tmp_path, e2e_repo, "check-then-write", ["--max-iterations", "5"])
    ends = assert_completed_at_two(run, e2e_repo)
    assert (e2e_repo / "hello.txt").read_text() == "hello from the fake model\n"
    assert ends[0]["progress"] == "made" and ends[0]["filesChanged"] == 1
    assert "<promise>COMPLETE</promise>" in str(ends[1]["excerpt"])
    assert ends[0]["sessionId"] and ends[0]["sessionId"] != ends[1]["sessionId"]
    assert_spend_agrees(run, per_call_usage=True, cost=True)
    assert_only_model_api(run, ["/v1/chat/completions"])
    # No message argument: the prompt went on stdin and arrived verbatim.
    assert recorded_argvs(argv_folder) == [_base_argv(e2e_repo)] * 2
    assert sent_prompt(run).startswith(PROMPT)
    assert sent_prompt(run) in _user_texts(run)
    assert_nothing_left_behind(e2e_repo)


def test_continue_resumes_the_first_session(tmp_path: Path, e2e_repo: Path) -> None:
    run, argv_folder = _run(tmp_path, e2e_repo, "continue", ["--continue", "--max-iterations", "5"])
    ends = assert_completed_at_two(run, e2e_repo)
    session = ends[0]["sessionId"]
    assert str(session).startswith("ses_") and ends[1]["sessionId"] == session
    assert run.state["sessionId"] == session
    assert "not finished" in str(ends[0]["excerpt"])
    assert (e2e_repo / "hello.txt").read_text().splitlines() == [
        "hello from the fake model",
        "second-turn",
    ]
    first, second = recorded_argvs(argv_folder)
    assert first == _base_argv(e2e_repo)
    assert second == [*_base_argv(e2e_repo), "--session", session]
    assert "not finished yet" in json.dumps(run.requests[-1]["body"])
    assert_spend_agrees(run, per_call_usage=True, cost=True)
    assert_nothing_left_behind(e2e_repo)


def test_auth_failure_halts_with_the_agents_own_message(tmp_path: Path, e2e_repo: Path) -> None:
    run, _ = _run(tmp_path, e2e_repo, "auth-401", ["--max-iterations", "5"])
    assert_auth_halt(run, "Incorrect API key provided")
    stdout = (run.run_dir / "iter-0001" / "stdout.log").read_text()
    assert '"statusCode":401' in stdout  # opencode's own error line, the note's source
    assert_nothing_left_behind(e2e_repo)


def test_rate_limit_is_waited_out_by_opencode(tmp_path: Path, e2e_repo: Path) -> None:
    run, _ = _run(
        tmp_path, e2e_repo, "check-then-write", ["--max-iterations", "5"], fail_for_seconds=WINDOW
    )
    assert_recovered_on_its_own(run, e2e_repo, needed_calls=5)
    assert_spend_agrees(run, per_call_usage=False, cost=True)
    assert_nothing_left_behind(e2e_repo)
