"""Rate and usage limits: the classifier, reset-time parsing, and the rule that only
the agent's own error events (or a failed exit) count (``docs/architecture.md``; GitHub
issues frankbria/ralph-claude-code#183, umputun/ralphex#321, umputun/ralphex#157,
link-assistant/hive-mind#729)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from autopilot.agents.aider import AiderAdapter
from autopilot.agents.base import AgentAdapter, Classification, IterationReport
from autopilot.agents.claude import ClaudeAdapter
from autopilot.agents.codex import CodexAdapter
from autopilot.agents.copilot import CopilotAdapter
from autopilot.agents.failures import classify_error_text, status_from_text
from autopilot.agents.gemini import GeminiAdapter
from autopilot.agents.limits import (
    epoch_to_ms,
    parse_reset_time,
    parse_retry_after,
    reset_from_fields,
)
from autopilot.agents.opencode import OpencodeAdapter
from autopilot.agents.pi import PiAdapter
from autopilot.core.vocabulary import ErrorKind
from tests.agents.streams import fixed_clock, run

EDMONTON = ZoneInfo("America/Edmonton")
NOW = datetime(2026, 11, 30, 20, 30, tzinfo=EDMONTON)  # 8:30 pm in Edmonton


def ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


# --- the classifier -----------------------------------------------------------------

LIMITS = [
    ("429 fake rate_limit_exceeded: You exceeded your current quota", ErrorKind.RATE_LIMIT),
    ("exceeded retry limit, last status: 429 Too Many Requests", ErrorKind.RATE_LIMIT),
    ("API Error: Request rejected (429) · This request would exceed the rate limit", ErrorKind.RATE_LIMIT),
    ("[API Error: fake RESOURCE_EXHAUSTED]\nPlease wait and try again later.", ErrorKind.RATE_LIMIT),
    ("The API provider has rate limited you. Try again later or check your quotas.", ErrorKind.RATE_LIMIT),
    ("429 The usage limit has been reached", ErrorKind.USAGE_LIMIT),
    ("Quota exceeded. Check your plan and billing details.", ErrorKind.USAGE_LIMIT),
    ("You've hit your limit · resets 7pm", ErrorKind.USAGE_LIMIT),
    ("You’ve hit your session limit · resets 10:20pm (America/Edmonton)", ErrorKind.USAGE_LIMIT),
    ("Weekly limit reached", ErrorKind.USAGE_LIMIT),
    ("You've hit your usage limit. Upgrade to Pro (…) or try again at 8:53 AM.", ErrorKind.USAGE_LIMIT),
    ('{"type":"error","error":{"type":"usage_limit_reached","resets_at":1777936568},"status_code":429}', ErrorKind.USAGE_LIMIT),
    ("Claude AI usage limit reached|1750000000", ErrorKind.USAGE_LIMIT),
]  # fmt: skip
OTHER_ERRORS = [
    ("401 fake invalid_api_key: You exceeded your current quota", ErrorKind.AUTH),
    ("unexpected status 401 Unauthorized: invalid_api_key, url: http://127.0.0.1:18080/v1", ErrorKind.AUTH),
    ("Authentication failed with provider at http://x/v1 (HTTP 401).", ErrorKind.AUTH),
    ("Not logged in · Please run /login", ErrorKind.AUTH),
    ("We’re currently experiencing high demand, which may cause temporary errors.", ErrorKind.SERVER),
    ('[API Error: {"error":{"code":500,"message":"fake INTERNAL"}}]', ErrorKind.SERVER),
    ("500 fake server_error: You exceeded your current quota", ErrorKind.SERVER),
    ("Reconnecting... waiting for network (Connection failed: error sending request)", ErrorKind.NETWORK),
    ("Connection error.", ErrorKind.NETWORK),
    ("No conversation found with session ID: 1234", ErrorKind.SESSION_NOT_FOUND),
    ("No session found matching 'abc'", ErrorKind.SESSION_NOT_FOUND),
    ("Error: Session not found", ErrorKind.SESSION_NOT_FOUND),
]  # fmt: skip
NOT_LIMITS = [
    "publish-intent rate limiting has a race window",
    "Cannot find module '@upstash/ratelimit'",
    "TypeError: rateLimit is not a function",
    "respect the 5-hour limit",
    "the ratelimiter and the rate-limiting middleware",
    "usage: limits [-h]",
    "quota.ts: 3 tests failed",
    "Processed 429 files",
]


@pytest.mark.parametrize(("text", "kind"), LIMITS + OTHER_ERRORS)
def test_classifier_positive(text: str, kind: ErrorKind) -> None:
    assert classify_error_text(text) is kind


@pytest.mark.parametrize("text", NOT_LIMITS)
def test_classifier_negative(text: str) -> None:
    assert classify_error_text(text) not in (ErrorKind.RATE_LIMIT, ErrorKind.USAGE_LIMIT)


def test_structured_status_outranks_words() -> None:
    assert classify_error_text("You exceeded your current quota", 401) is ErrorKind.AUTH
    assert classify_error_text("anything", 503) is ErrorKind.SERVER
    assert status_from_text("Processed 429 files") is None
    assert status_from_text('{"statusCode":429}') == 429


# --- reset times ----------------------------------------------------------------------

RESETS = [
    # Epoch seconds vs milliseconds.
    ('{"resets_at":1777936568,"resets_in_seconds":13872}', 1_777_936_568_000),
    ('"resetsAt": 1777936568123', 1_777_936_568_123),
    ("Claude AI usage limit reached|1750000000", 1_750_000_000_000),
    # Delays.
    ('{"type":"usage_limit_reached","resets_in_seconds":13872}', ms(NOW) + 13_872_000),
    ("retry-after: 30", ms(NOW) + 30_000),
    ('"retryDelay": "23s"', ms(NOW) + 23_000),
    ("try again in 2 days 17 hours 14 minutes.", ms(NOW + timedelta(days=2, hours=17, minutes=14))),
    ("Try again in 5 hours, 3 minutes and 10 seconds", ms(NOW + timedelta(hours=5, minutes=3, seconds=10))),
    ("Please retry in 23.5s.", ms(NOW) + 23_500),
    # Clock times: later today, or tomorrow once passed (rollover past midnight).
    ("You've hit your session limit · resets 10:20pm (America/Edmonton)", ms(datetime(2026, 11, 30, 22, 20, tzinfo=EDMONTON))),
    ("You've hit your limit · resets 7pm", ms(datetime(2026, 12, 1, 19, 0, tzinfo=EDMONTON))),
    ("resets 12:30am", ms(datetime(2026, 12, 1, 0, 30, tzinfo=EDMONTON))),
    ("try again at 8:53 AM.", ms(datetime(2026, 12, 1, 8, 53, tzinfo=EDMONTON))),
    ("resets 10:20pm (Europe/Berlin)", ms(datetime(2026, 12, 1, 22, 20, tzinfo=ZoneInfo("Europe/Berlin")))),
    ("resets 3:15 a.m. (Asia/Tokyo)", ms(datetime(2026, 12, 2, 3, 15, tzinfo=ZoneInfo("Asia/Tokyo")))),
    ("resets 19:00 (UTC)", ms(datetime(2026, 12, 1, 19, 0, tzinfo=UTC))),
    ("resets Dec 2, 1pm (Europe/Berlin)", ms(datetime(2026, 12, 2, 13, 0, tzinfo=ZoneInfo("Europe/Berlin")))),
    ("resets Jan 5 at 9am", ms(datetime(2027, 1, 5, 9, 0, tzinfo=EDMONTON))),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), RESETS)
def test_reset_parsed(text: str, expected: int) -> None:
    assert parse_reset_time(text, NOW) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Please wait and try again later.",
        "try again in a moment",
        "retry 3 times",
        "resets 5",
        "resets 25:00",
        "resets 13pm",
        "publish-intent rate limiting has a race window",
    ],
)
def test_no_reset_in_text(text: str) -> None:
    assert parse_reset_time(text, NOW) is None


ENDLESS = "9" * 400
"""A delay no limit has: as a float, infinite."""


@pytest.mark.parametrize(
    "text",
    [
        f"try again in {ENDLESS} hours",
        f"Please retry in {ENDLESS}.5s",
        f"retry-after: {ENDLESS}",
        f'{{"resets_in_seconds": {ENDLESS}}}',
        f'"retryDelay": "{ENDLESS}s"',
        "try again in 99999999999999 days",  # finite, but after the year 5138
    ],
    ids=["hours", "seconds", "retry-after", "json-field", "retry-delay", "after-5138"],
)
def test_an_endless_delay_in_text_is_no_reset(text: str) -> None:
    assert parse_reset_time(text, NOW) is None
    stderr = f"429 Too Many Requests: {text}\n"
    verdict = CodexAdapter("codex", clock=fixed_clock).classify(IterationReport(), 1, stderr)
    assert verdict.error_kind is ErrorKind.RATE_LIMIT and verdict.reset_at_ms is None


@pytest.mark.parametrize(
    "fields",
    [
        {"retry-after": "inf"},
        {"retry-after": ENDLESS},
        {"retry-after": "Fri, 31 Dec 9999 23:59:59 GMT"},
        {"retry-after-ms": "Infinity"},
        {"retry_after": float("inf")},
        {"retryAfter": float("nan")},
        {"retryDelay": f"{ENDLESS}s"},
        {"error": {"resets_in_seconds": 10**20}},
    ],
)
def test_an_endless_delay_in_fields_is_no_reset(fields: dict[str, object]) -> None:
    assert reset_from_fields(fields, NOW) is None


def test_unknown_zone_falls_back_to_the_local_zone() -> None:
    assert parse_reset_time("resets 9pm (Not/AZone)", NOW) == ms(
        datetime(2026, 11, 30, 21, 0, tzinfo=EDMONTON)
    )


def test_reset_in_the_past_is_returned_as_is() -> None:
    # The loop then waits its minimum backoff instead (issue umputun/ralphex#157: a cached
    # resets_at in the past must not collapse every wait to nothing).
    past = parse_reset_time('{"resets_at": 1700000000}', NOW)
    assert past == 1_700_000_000_000
    assert past < ms(NOW)


def test_clock_time_is_never_in_the_past() -> None:
    just_after = datetime(2026, 11, 30, 19, 0, 1, tzinfo=EDMONTON)
    reset = parse_reset_time("resets 7pm", just_after)
    assert reset == ms(datetime(2026, 12, 1, 19, 0, tzinfo=EDMONTON))


def test_naive_now_means_utc() -> None:
    naive = datetime(2026, 11, 30, 8, 0)
    assert parse_reset_time("resets 9am (UTC)", naive) == ms(datetime(2026, 11, 30, 9, tzinfo=UTC))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1777936568, 1_777_936_568_000),
        (1777936568.5, 1_777_936_568_500),
        (1777936568123, 1_777_936_568_123),
        ("1777936568", 1_777_936_568_000),
        (0, None),
        (-5, None),
        (True, None),
        ("soon", None),
        (123456, None),
    ],
)
def test_epoch_seconds_or_milliseconds(value: object, expected: int | None) -> None:
    assert epoch_to_ms(value) == expected


def test_retry_after_seconds_or_http_date() -> None:
    assert parse_retry_after("120", NOW) == ms(NOW) + 120_000
    assert parse_retry_after("Mon, 30 Nov 2026 08:13:47 GMT", NOW) == ms(
        datetime(2026, 11, 30, 8, 13, 47, tzinfo=UTC)
    )
    assert parse_retry_after("whenever", NOW) is None


def test_reset_from_structured_fields() -> None:
    headers = {"content-type": "application/json", "retry-after": "1"}
    assert reset_from_fields(headers, NOW) == ms(NOW) + 1000
    body = json.dumps({"error": {"type": "usage_limit_reached", "resets_at": 1796029262}})
    # An absolute reset in an error body wins over a header delay.
    fields = {"responseBody": body, "responseHeaders": headers}
    assert reset_from_fields(fields, NOW) == 1_796_029_262_000
    assert (
        reset_from_fields({"rate_limit_info": {"resetsAt": 1796040000}}, NOW) == 1_796_040_000_000
    )
    assert reset_from_fields({"retry-after-ms": "2500"}, NOW) == ms(NOW) + 2500
    assert reset_from_fields({"resets_in_seconds": 60}, NOW) == ms(NOW) + 60_000
    assert reset_from_fields({"message": "no reset here"}, NOW) is None


# --- real captures: every 429 / usage-limit stream is a limit ----------------------------

CAPTURED_LIMITS = [
    (ClaudeAdapter, "errors-and-more/claude_429.jsonl", 1, ErrorKind.RATE_LIMIT, None),
    (CodexAdapter, "errors-and-more/codex_429.jsonl", 1, ErrorKind.USAGE_LIMIT, None),
    (CopilotAdapter, "errors-and-more/copilot_429.jsonl", 1, ErrorKind.RATE_LIMIT, None),
    (CopilotAdapter, "errors-and-more/copilot_usage.jsonl", 1, ErrorKind.USAGE_LIMIT, 1_796_029_262_000),
    (GeminiAdapter, "errors-and-more/gemini_429.jsonl", 173, ErrorKind.RATE_LIMIT, None),
    (OpencodeAdapter, "errors-and-more/oc_429.jsonl", 1, ErrorKind.RATE_LIMIT, 1_796_026_427_701),
    (PiAdapter, "errors-and-more/pi_429.jsonl", 0, ErrorKind.RATE_LIMIT, None),
    (PiAdapter, "errors-and-more/pi_usage.jsonl", 0, ErrorKind.USAGE_LIMIT, None),
    (AiderAdapter, "errors-and-more/aider_429.out", 0, ErrorKind.RATE_LIMIT, None),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "name", "exit_code", "kind", "reset"), CAPTURED_LIMITS)
def test_real_limit_captures(
    cls: type[AgentAdapter], name: str, exit_code: int, kind: ErrorKind, reset: int | None
) -> None:
    adapter = cls("agent", clock=fixed_clock)  # type: ignore[call-arg]
    result = run(adapter, name, exit_code)
    assert result.verdict.ok is False
    assert result.verdict.error_kind is kind
    assert result.verdict.reset_at_ms == reset
    assert result.report.reset_at_ms == reset


# --- only the agent's own error events count -------------------------------------------


def _lines(
    adapter: AgentAdapter, events: list[dict[str, object]], exit_code: int, stderr: str = ""
) -> tuple[IterationReport, Classification]:
    parser = adapter.new_parser()
    for event in events:
        parser.feed(json.dumps(event))
    report = parser.report()
    return report, adapter.classify(report, exit_code, stderr)


REVIEW = (
    "Review: the publish-intent rate limiting has a race window; `rateLimit` in "
    "@upstash/ratelimit is never awaited. You've hit your limit of 3 retries."
)


def test_codex_review_text_about_rate_limits_is_not_a_limit() -> None:
    # Issue umputun/ralphex#321: Codex review text with exit 0.
    events: list[dict[str, object]] = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": REVIEW}},
        {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ]
    report, verdict = _lines(CodexAdapter("codex"), events, 0)
    assert verdict.ok
    assert report.final_message == REVIEW
    # Even a failed exit does not make the model's prose a limit.
    report, verdict = _lines(CodexAdapter("codex"), events[:2], 1)
    assert verdict.error_kind is ErrorKind.UNKNOWN
    assert report.reset_at_ms is None


def test_tool_output_mentioning_limits_is_not_a_limit() -> None:
    # Issue frankbria/ralph-claude-code#183: exit 124 (timeout) while a tool_result echoed a project file.
    echoed = "# PROMPT.md\nAlways respect the 5-hour limit. Rate limit: 429 Too Many Requests."
    events: list[dict[str, object]] = [
        {"type": "system", "subtype": "init", "session_id": "s"},
        {
            "type": "assistant",
            "message": {"content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
            "parent_tool_use_id": None,
        },
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": echoed}]
            },
            "parent_tool_use_id": None,
        },
        {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": "I hit the rate limit (429)."}]},
            "parent_tool_use_id": None,
        },
    ]
    report, verdict = _lines(ClaudeAdapter("claude"), events, 124)
    assert verdict.ok is False
    assert verdict.error_kind is ErrorKind.UNKNOWN
    assert report.reset_at_ms is None


def test_upstash_ratelimit_in_output_of_a_successful_run() -> None:
    events: list[dict[str, object]] = [
        {"type": "init", "session_id": "s"},
        {"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "a", "parameters": {}},
        {"type": "tool_result", "tool_id": "a", "status": "success", "output": "npm i @upstash/ratelimit\nrateLimit ok"},
        {"type": "message", "role": "assistant", "content": "Added rateLimit via @upstash/ratelimit", "delta": True},
        {"type": "result", "status": "success", "stats": {}},
    ]  # fmt: skip
    _, verdict = _lines(GeminiAdapter("gemini"), events, 0)
    assert verdict.ok


def test_failed_exit_with_known_message_on_stderr_is_a_limit() -> None:
    # A failed process whose own stderr names the limit: classified, reset parsed.
    now = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
    adapter = ClaudeAdapter("claude", clock=lambda: now)
    _, verdict = _lines(adapter, [], 1, "You've hit your limit · resets 7pm (UTC)\n")
    assert verdict.error_kind is ErrorKind.USAGE_LIMIT
    assert verdict.reset_at_ms == ms(datetime(2026, 11, 30, 19, 0, tzinfo=UTC))
    # The same words with exit 0 and a good result are nothing.
    ok_events: list[dict[str, object]] = [{"type": "result", "is_error": False, "result": "done"}]
    _, verdict = _lines(adapter, ok_events, 0, "You've hit your limit · resets 7pm (UTC)\n")
    assert verdict.ok
