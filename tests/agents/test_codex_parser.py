"""The Codex adapter on every captured ``codex exec --json`` stream (Codex 0.171.0)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from autopilot.agents.base import (
    MAX_ARG_BYTES,
    Classification,
    InvocationRequest,
    IterationReport,
    SessionUsage,
    apply_usage_baseline,
)
from autopilot.agents.codex import CodexAdapter
from autopilot.core.vocabulary import ErrorKind
from tests.agents.streams import CAPTURED_AT, Want, captures, check, fixed_clock, run

S1 = "01a22b71-91bd-7210-96f3-f60698d27248"
S2 = "01a22b71-8fe7-7a43-8a4e-620fbc93ca16"
NO_TOKENS = (None, None)
CASES = {
    "codex-stream.jsonl": Want(0, "done. COMPLETE", S1, (200, 40), 1),
    "codex-stream-resume.jsonl": Want(0, "second turn done. COMPLETE", S1, (400, 80), 1),
    "errors-and-more/codex1.jsonl": Want(0, "DONE", S2, (24, 10), 1),
    "errors-and-more/codex4.jsonl": Want(
        0, "DONE", "01a22b77-39e6-7230-9d30-22dbe5345d2a", (24, 10), 1
    ),
    "errors-and-more/codex_resume.jsonl": Want(0, "DONE", S2, (36, 15), 0),
    "errors-and-more/codex_stop.jsonl": Want(
        0, "DONE", "01a22b76-def4-7ce0-9bf2-b4ccfaf23902", (36, 15), 1
    ),
    "errors-and-more/codex_401.jsonl": Want(
        1,
        None,
        "01a22b71-a612-7c90-98bd-f2850a119d68",
        NO_TOKENS,
        0,
        ErrorKind.AUTH,
        error="unexpected status 401 Unauthorized: fake invalid_api_key: You exceeded your "
        "current quota, url: http://127.0.0.1:18080/v1/responses",
    ),
    "errors-and-more/codex_429.jsonl": Want(
        1,
        None,
        "01a22b71-a4ae-75b0-bc6c-5878ac28e73e",
        NO_TOKENS,
        0,
        ErrorKind.USAGE_LIMIT,
        error="Quota exceeded. Check your plan and billing details.",
    ),
    "errors-and-more/codex_500.jsonl": Want(
        1,
        None,
        "01a22b71-a709-7f80-8c55-03469e37e647",
        NO_TOKENS,
        0,
        ErrorKind.SERVER,
        error="We’re currently experiencing high demand, which may cause temporary errors.",
    ),
    # Killed by the driver while Codex waited for the network (it never gives up).
    "errors-and-more/codex_net.jsonl": Want(
        -15,
        None,
        "01a22b73-a381-7100-9368-470ff2ac7d33",
        NO_TOKENS,
        0,
        ErrorKind.NETWORK,
        error="Reconnecting... waiting for network (Connection failed: error sending request)",
    ),
}
NOT_STREAMS = {"errors-and-more/codex_stop_hook_inputs.jsonl"}


def test_every_codex_capture_is_covered() -> None:
    assert set(captures("codex")) == set(CASES) | NOT_STREAMS


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_normalised(name: str) -> None:
    want = CASES[name]
    check(run(CodexAdapter("codex", clock=fixed_clock), name, want.exit_code), want)


def test_hook_input_file_is_not_a_result() -> None:
    result = run(CodexAdapter("codex"), "errors-and-more/codex_stop_hook_inputs.jsonl", 0)
    assert result.report.result_seen is False
    assert result.report.final_message is None
    assert result.verdict.ok is False


def test_error_items_are_warnings_not_failures() -> None:
    # codex1 starts with an error *item* ("Model metadata ... not found") and succeeds.
    result = run(CodexAdapter("codex"), "errors-and-more/codex1.jsonl", 0)
    assert result.verdict.ok
    assert result.report.is_error is False


def test_stray_text_line_is_skipped() -> None:
    result = run(CodexAdapter("codex"), "errors-and-more/codex4.jsonl", 0)
    assert result.report.bad_lines == 1  # "Reading additional input from stdin..."
    assert result.verdict.ok


def test_stop_hook_continuation_keeps_the_last_message() -> None:
    result = run(CodexAdapter("codex"), "errors-and-more/codex_stop.jsonl", 0)
    assert result.texts(subagent=False) == ["DONE", "DONE"]
    assert result.report.final_message == "DONE"


def test_resumed_thread_usage_becomes_a_per_iteration_delta() -> None:
    first = run(CodexAdapter("codex"), "codex-stream.jsonl").report
    second = run(CodexAdapter("codex"), "codex-stream-resume.jsonl").report
    assert second.session_usage == SessionUsage("01a22b71-91bd-7210-96f3-f60698d27248", 400, 80)
    delta = apply_usage_baseline(second, first.session_usage)
    assert (delta.input_tokens, delta.output_tokens) == (200, 40)
    # The same for the other captured pair (codex1 then its resume).
    before = run(CodexAdapter("codex"), "errors-and-more/codex1.jsonl").report
    after = run(CodexAdapter("codex"), "errors-and-more/codex_resume.jsonl").report
    delta = apply_usage_baseline(after, before.session_usage)
    assert (delta.input_tokens, delta.output_tokens) == (12, 5)


def test_baseline_of_another_session_is_ignored() -> None:
    report = run(CodexAdapter("codex"), "codex-stream.jsonl").report
    other = SessionUsage("another-thread", 10, 1)
    assert apply_usage_baseline(report, other) is report
    assert apply_usage_baseline(report, None) is report
    shrunk = SessionUsage(report.session_id or "", 500, 500)  # totals went down
    assert apply_usage_baseline(report, shrunk) is report


def _feed(
    lines: list[dict[str, object]], exit_code: int = 1
) -> tuple[IterationReport, Classification]:
    adapter = CodexAdapter("codex", clock=fixed_clock)
    parser = adapter.new_parser()
    for line in lines:
        parser.feed(json.dumps(line))
    report = parser.report()
    return report, adapter.classify(report, exit_code, "")


def _failed(message: str) -> list[dict[str, object]]:
    return [
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "turn.started"},
        {"type": "error", "message": message},
        {"type": "turn.failed", "error": {"message": message}},
    ]


def test_usage_limit_with_clock_reset() -> None:
    message = (
        "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) "
        "or try again at 8:53 AM."
    )
    report, verdict = _feed(_failed(message))
    expected = int((CAPTURED_AT + timedelta(minutes=53)).timestamp() * 1000)
    assert verdict.error_kind is ErrorKind.USAGE_LIMIT
    assert verdict.reset_at_ms == expected
    assert report.reset_at_ms == expected


def test_usage_limit_with_relative_reset() -> None:
    message = "You've hit your usage limit. Try again in 2 days 17 hours 14 minutes."
    _, verdict = _feed(_failed(message))
    delay = timedelta(days=2, hours=17, minutes=14)
    assert verdict.reset_at_ms == int((CAPTURED_AT + delay).timestamp() * 1000)


def test_rate_limit_retry_exhausted() -> None:
    _, verdict = _feed(_failed("exceeded retry limit, last status: 429 Too Many Requests"))
    assert verdict.error_kind is ErrorKind.RATE_LIMIT


def test_invocation_fresh_and_resume() -> None:
    adapter = CodexAdapter("/usr/bin/env")
    request = InvocationRequest("do it", Path("/tmp/p.md"), Path("/repo"), model="gpt-x")
    invocation = adapter.build_invocation(request)
    assert invocation.argv[1:] == [
        "exec",
        "--json",
        "--dangerously-bypass-approvals-and-sandbox",
        "--skip-git-repo-check",
        "--disable",
        "unbounded_connection_retries",
        "--model",
        "gpt-x",
        "-C",
        "/repo",
        "--",
        "do it",
    ]
    assert invocation.stdin is None  # /dev/null: Codex appends piped stdin to the prompt
    resumed = adapter.build_invocation(
        InvocationRequest("again", Path("/tmp/p.md"), Path("/repo"), resume_session_id=S2)
    )
    assert resumed.argv[-5:] == ["/repo", "resume", S2, "--", "again"]


def test_huge_prompt_goes_on_stdin() -> None:
    prompt = "x" * (MAX_ARG_BYTES + 1)
    invocation = CodexAdapter("/usr/bin/env").build_invocation(
        InvocationRequest(prompt, Path("/tmp/p.md"), Path("/repo"))
    )
    assert invocation.argv[-1] == "-"
    assert invocation.stdin == prompt.encode()
