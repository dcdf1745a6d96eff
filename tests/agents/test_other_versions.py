"""Output shapes of other versions of the CLIs, seen in streams other projects captured.

Each fixture is written from a description of a real stream (the verified versions'
own output is in ``tests/data/captured-streams/``); each test names what the stream
must be read as.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from autopilot.agents.claude import ClaudeAdapter
from autopilot.agents.codex import CodexAdapter
from autopilot.agents.copilot import CopilotAdapter
from autopilot.agents.failures import needs_payment
from autopilot.agents.gemini import GeminiAdapter
from autopilot.agents.opencode import OpencodeAdapter
from autopilot.agents.pi import PiAdapter
from autopilot.core.vocabulary import AgentEventKind, ErrorKind
from tests.agents.streams import fixed_clock, run_lines

SESSION = "9d2c6a51-7f0e-4b8a-9c3d-2e1f0a7b6c5d"
OUT_OF_EXTRA = "You're out of extra usage · resets Apr 24, 4am (Asia/Tokyo)"
APR_24_4AM_TOKYO_MS = (
    int(datetime(2027, 4, 24, 4, 0, tzinfo=ZoneInfo("Asia/Tokyo")).timestamp()) * 1000
)


def _claude(*lines: str | dict[str, Any], exit_code: int = 0) -> Any:
    return run_lines(ClaudeAdapter("claude", clock=fixed_clock), lines, exit_code)


def _init(**extra: Any) -> dict[str, Any]:
    return {"type": "system", "subtype": "init", "session_id": SESSION, "model": "m", **extra}


def _assistant(text: str, error: str | None = None) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": None,
        "session_id": SESSION,
    }
    if error is not None:
        line["error"] = error
    return line


def _result(text: str | None, *, is_error: bool = False, **extra: Any) -> dict[str, Any]:
    line: dict[str, Any] = {"type": "result", "subtype": "success", "is_error": is_error}
    if text is not None:
        line["result"] = text
    return {**line, "session_id": SESSION, **extra}


# --- Gemini CLI: an invalid stream after a finished answer ---------------------------

INVALID_STREAM = "Invalid stream: The model returned an empty response or malformed tool call."


def _gemini_invalid_stream(answer: list[str]) -> list[dict[str, Any]]:
    chunks = [
        {"type": "message", "role": "assistant", "content": chunk, "delta": True}
        for chunk in answer
    ]
    return [
        {"type": "init", "session_id": SESSION, "model": "gemini-2.5-pro"},
        {"type": "message", "role": "user", "content": "go"},
        *chunks,
        {"type": "tool_use", "tool_name": "write_todos", "tool_id": "t9", "parameters": {}},
        {"type": "error", "severity": "error", "message": INVALID_STREAM},
        {"type": "result", "status": "error", "stats": {"input_tokens": 90, "output_tokens": 9}},
    ]


def test_gemini_answer_before_an_invalid_stream_is_the_final_message() -> None:
    answer = ["All tests pass.\n", "<promise>COMPLETE</promise>"]
    result = run_lines(GeminiAdapter("gemini"), _gemini_invalid_stream(answer), 0)
    assert result.verdict.ok is True
    assert result.report.final_message == "All tests pass.\n<promise>COMPLETE</promise>"
    assert result.report.last_warning == INVALID_STREAM
    assert result.report.is_error is False
    assert (result.report.input_tokens, result.report.output_tokens) == (90, 9)


def test_gemini_invalid_stream_without_an_answer_fails_with_its_words() -> None:
    result = run_lines(GeminiAdapter("gemini"), _gemini_invalid_stream([]), 0)
    assert result.verdict.ok is False
    assert result.verdict.message == INVALID_STREAM
    assert result.report.final_message is None


def test_gemini_text_after_a_tool_result_is_a_new_answer() -> None:
    lines = [
        {"type": "message", "role": "assistant", "content": "Let me look.", "delta": True},
        {"type": "tool_use", "tool_name": "ls", "tool_id": "t1", "parameters": {}},
        {"type": "tool_result", "tool_id": "t1", "status": "success", "output": "a.py"},
        {"type": "result", "status": "success", "stats": {}},
    ]
    assert run_lines(GeminiAdapter("gemini"), lines).report.final_message is None


# --- Usage credit: Claude Code and pi -------------------------------------------------


def test_claude_out_of_extra_usage_result_waits_for_its_reset() -> None:
    result = _claude(
        _init(),
        _assistant(OUT_OF_EXTRA, error="rate_limit"),
        _result(OUT_OF_EXTRA, is_error=True),
        exit_code=1,
    )
    assert result.verdict.error_kind is ErrorKind.USAGE_LIMIT
    assert result.verdict.message == OUT_OF_EXTRA
    assert result.verdict.reset_at_ms == APR_24_4AM_TOKYO_MS
    assert result.report.reset_at_ms == APR_24_4AM_TOKYO_MS


def test_claude_notice_as_a_bare_line_after_a_rejected_limit_is_the_error() -> None:
    rejected = {
        "type": "rate_limit_event",
        "rate_limit_info": {"status": "rejected", "rateLimitType": "overage"},
        "session_id": SESSION,
    }
    result = _claude(_init(), rejected, OUT_OF_EXTRA, exit_code=1)
    assert result.report.bad_lines == 0
    assert result.verdict.ok is False
    assert result.verdict.error_kind is ErrorKind.USAGE_LIMIT
    assert result.verdict.message == OUT_OF_EXTRA
    assert result.verdict.reset_at_ms == APR_24_4AM_TOKYO_MS


def test_claude_rejected_limit_counts_when_no_result_follows() -> None:
    rejected = {
        "type": "rate_limit_event",
        "rate_limit_info": {
            "status": "rejected",
            "resetsAt": 1796040000,
            "rateLimitType": "five_hour",
        },
    }
    result = _claude(_init(), rejected, exit_code=1)
    assert result.verdict.error_kind is ErrorKind.USAGE_LIMIT
    assert result.verdict.message == "five_hour limit reached"
    assert result.verdict.reset_at_ms == 1_796_040_000_000


def test_claude_out_of_extra_usage_without_a_reset_halts() -> None:
    notice = "You're out of extra usage. Add more at claude.ai/settings/usage and keep going."
    result = _claude(_init(), _result(notice, is_error=True), exit_code=1)
    assert result.verdict.error_kind is ErrorKind.USAGE_LIMIT
    assert result.verdict.reset_at_ms is None
    assert needs_payment(result.verdict.message)


def test_pi_400_out_of_extra_usage_is_a_usage_limit_that_halts() -> None:
    body = json.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "You're out of extra usage. Add more at claude.ai/settings/usage "
                "and keep going.",
            },
        }
    )
    failed = {
        "role": "assistant",
        "content": [],
        "stopReason": "error",
        "errorMessage": f"400 {body}",
        "usage": {"input": 0, "output": 0},
    }
    lines = [
        {"type": "session", "version": 3, "id": SESSION},
        {"type": "message_end", "message": failed},
        {"type": "agent_end"},
    ]
    result = run_lines(PiAdapter("pi", clock=fixed_clock), lines, 0)
    assert result.verdict.error_kind is ErrorKind.USAGE_LIMIT
    assert result.verdict.message == f"400 {body}"
    assert result.verdict.reset_at_ms is None
    assert needs_payment(result.verdict.message)


# --- Claude Code: background agents and 1.0.x ------------------------------------------


def test_claude_background_agent_cycles_add_up() -> None:
    first_usage = {"input_tokens": 100, "cache_read_input_tokens": 20, "output_tokens": 10}
    second_usage = {"input_tokens": 50, "output_tokens": 5}
    result = _claude(
        _init(),
        _assistant("Started a background agent."),
        _result("Started a background agent.", usage=first_usage, total_cost_usd=0.01),
        _init(),
        _assistant("The background agent finished. COMPLETE"),
        _result(
            "The background agent finished. COMPLETE", usage=second_usage, total_cost_usd=0.015
        ),
    )
    report = result.report
    assert result.verdict.ok
    assert (report.input_tokens, report.output_tokens) == (170, 15)
    assert report.cost_usd == 0.015  # total_cost_usd is the process's running total
    assert report.final_message == "The background agent finished. COMPLETE"


def test_claude_model_usage_totals_count_when_larger() -> None:
    model_usage = {
        "claude-opus": {"inputTokens": 300, "cacheReadInputTokens": 50, "outputTokens": 30},
        "claude-haiku": {"inputTokens": 40, "outputTokens": 4},
    }
    usage = {"input_tokens": 100, "output_tokens": 10}
    result = _claude(_init(), _result("done", usage=usage, modelUsage=model_usage))
    assert (result.report.input_tokens, result.report.output_tokens) == (390, 34)


def test_a_new_cycle_waits_for_its_own_result() -> None:
    adapter = ClaudeAdapter("claude")
    parser = adapter.new_parser()
    for line in (_init(), _result("first"), _init()):
        parser.feed(json.dumps(line))
    assert parser.report().result_seen is False


def test_claude_1_0_error_during_execution_is_a_failed_turn() -> None:
    ended = {
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": False,
        "session_id": SESSION,
        "num_turns": 3,
    }
    result = _claude(_init(), _assistant("Working on it."), ended, exit_code=0)
    assert result.verdict.ok is False
    assert result.report.final_message is None
    assert result.verdict.message == "Claude Code ended with error_during_execution"


# --- Copilot CLI: output tokens on assistant.message -----------------------------------


def test_copilot_output_tokens_on_assistant_messages_are_counted() -> None:
    def message(text: str, tokens: int) -> dict[str, Any]:
        return {"type": "assistant.message", "data": {"content": text, "outputTokens": tokens}}

    lines = [
        message("Looking.", 12),
        {**message("sub", 7), "agentId": "a1"},
        message("Done. COMPLETE", 30),
        {"type": "result", "sessionId": SESSION, "exitCode": 0},
    ]
    result = run_lines(CopilotAdapter("copilot"), lines)
    assert result.verdict.ok
    assert (result.report.input_tokens, result.report.output_tokens) == (0, 49)
    assert result.report.final_message == "Done. COMPLETE"


# --- Error kinds -------------------------------------------------------------------------


def test_claude_connection_refused_is_a_network_error() -> None:
    text = "API Error: Connection refused"
    result = _claude(
        _init(), _assistant(text, "unknown"), _result(text, is_error=True), exit_code=1
    )
    assert result.verdict.error_kind is ErrorKind.NETWORK


def test_claude_404_model_error_is_an_invalid_request() -> None:
    text = (
        'API Error: 404 {"type":"error","error":{"type":"not_found_error",'
        '"message":"model: claude-nonexistent"}}'
    )
    result = _claude(
        _init(),
        _assistant(text, "unknown"),
        _result(text, is_error=True, api_error_status=404),
        exit_code=1,
    )
    assert result.verdict.error_kind is ErrorKind.INVALID_REQUEST


def test_codex_reconnecting_then_killed_is_a_network_error() -> None:
    reconnect = "Reconnecting... 1/5 (stream disconnected before completion: idle timeout)"
    lines = [
        {"type": "thread.started", "thread_id": SESSION},
        {"type": "turn.started"},
        {"type": "error", "message": reconnect},
    ]
    result = run_lines(CodexAdapter("codex"), lines, exit_code=-15)
    assert result.verdict.error_kind is ErrorKind.NETWORK
    assert result.verdict.message == reconnect


def test_opencode_model_not_found_is_an_invalid_request() -> None:
    error = {
        "type": "error",
        "timestamp": 1796133961952,
        "sessionID": "ses_dce12c627ffeJXsQ17ejo3gp6U",
        "error": {"name": "UnknownError", "data": {"message": "Model not found: fake/nope."}},
    }
    result = run_lines(OpencodeAdapter("opencode"), [error], exit_code=1)
    assert result.verdict.error_kind is ErrorKind.INVALID_REQUEST
    assert result.verdict.message == "Model not found: fake/nope."
    named = {**error, "error": {"name": "ProviderModelNotFoundError", "data": {}}}
    result = run_lines(OpencodeAdapter("opencode"), [named], exit_code=1)
    assert result.verdict.error_kind is ErrorKind.INVALID_REQUEST


def test_limit_events_are_rate_limit_events() -> None:
    result = _claude(_init(), _result(OUT_OF_EXTRA, is_error=True), exit_code=1)
    assert [e.kind for e in result.events] == [AgentEventKind.SESSION, AgentEventKind.RATE_LIMIT]


def test_session_ids_of_another_shape_are_dropped(tmp_path: Path) -> None:
    lines: list[str | dict[str, Any]] = [
        {**_init(), "session_id": "--resume=evil"},
        _result("done", session_id="../../x"),
    ]
    result = _claude(*lines)
    assert result.report.session_id is None
    assert result.verdict.ok
