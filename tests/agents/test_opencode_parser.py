"""The opencode adapter on every captured ``run --format json`` output (opencode 1.18.33)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopilot.agents.base import InvocationRequest, IterationReport
from autopilot.agents.opencode import OpencodeAdapter
from autopilot.core.vocabulary import AgentEventKind, ErrorKind
from tests.agents.streams import Want, captures, check, fixed_clock, run

NONE = (None, None)
CASES = {
    "errors-and-more/oc1.jsonl": Want(
        0, "DONE", "ses_dd47be742ffewl847ADF7y1tAO", (24, 10), 1, cost=0.0
    ),
    "errors-and-more/oc_sub.jsonl": Want(
        0, "DONE", "ses_dd47bbb30ffecsj0lDWOqDeIlJ", (24, 10), 1, cost=0.0
    ),
    "errors-and-more/oc_401.jsonl": Want(
        1,
        None,
        "ses_dd47b96eeffeFa6SZtuqO8wrdp",
        NONE,
        0,
        ErrorKind.AUTH,
        error="fake invalid_api_key: You exceeded your current quota",
    ),
    # retry-after: 1 (s), counted from the line's own timestamp 1796026426701.
    "errors-and-more/oc_429.jsonl": Want(
        1,
        None,
        "ses_dd47bb259ffe0vS9L45k5a4qVD",
        NONE,
        0,
        ErrorKind.RATE_LIMIT,
        reset_at_ms=1_796_026_427_701,
        error="fake rate_limit_exceeded: You exceeded your current quota",
    ),
    "errors-and-more/oc_500.jsonl": Want(
        1,
        None,
        "ses_dd47b8f11ffei6FPhEN6YmJz3N",
        NONE,
        0,
        ErrorKind.SERVER,
        error="fake server_error: You exceeded your current quota",
    ),
}


def test_every_opencode_capture_is_covered() -> None:
    assert set(captures("oc")) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_capture_normalised(name: str) -> None:
    want = CASES[name]
    check(run(OpencodeAdapter("opencode", clock=fixed_clock), name, want.exit_code), want)


def test_subagent_answer_is_a_tool_result_not_root_text() -> None:
    result = run(OpencodeAdapter("opencode"), "errors-and-more/oc_sub.jsonl", 0)
    task = [e for e in result.events if e.kind is AgentEventKind.TOOL_RESULT]
    assert len(task) == 1
    assert task[0].subagent is True
    assert task[0].tool_name == "task"
    assert result.texts(subagent=False) == ["DONE"]


def _parse(*events: dict[str, object]) -> IterationReport:
    parser = OpencodeAdapter("opencode").new_parser()
    for event in events:
        parser.feed(json.dumps(event))
    return parser.report()


def test_result_is_the_last_step_or_done() -> None:
    step = {"type": "step_finish", "sessionID": "ses_1", "part": {"reason": "tool-calls"}}
    assert _parse(step).result_seen is False
    assert _parse({"type": "done", "sessionID": "ses_1"}).result_seen is True
    text = {"type": "text", "sessionID": "ses_1", "part": {"messageID": "m", "text": "hi"}}
    final = {"type": "step_finish", "sessionID": "ses_1", "part": {"reason": "stop"}}
    report = _parse(text, final)
    assert (report.result_seen, report.final_message) == (True, "hi")


def test_unknown_session_on_resume() -> None:
    verdict = OpencodeAdapter("opencode").classify(
        IterationReport(), 1, "Error: Session not found\n"
    )
    assert verdict.error_kind is ErrorKind.SESSION_NOT_FOUND


SESSION = "ses_dd47b8f11ffei6FPhEN6YmJz3N"


def test_prompt_goes_verbatim_on_stdin() -> None:
    # `run` would wrap an argv message holding a space in quotes and escape its quotes.
    prompt = 'Fix "the" bug\nin $(hostname)'
    adapter = OpencodeAdapter("/usr/bin/env")
    invocation = adapter.build_invocation(
        InvocationRequest(prompt, Path("/tmp/p.md"), Path("/repo"), "fake/fake-model", SESSION)
    )
    assert invocation.argv[1:] == [
        "run", "--format", "json", "--auto", "--model", "fake/fake-model",
        "--dir", "/repo", "--session", SESSION,
    ]  # fmt: skip
    assert invocation.stdin == prompt.encode()
