"""The pi adapter on every captured ``pi --mode json`` stream (pi 0.73.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopilot.agents.base import (
    MAX_ARG_BYTES,
    Classification,
    InvocationRequest,
    IterationReport,
)
from autopilot.agents.pi import PiAdapter
from autopilot.core.vocabulary import ErrorKind
from tests.agents.streams import STREAMS, Want, captures, check, fixed_clock, run

S1 = "01a22b71-d9e2-7225-8872-a292b6163518"
ZERO = (0, 0)
CASES = {
    "pi-stream.jsonl": Want(0, "done. COMPLETE", S1, (200, 40), 1, cost=0.0),
    # pi reports usage per API call, so a resumed session needs no baseline.
    "pi-stream-resume.jsonl": Want(0, "second turn done. COMPLETE", S1, (200, 40), 1, cost=0.0),
    "errors-and-more/pi1.jsonl": Want(
        0, "DONE", "01a22b86-0290-774a-9785-93c3a1411c9c", (24, 10), 1, cost=0.0
    ),
    # --mode json exits 0 after a failed model call: stopReason "error" decides.
    "errors-and-more/pi_401.jsonl": Want(
        0,
        None,
        "01a22b86-bcad-70a6-b5c0-50d4d854ef32",
        ZERO,
        0,
        ErrorKind.AUTH,
        cost=0.0,
        error="401 fake invalid_api_key: You exceeded your current quota",
    ),
    "errors-and-more/pi_429.jsonl": Want(
        0,
        None,
        "01a22b86-159e-75f0-9fbb-14677df471be",
        ZERO,
        0,
        ErrorKind.RATE_LIMIT,
        cost=0.0,
        error="429 fake rate_limit_exceeded: You exceeded your current quota",
    ),
    "errors-and-more/pi_500.jsonl": Want(
        0,
        None,
        "01a22b86-c02e-706e-b4bd-189b433e6296",
        ZERO,
        0,
        ErrorKind.SERVER,
        cost=0.0,
        error="500 fake server_error: You exceeded your current quota",
    ),
    "errors-and-more/pi_usage.jsonl": Want(
        0,
        None,
        "01a22b86-6ec7-711e-bc37-b495086e1be9",
        ZERO,
        0,
        ErrorKind.USAGE_LIMIT,
        cost=0.0,
        error="429 The usage limit has been reached",
    ),
}


def test_every_pi_capture_is_covered() -> None:
    assert set(captures("pi")) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_normalised(name: str) -> None:
    want = CASES[name]
    check(run(PiAdapter("pi", clock=fixed_clock), name, want.exit_code), want)


def test_failed_call_is_not_final_while_pi_may_retry() -> None:
    # A result seen too early would make the driver end pi during its own retries.
    adapter = PiAdapter("pi")
    parser = adapter.new_parser()
    seen = []
    path = "errors-and-more/pi_429.jsonl"
    for line in (STREAMS / path).read_text(encoding="utf-8").splitlines():
        parser.feed(line)
        event = json.loads(line)
        seen.append((event["type"], parser.report().result_seen))
    assert ("agent_end", False) in seen
    assert seen[-1] == ("auto_retry_end", True)
    assert [kind for kind, flag in seen if flag] == ["auto_retry_end"]


def _lines(
    *events: dict[str, object], exit_code: int = 0
) -> tuple[IterationReport, Classification]:
    adapter = PiAdapter("pi", clock=fixed_clock)
    parser = adapter.new_parser()
    for event in events:
        parser.feed(json.dumps(event))
    report = parser.report()
    return report, adapter.classify(report, exit_code, "")


def _assistant(text: str, stop: str = "stop", error: str | None = None) -> dict[str, object]:
    message: dict[str, object] = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}] if text else [],
        "usage": {"input": 10, "output": 2, "cacheRead": 5, "cost": {"total": 0.01}},
        "stopReason": stop,
        "timestamp": 1796026560257,
    }
    if error:
        message["errorMessage"] = error
    return {"type": "message_end", "message": message}


def test_retry_that_succeeds_is_a_success() -> None:
    report, verdict = _lines(
        {"type": "session", "id": "s-1"},
        _assistant("", "error", "429 fake rate_limit_exceeded"),
        {"type": "agent_end"},
        {"type": "auto_retry_start", "attempt": 1, "errorMessage": "429 fake"},
        _assistant("all good"),
        {"type": "agent_end"},
        {"type": "auto_retry_end", "success": True, "attempt": 1},
    )
    assert verdict.ok
    assert report.final_message == "all good"
    assert (report.input_tokens, report.output_tokens) == (30, 4)
    assert report.cost_usd == pytest.approx(0.02)


def test_usage_limit_body_with_reset_fields() -> None:
    body = (
        '429 {"type":"error","error":{"type":"usage_limit_reached","resets_at":1777936568,'
        '"resets_in_seconds":13872},"status_code":429}'
    )
    report, verdict = _lines(
        {"type": "session", "id": "s-1"}, _assistant("", "error", body), {"type": "agent_end"}
    )
    assert verdict.error_kind is ErrorKind.USAGE_LIMIT
    assert report.reset_at_ms == 1_777_936_568_000


def test_unknown_session_on_resume() -> None:
    adapter = PiAdapter("pi")
    verdict = adapter.classify(IterationReport(), 1, "No session found matching 'abc'\n")
    assert verdict.error_kind is ErrorKind.SESSION_NOT_FOUND


def _request(
    prompt: str, *, model: str | None = None, resume_session_id: str | None = None
) -> InvocationRequest:
    return InvocationRequest(
        prompt, Path("/tmp/prompt.md"), Path("/repo"), model, resume_session_id
    )


def test_invocation() -> None:
    adapter = PiAdapter("/usr/bin/env")
    fresh = adapter.build_invocation(_request("make it", model="fake/fake-model"))
    assert fresh.argv[1:] == ["--mode", "json", "--model", "fake/fake-model", "make it"]
    assert fresh.stdin is None
    session = "01a22b86-0290-774a-9785-93c3a1411c9c"
    resumed = adapter.build_invocation(_request("again", resume_session_id=session))
    assert resumed.argv[1:] == ["--mode", "json", "--session", session, "again"]


@pytest.mark.parametrize(
    "prompt", ["- [ ] first item", "@notes.md says hi", "x" * MAX_ARG_BYTES * 2]
)
def test_prompt_argv_cannot_carry_goes_on_stdin(prompt: str) -> None:
    invocation = PiAdapter("/usr/bin/env").build_invocation(_request(prompt))
    assert invocation.argv[1:] == ["--mode", "json"]
    assert invocation.stdin == prompt.encode()
