"""The Claude Code adapter on every captured stream-json output (Claude Code 2.1.197)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from autopilot.agents.base import Classification, IterationReport, PermissionDenial
from autopilot.agents.claude import ClaudeAdapter
from autopilot.core.vocabulary import ErrorKind
from tests.agents.streams import STREAMS, Want, captures, check, fixed_clock, run

S1 = "eab24a57-a0dc-4669-98eb-2837131cf8d3"
S2 = "b1fb9019-4296-4646-a12a-4d3ce1dcefea"
ZERO = (0, 0)
CASES = {
    "claude-stream.jsonl": Want(0, "done. COMPLETE", S1, (200, 40), 1, cost=0.002),
    "claude-stream-resume.jsonl": Want(
        0, "second turn done. COMPLETE", S1, (200, 40), 1, cost=0.002
    ),
    "errors-and-more/claude1.jsonl": Want(0, "DONE", S2, (24, 10), 1, cost=0.000222),
    "errors-and-more/claude_resume.jsonl": Want(0, "DONE", S2, (12, 5), 0, cost=0.000111),
    "errors-and-more/claude_stop.jsonl": Want(
        0, "DONE", "f3087397-0bfe-46de-bb16-164086ded675", (36, 15), 1, cost=0.000555
    ),
    # modelUsage counts the subagent's tokens too (48/20); usage only the main thread's.
    "errors-and-more/claude_sub.jsonl": Want(
        0, "DONE", "c64e7213-b731-4e70-a007-7b77a68853fb", (48, 20), 2, cost=0.00074
    ),
    "errors-and-more/claude_401.jsonl": Want(
        1,
        None,
        "927b97e9-1a27-4c77-8b4b-e48210b52673",
        ZERO,
        0,
        ErrorKind.AUTH,
        cost=0.0,
        error="Failed to authenticate. API Error: 401 fake authentication_error",
    ),
    "errors-and-more/claude_429.jsonl": Want(
        1,
        None,
        "e00710ea-03d1-4795-8eef-191312054505",
        ZERO,
        0,
        ErrorKind.RATE_LIMIT,
        cost=0.0,
        error="API Error: Request rejected (429) · fake rate_limit_error",
    ),
    "errors-and-more/claude_500.jsonl": Want(
        1,
        None,
        "076f1901-56ff-4964-96a7-8148d24b752a",
        ZERO,
        0,
        ErrorKind.SERVER,
        cost=0.0,
        error="API Error: 500 fake api_error. This is a server-side issue, usually temporary "
        "— try again in a moment. If it persists, check your inference gateway "
        "(127.0.0.1:18080).",
    ),
    # The assistant error says server_error for a refused connection; the words say
    # what it was.
    "errors-and-more/claude_net.jsonl": Want(
        1,
        None,
        "02cf8cd8-3838-4430-9f01-3f9e7446e914",
        ZERO,
        0,
        ErrorKind.NETWORK,
        cost=0.0,
        error="API Error: Unable to connect to API (ConnectionRefused)",
    ),
    "errors-and-more/claude_noauth.jsonl": Want(
        1,
        None,
        "5c77f853-68d0-4e44-96ff-6dccdc8cf4f6",
        ZERO,
        0,
        ErrorKind.AUTH,
        cost=0.0,
        error="Not logged in · Please run /login",
    ),
}
NOT_STREAMS = {"errors-and-more/claude_stop_hook_inputs.jsonl"}


def test_every_claude_capture_is_covered() -> None:
    assert set(captures("claude")) == set(CASES) | NOT_STREAMS


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_normalised(name: str) -> None:
    want = CASES[name]
    check(run(ClaudeAdapter("claude", clock=fixed_clock), name, want.exit_code), want)


def test_subagent_text_is_kept_out_of_the_final_message() -> None:
    result = run(ClaudeAdapter("claude"), "errors-and-more/claude_sub.jsonl", 0)
    # The subagent's Bash call is counted; its lines are flagged as subagent content.
    assert result.report.tool_calls == 2
    sub_calls = [e for e in result.events if e.subagent and e.tool_name == "Bash"]
    assert len(sub_calls) == 1
    assert result.texts(subagent=False) == ["DONE"]


def test_hook_input_file_is_not_a_result() -> None:
    result = run(ClaudeAdapter("claude"), "errors-and-more/claude_stop_hook_inputs.jsonl", 0)
    assert result.report.result_seen is False
    assert result.report.final_message is None
    assert result.verdict.ok is False


def _session(
    *lines: dict[str, object], exit_code: int = 1
) -> tuple[IterationReport, Classification]:
    adapter = ClaudeAdapter("claude", clock=fixed_clock)
    parser = adapter.new_parser()
    for line in lines:
        parser.feed(json.dumps(line))
    report = parser.report()
    return report, adapter.classify(report, exit_code, "")


def _limit_result(text: str) -> list[dict[str, object]]:
    return [
        {"type": "system", "subtype": "init", "session_id": "s"},
        {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": text}]},
            "parent_tool_use_id": None,
            "error": "rate_limit",
        },
        {"type": "result", "subtype": "success", "is_error": True, "result": text},
    ]


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def test_subscription_limit_text_is_a_usage_limit_with_its_reset() -> None:
    edmonton = ZoneInfo("America/Edmonton")
    report, verdict = _session(
        *_limit_result("You've hit your session limit · resets 10:20pm (America/Edmonton)")
    )
    # 08:00 UTC is 01:00 in Edmonton: 22:20 the same local day.
    expected = _ms(datetime(2026, 11, 30, 22, 20, tzinfo=edmonton))
    assert report.error_kind is ErrorKind.USAGE_LIMIT
    assert report.reset_at_ms == expected
    assert verdict.reset_at_ms == expected


def test_reset_clock_time_rolls_over_past_midnight() -> None:
    report, _ = _session(*_limit_result("You've hit your limit · resets 7am (UTC)"))
    assert report.reset_at_ms == _ms(datetime(2026, 12, 1, 7, 0, tzinfo=UTC))


def test_legacy_usage_limit_epoch() -> None:
    report, _ = _session(*_limit_result("Claude AI usage limit reached|1796032800"))
    assert report.error_kind is ErrorKind.USAGE_LIMIT
    assert report.reset_at_ms == 1_796_032_800_000


def test_rate_limit_event_reset_wins() -> None:
    event = {
        "type": "rate_limit_event",
        "rate_limit_info": {
            "status": "rejected",
            "resetsAt": 1796040000,
            "rateLimitType": "five_hour",
        },
    }
    report, verdict = _session(event, *_limit_result("You've hit your limit · resets 7pm"))
    assert report.reset_at_ms == 1_796_040_000_000
    assert verdict.reset_at_ms == 1_796_040_000_000


def test_failed_exit_without_result_is_classified_from_stderr_only() -> None:
    adapter = ClaudeAdapter("claude", clock=fixed_clock)
    report = IterationReport()
    verdict = adapter.classify(report, 1, "Error: Invalid API key · Please run /login\n")
    assert verdict.error_kind is ErrorKind.AUTH
    assert verdict.message == "Error: Invalid API key · Please run /login"


def test_json_array_output_is_read_like_stream_json() -> None:
    # Issue frankbria/ralph-claude-code#112: `--output-format json` prints one array of every message.
    from autopilot.agents.claude import ClaudeStreamParser

    lines = (STREAMS / "claude-stream.jsonl").read_text().splitlines()
    array = "[" + ",".join(line for line in lines if line.strip()) + "]"
    parser = ClaudeStreamParser()
    parser.feed(array)
    report = parser.report()
    assert report.result_seen and report.final_message == "done. COMPLETE"
    assert report.session_id == "eab24a57-a0dc-4669-98eb-2837131cf8d3"
    single = ClaudeStreamParser()
    single.feed(next(line for line in lines if '"type":"result"' in line))
    assert single.report().final_message == "done. COMPLETE"
    broken = ClaudeStreamParser()
    assert broken.feed('{"type": "result", "result": ') == []
    assert broken.report().result_seen is False and broken.report().bad_lines == 1


def test_permission_denials_are_read_from_the_result() -> None:
    # Claude Code 2.1.197 with `--settings '{"permissions":{"deny":["Bash(cat:*)"]}}'`.
    denied = {
        "tool_name": "Bash",
        "tool_use_id": "toolu_0ada26c62a6cde2706d3f958",
        "tool_input": {
            "command": "cat hello.txt 2>/dev/null || echo MISSING",
            "description": "Run cat hello.txt 2>/dev/null || echo MISSING",
        },
    }
    edit = {"tool_name": "Edit", "tool_use_id": "t2", "tool_input": {"file_path": "/w/a.py"}}
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "wrote hello.txt; will verify next iteration.",
        "permission_denials": [denied, edit, "junk", {"tool_input": {}}],
    }
    report, verdict = _session(result, exit_code=0)
    assert verdict.ok
    assert report.permission_denials == (
        PermissionDenial("Bash", "cat hello.txt 2>/dev/null || echo MISSING"),
        PermissionDenial("Edit", "/w/a.py"),
        PermissionDenial("tool", None),
    )
    report, _ = _session({**result, "permission_denials": []}, exit_code=0)
    assert report.permission_denials == ()
