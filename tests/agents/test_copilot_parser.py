"""The Copilot CLI adapter on every captured JSON output (Copilot CLI 1.0.102)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopilot.agents.base import (
    MAX_ARG_BYTES,
    InvocationRequest,
    SessionUsage,
    apply_usage_baseline,
)
from autopilot.agents.copilot import CopilotAdapter
from autopilot.core.structs import replace
from autopilot.core.vocabulary import ErrorKind
from autopilot.errors import UsageError
from tests.agents.streams import STREAMS, Want, captures, check, fixed_clock, run, run_lines

# stdout carries no input token counts (--usage-output-file does) and no cost.
NONE = (None, None)
RETRIED = "Failed to get response from the AI model; retried 5 times (total retry wait time: "
CASES = {
    "errors-and-more/copilot1.jsonl": Want(
        0, "DONE", "e6739824-5de1-4a07-8999-d8f01633c04b", NONE, 1
    ),
    # The root's task tool and the subagent's bash call.
    "errors-and-more/copilot_sub.jsonl": Want(
        0, "DONE", "1b73659c-c028-4ccd-9850-015fa31075f7", NONE, 2
    ),
    "errors-and-more/copilot_401.jsonl": Want(
        1,
        None,
        "a581ab73-455e-437e-9f9a-25a6ca5a20e4",
        NONE,
        0,
        ErrorKind.AUTH,
        error="Authentication failed with provider at http://127.0.0.1:18080/v1 (HTTP 401).\n"
        "  Check your COPILOT_PROVIDER_API_KEY, COPILOT_PROVIDER_API_KEY_COMMAND, or "
        "COPILOT_PROVIDER_BEARER_TOKEN.",
    ),
    "errors-and-more/copilot_429.jsonl": Want(
        1,
        None,
        "44da1e41-eed5-4eb0-af62-4e933131448e",
        NONE,
        0,
        ErrorKind.RATE_LIMIT,
        error=RETRIED
        + "5.58 seconds) Last error: 429 fake rate_limit_exceeded: You exceeded your current quota",
    ),
    "errors-and-more/copilot_500.jsonl": Want(
        1,
        None,
        "86131878-6fb4-489f-9f27-1b32a82eeb43",
        NONE,
        0,
        ErrorKind.SERVER,
        error=RETRIED
        + "16.67 seconds) Last error: 500 fake server_error: You exceeded your current quota",
    ),
    # session.error says rate_limit; the provider body of the last failed call says
    # usage_limit_reached with resets_at 1796029262 (epoch s).
    "errors-and-more/copilot_usage.jsonl": Want(
        1,
        None,
        "d63c7844-ecea-4f77-8020-fed404a0e7d0",
        NONE,
        0,
        ErrorKind.USAGE_LIMIT,
        reset_at_ms=1_796_029_262_000,
        error=RETRIED + "52.46 seconds) Last error: 429 The usage limit has been reached",
    ),
}


def test_every_copilot_capture_is_covered() -> None:
    assert set(captures("copilot")) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_normalised(name: str) -> None:
    want = CASES[name]
    check(run(CopilotAdapter("copilot", clock=fixed_clock), name, want.exit_code), want)


def test_subagent_text_is_kept_out_of_the_final_message() -> None:
    adapter = CopilotAdapter("copilot")
    parser = adapter.new_parser()
    lines = (STREAMS / "errors-and-more/copilot_sub.jsonl").read_text().splitlines()
    sub_texts = []
    for line in lines:
        event = json.loads(line)
        if "agentId" in event and event["type"] == "assistant.message":
            event["data"]["content"] = event["data"]["content"] and "SUBAGENT: COMPLETE"
        if event["type"] == "assistant.message" and "agentId" not in event:
            continue  # drop the root's own messages: only subagent text is left
        sub_texts += [e.text for e in parser.feed(json.dumps(event)) if e.subagent and e.text]
    report = parser.report()
    assert "SUBAGENT: COMPLETE" in sub_texts
    assert report.final_message is None
    assert report.last_root_text is None
    assert report.tool_calls == 2


SESSION = "e6739824-5de1-4a07-8999-d8f01633c04b"


def _request(prompt: str, resume: str | None = None) -> InvocationRequest:
    return InvocationRequest(prompt, Path("/iter-0001/p.md"), Path("/repo"), "gpt-5", resume)


def test_invocation() -> None:
    adapter = CopilotAdapter("/usr/bin/env")
    fresh = adapter.build_invocation(_request("go"))
    usage = ["--usage-output-file", "/iter-0001/copilot-usage.json"]
    assert fresh.argv[1:] == [
        "--output-format", "json", "--allow-all-tools", "--no-ask-user", "--no-auto-update",
        "--model", "gpt-5", "-C", "/repo", *usage, "-p", "go",
    ]  # fmt: skip
    assert fresh.stdin is None
    resumed = adapter.build_invocation(_request("- [ ] go", resume=SESSION))
    assert resumed.argv[-5:] == [f"--resume={SESSION}", *usage, "-p", "- [ ] go"]


def test_huge_prompt_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=str(MAX_ARG_BYTES)):
        CopilotAdapter("/usr/bin/env").build_invocation(_request("x" * (MAX_ARG_BYTES + 1)))


# `--usage-output-file` of Copilot CLI 1.0.102 after three model calls (trimmed).
USAGE_FILE = {
    "totalPremiumRequestCost": 0,
    "totalUserRequests": 1,
    "modelMetrics": {
        "fake-model": {
            "requests": {"count": 3, "cost": 0},
            "usage": {
                "inputTokens": 300,
                "outputTokens": 60,
                "cacheReadTokens": 0,
                "cacheWriteTokens": 0,
            },
        },
        "fake-small": {"usage": {"inputTokens": 25, "outputTokens": 5}},
    },
    "currentModel": "fake-model",
    "lastCallInputTokens": 100,
    "lastCallOutputTokens": 20,
}


def test_tokens_come_from_the_usage_file(tmp_path: Path) -> None:
    adapter = CopilotAdapter("/usr/bin/env")
    prompt_path = tmp_path / "iter-0001" / "prompt.md"
    prompt_path.parent.mkdir()
    usage_file = prompt_path.with_name("copilot-usage.json")
    usage_file.write_text("stale from an earlier attempt")
    request = InvocationRequest("go", prompt_path, Path("/repo"))
    argv = adapter.build_invocation(request).argv
    assert argv[argv.index("--usage-output-file") + 1] == str(usage_file)
    assert not usage_file.exists()
    usage_file.write_text(json.dumps(USAGE_FILE))
    lines = [
        {"type": "assistant.message", "data": {"content": "done", "outputTokens": 7}},
        {"type": "result", "sessionId": SESSION, "exitCode": 0},
    ]
    result = run_lines(adapter, lines)
    assert result.verdict.ok
    assert (result.report.input_tokens, result.report.output_tokens) == (325, 65)
    # The session's totals: a resumed session's next iteration counts only its share.
    assert result.report.session_usage == SessionUsage(SESSION, 325, 65)
    later = replace(result.report, session_usage=SessionUsage(SESSION, 425, 85))
    delta = apply_usage_baseline(later, result.report.session_usage)
    assert (delta.input_tokens, delta.output_tokens) == (100, 20)


@pytest.mark.parametrize("content", [None, "", "{not json", '{"modelMetrics": 3}', "x" * 2**21])
def test_a_missing_or_odd_usage_file_leaves_the_stream_counts(
    tmp_path: Path, content: str | None
) -> None:
    adapter = CopilotAdapter("/usr/bin/env")
    prompt_path = tmp_path / "prompt.md"
    adapter.build_invocation(InvocationRequest("go", prompt_path, Path("/repo")))
    if content is not None:
        prompt_path.with_name("copilot-usage.json").write_text(content)
    lines = [
        {"type": "assistant.message", "data": {"content": "done", "outputTokens": 7}},
        {"type": "result", "sessionId": SESSION, "exitCode": 0},
    ]
    result = run_lines(adapter, lines)
    assert (result.report.input_tokens, result.report.output_tokens) == (0, 7)
