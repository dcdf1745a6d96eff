"""The aider adapter on every captured ``aider --message`` output (aider 0.86.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autopilot.agents.aider import AiderAdapter
from autopilot.agents.base import MAX_ARG_BYTES, InvocationRequest
from autopilot.core.vocabulary import ErrorKind
from tests.agents.streams import Want, captures, check, run

NONE = (None, None)
OPENAI = "OpenAIException - fake"
# aider always exits 0; it has no session ids and its text cannot show tool calls.
CASES = {
    "errors-and-more/aider1.out": Want(0, "DONE", None, (12, 5), None),
    "errors-and-more/aider_401.out": Want(
        0,
        None,
        None,
        NONE,
        None,
        ErrorKind.AUTH,
        error=f"litellm.AuthenticationError: AuthenticationError: {OPENAI} invalid_api_key: "
        "You exceeded your current quota The API provider is not able to authenticate you. "
        "Check your API key.",
    ),
    "errors-and-more/aider_429.out": Want(
        0,
        None,
        None,
        NONE,
        None,
        ErrorKind.RATE_LIMIT,
        error=f"litellm.RateLimitError: RateLimitError: {OPENAI} rate_limit_exceeded: "
        "You exceeded your current quota The API provider has rate limited you. "
        "Try again later or check your quotas.",
    ),
    "errors-and-more/aider_500.out": Want(
        0,
        None,
        None,
        NONE,
        None,
        ErrorKind.SERVER,
        error=f"litellm.InternalServerError: InternalServerError: {OPENAI} server_error: "
        "You exceeded your current quota The API provider's servers are down or overloaded.",
    ),
}


def test_every_aider_capture_is_covered() -> None:
    assert set(captures("aider")) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_normalised(name: str) -> None:
    want = CASES[name]
    check(run(AiderAdapter("aider"), name, want.exit_code), want)


def _parse(text: str) -> tuple[bool, str | None, int | None, float | None]:
    adapter = AiderAdapter("aider")
    parser = adapter.new_parser()
    for line in text.splitlines():
        parser.feed(line)
    report = parser.report()
    return (
        adapter.classify(report, 0, "").ok,
        report.final_message,
        report.input_tokens,
        (report.cost_usd),
    )


def test_error_then_successful_retry_is_a_success() -> None:
    ok, final, tokens, cost = _parse(
        "Aider v0.86.2\n"
        "litellm.RateLimitError: RateLimitError: OpenAIException - slow down\n"
        "The API provider has rate limited you. Try again later or check your quotas.\n"
        "Retrying in 0.2 seconds...\n"
        "First paragraph.\n\nSecond paragraph.\n\n"
        "Tokens: 2.5k sent, 1.2k received. Cost: $0.01 message, $0.02 session.\n"
    )
    assert ok
    assert final == "First paragraph.\n\nSecond paragraph."
    assert tokens == 2500
    assert cost == pytest.approx(0.01)


def test_reply_quoting_an_error_sentence_is_not_an_error() -> None:
    ok, final, _, _ = _parse(
        "Model: openai/x\n"
        "The API provider has rate limited you. Try again later or check your quotas.\n\n"
        "Tokens: 12 sent, 5 received.\n"
    )
    assert ok
    assert final is not None and final.startswith("The API provider")


def test_no_reply_at_all_is_a_failure() -> None:
    ok, final, _, _ = _parse("Aider v0.86.2\nModel: openai/x\n")
    assert (ok, final) == (False, None)


def _request(prompt: str) -> InvocationRequest:
    return InvocationRequest(prompt, Path("/runs/r/iter-0001/prompt.md"), Path("/repo"), "openai/x")


def test_invocation() -> None:
    adapter = AiderAdapter("/usr/bin/env")
    invocation = adapter.build_invocation(_request("fix it"))
    assert invocation.argv[1:] == [
        "--yes-always", "--no-pretty", "--no-stream", "--no-auto-commits", "--no-check-update",
        "--analytics-disable", "--no-show-model-warnings", "--no-show-release-notes",
        "--model", "openai/x", "--message", "fix it",
    ]  # fmt: skip
    assert invocation.stdin is None
    assert adapter.supports_sessions is False


@pytest.mark.parametrize("prompt", ["--help me", "x" * (MAX_ARG_BYTES + 1)])
def test_prompt_argv_cannot_carry_goes_by_file(prompt: str) -> None:
    invocation = AiderAdapter("/usr/bin/env").build_invocation(_request(prompt))
    assert invocation.argv[-2:] == ["--message-file", "/runs/r/iter-0001/prompt.md"]
