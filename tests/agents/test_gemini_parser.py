"""The Gemini CLI adapter on every captured stream-json output (Gemini CLI 0.61.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopilot.agents.base import MAX_ARG_BYTES, InvocationRequest, IterationReport
from autopilot.agents.gemini import GeminiAdapter, exit_kind
from autopilot.core.vocabulary import ErrorKind
from autopilot.errors import UsageError
from tests.agents.streams import Want, captures, check, fixed_clock, run

ZERO = (0, 0)
CASES = {
    "errors-and-more/gemini1.jsonl": Want(
        0, "DONE", "b3fdf468-c312-4448-8df7-95099b95bca6", (24, 10), 1
    ),
    # API errors exit with the HTTP status mod 256 (Gemini CLI 0.61.0).
    "errors-and-more/gemini_401.jsonl": Want(
        145,
        None,
        "af2286f9-8d3a-427e-bb2b-520923f9655f",
        ZERO,
        0,
        ErrorKind.AUTH,
        error='[API Error: {"error":{"code":401,"message":"fake UNAUTHENTICATED",'
        '"status":"UNAUTHENTICATED"}}]',
    ),
    "errors-and-more/gemini_429.jsonl": Want(
        173,
        None,
        "d477dc07-8576-4c10-b252-64cbf10fa20d",
        ZERO,
        0,
        ErrorKind.RATE_LIMIT,
        error="[API Error: fake RESOURCE_EXHAUSTED]\nPlease wait and try again later. To "
        "increase your limits, request a quota increase through AI Studio, or switch to "
        "another /auth method",
    ),
    "errors-and-more/gemini_500.jsonl": Want(
        244,
        None,
        "02268b23-3261-4422-b9bb-a7efb75ee69f",
        ZERO,
        0,
        ErrorKind.SERVER,
        error='[API Error: {"error":{"code":500,"message":"fake INTERNAL","status":"INTERNAL"}}]',
    ),
}


def test_every_gemini_capture_is_covered() -> None:
    assert set(captures("gemini")) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_normalised(name: str) -> None:
    want = CASES[name]
    check(run(GeminiAdapter("gemini", clock=fixed_clock), name, want.exit_code), want)


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (173, ErrorKind.RATE_LIMIT),
        (145, ErrorKind.AUTH),
        (244, ErrorKind.SERVER),
        (247, ErrorKind.SERVER),
        (41, ErrorKind.AUTH),
        (42, ErrorKind.INVALID_REQUEST),
        (1, None),
        (0, None),
    ],
)
def test_exit_status_meaning(code: int, kind: ErrorKind | None) -> None:
    assert exit_kind(code) == kind


def _parse(*events: dict[str, object]) -> IterationReport:
    parser = GeminiAdapter("gemini").new_parser()
    for event in events:
        parser.feed(json.dumps(event))
    return parser.report()


def test_streamed_chunks_make_the_final_message() -> None:
    report = _parse(
        {"type": "init", "session_id": "s", "model": "m"},
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "content": "Let me look.", "delta": True},
        {"type": "tool_use", "tool_name": "read_file", "tool_id": "t1", "parameters": {}},
        {"type": "tool_result", "tool_id": "t1", "status": "error", "error": {"message": "no"}},
        {"type": "message", "role": "assistant", "content": "All ", "delta": True},
        {"type": "message", "role": "assistant", "content": "done.", "delta": True},
        {"type": "result", "status": "success", "stats": {"input_tokens": 5, "output_tokens": 2}},
    )
    assert report.final_message == "All done."
    assert report.tool_calls == 1
    assert report.model == "m"


def test_exit_zero_without_result_is_a_failure_read_from_stderr() -> None:
    # Issue google-gemini/gemini-cli#6125: "Error when talking to Gemini API" and exit 0.
    adapter = GeminiAdapter("gemini", clock=fixed_clock)
    report = _parse({"type": "init", "session_id": "s"})
    stderr = (
        "Error when talking to Gemini API Full report available at: /nonexistent/"
        'gemini-client-error-x.json _ApiError: {"error":{"code":429,"message":"quota"}}\n'
    )
    verdict = adapter.classify(report, 0, stderr)
    assert verdict.ok is False
    assert verdict.error_kind is ErrorKind.RATE_LIMIT


def test_error_report_file_is_read_when_stderr_has_no_status(tmp_path: Path) -> None:
    report_file = tmp_path / "gemini-client-error-Turn.run-2026.json"
    report_file.write_text('{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}}')
    stderr = f"Error when talking to Gemini API Full report available at: {report_file}\n"
    verdict = GeminiAdapter("gemini").classify(_parse(), 0, stderr)
    assert verdict.error_kind is ErrorKind.RATE_LIMIT


def test_warning_events_do_not_fail_the_run() -> None:
    adapter = GeminiAdapter("gemini")
    report = _parse(
        {"type": "error", "severity": "warning", "message": "Loop detected"},
        {"type": "message", "role": "assistant", "content": "ok"},
        {"type": "result", "status": "success", "stats": {}},
    )
    assert adapter.classify(report, 0, "").ok


def _request(prompt: str, resume: str | None = None) -> InvocationRequest:
    return InvocationRequest(prompt, Path("/tmp/p.md"), Path("/repo"), "gemini-2.5-flash", resume)


def test_invocation() -> None:
    adapter = GeminiAdapter("/usr/bin/env")
    fresh = adapter.build_invocation(_request("go"))
    assert fresh.argv[1:] == [
        "--output-format", "stream-json", "--yolo", "--model", "gemini-2.5-flash", "-p", "go",
    ]  # fmt: skip
    assert fresh.stdin is None  # Gemini adds piped stdin to the prompt
    session = "b3fdf468-c312-4448-8df7-95099b95bca6"
    resumed = adapter.build_invocation(_request("go", resume=session))
    assert resumed.argv[-4:] == ["--resume", session, "-p", "go"]
    dashed = adapter.build_invocation(_request("- [ ] item"))
    assert dashed.argv[-1] == "--prompt=- [ ] item"


def test_huge_prompt_goes_on_stdin_and_too_huge_is_refused() -> None:
    adapter = GeminiAdapter("/usr/bin/env")
    prompt = "y" * (MAX_ARG_BYTES + 1)
    invocation = adapter.build_invocation(_request(prompt))
    assert "-p" not in invocation.argv
    assert invocation.stdin == prompt.encode()
    with pytest.raises(UsageError, match="at most"):
        adapter.build_invocation(_request("z" * (8 * 1024 * 1024 + 1)))
