"""The real Codex CLI (0.171.0) driven by ``autopilot run``, offline.

Codex reads its provider's base URL only from ``config.toml``, so the config is a
template the offline runner fills in with the server's port. Codex does not retry a
429 itself (``request_max_retries = 0``): recovery is autopilot's own.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import (
    E2ERun,
    argv_recorder,
    assert_auth_halt,
    assert_completed_at_two,
    assert_nothing_left_behind,
    assert_only_model_api,
    assert_spend_agrees,
    cli_path,
    iteration_ends,
    recorded_argvs,
    run_offline,
    sent_prompt,
    terminal,
)

PROMPT = "Make sure hello.txt exists. When it does, say COMPLETE.\n"

CONFIG = """\
model = "gpt-5.5"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "{base_url}/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
unbounded_connection_retries = false
"""

LIMITS = ["--iteration-timeout", "120", "--idle-timeout", "60"]


def _run(
    tmp_path: Path,
    repo: Path,
    script: str,
    args: list[str],
    *,
    fail_for_seconds: float | None = None,
) -> tuple[E2ERun, Path]:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    template = tmp_path / "config.toml.template"
    template.write_text(CONFIG)
    wrapper, argv_folder = argv_recorder(tmp_path, cli_path("codex"))
    (repo / "PROMPT.md").write_text(PROMPT)
    run = run_offline(
        tmp_path,
        repo,
        script=script,
        autopilot_args=["run", "--agent", "codex", "-f", "PROMPT.md", *LIMITS, *args],
        set_env={
            "AUTOPILOT_CODEX_BIN": str(wrapper),
            "CODEX_HOME": str(codex_home),
            "FAKE_API_KEY": "dummy",
        },
        templates={template: codex_home / "config.toml"},
        fail_for_seconds=fail_for_seconds,
        unset_env=("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY"),
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
    assert_only_model_api(run, ["/v1/responses"])
    argvs = recorded_argvs(argv_folder)
    assert len(argvs) == 2
    assert all("resume" not in argv for argv in argvs)
    sent = sent_prompt(run)
    assert sent.startswith(PROMPT)
    assert all(argv[:2] == ["exec", "--json"] and argv[-2:] == ["--", sent] for argv in argvs)
    assert_nothing_left_behind(e2e_repo)


def test_continue_resumes_the_first_session(tmp_path: Path, e2e_repo: Path) -> None:
    # An agent argument after `--` must reach Codex before `resume`, where
    # `codex exec` still reads options (here: a reasoning effort seen in the request).
    run, argv_folder = _run(
        tmp_path,
        e2e_repo,
        "continue",
        ["--continue", "--max-iterations", "5", "--", "-c", 'model_reasoning_effort="low"'],
    )
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
    assert "resume" not in first
    at = second.index("resume")
    assert second[at : at + 4] == ["resume", session, "--", sent_prompt(run, 2)]
    assert second.index('model_reasoning_effort="low"') < at
    # Codex reports the thread's cumulative usage; each iteration must count its own.
    assert [e["iterationTokens"] for e in ends] == [{"input": 200, "output": 40}] * 2
    assert_spend_agrees(run, per_call_usage=True, cost=False)
    bodies = [r["body"] for r in run.requests]
    assert all(b["reasoning"]["effort"] == "low" for b in bodies)
    # The resumed turn carries the first iteration's answer in its history.
    assert "not finished yet" in str(bodies[-1]["input"])
    assert_nothing_left_behind(e2e_repo)


def test_auth_failure_halts_with_the_agents_own_message(tmp_path: Path, e2e_repo: Path) -> None:
    run, _ = _run(tmp_path, e2e_repo, "auth-401", ["--max-iterations", "5"])
    assert_auth_halt(run, "unexpected status 401 Unauthorized")
    assert_nothing_left_behind(e2e_repo)


def test_rate_limit_waits_and_retries_the_same_iteration(tmp_path: Path, e2e_repo: Path) -> None:
    run, argv_folder = _run(
        tmp_path, e2e_repo, "check-then-write", ["--max-iterations", "5"], fail_for_seconds=5
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert terminal(run) == [("complete", "completion_promise")]
    ends = iteration_ends(run)
    limited = [e for e in ends if e["outcome"] == "rate_limited"]
    assert limited and all(e["iteration"] == 1 for e in limited)
    assert "429 Too Many Requests" in str(limited[0]["error"])
    assert [(e["iteration"], e["outcome"]) for e in ends[len(limited) :]] == [
        (1, "ok"),
        (2, "ok"),
    ]
    events = run.events
    waits = [i for i, e in enumerate(events) if e["type"] == "rate_limited"]
    assert len(waits) == len(limited)
    for at in waits:
        until = events[at]["waitingUntil"]
        assert isinstance(until, int) and until > int(events[at]["ts"])
        retry = events[at + 1]
        assert retry["type"] == "iteration_start" and retry["iteration"] == 1
        assert int(retry["ts"]) >= until  # it waited
    state = run.state
    assert state["spend"]["iterations"] == 2  # the waits spent no iteration
    assert state["spend"]["waitingMs"] > 0
    assert state["iter"] == 2 and state["waitingUntil"] is None
    assert len(recorded_argvs(argv_folder)) == len(limited) + 2
    assert_nothing_left_behind(e2e_repo)
