"""Transcripts and hook inputs captured from the pinned CLIs, read as the hook reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autopilot.core.vocabulary import HookAgent
from autopilot.hook.inputs import HookInputError, keep_going, let_stop, parse_hook_input
from autopilot.hook.transcript import TokenTotals, TurnEnd, TurnView, read_turn, summarize

DATA = Path(__file__).resolve().parents[1] / "data" / "hook"
CLAUDE = "claude-2.1.197"
CODEX = "codex-0.171.0"


def _lines(name: str) -> list[bytes]:
    return (DATA / name).read_bytes().splitlines()


@pytest.mark.parametrize(
    ("agent", "prefix"), [(HookAgent.CLAUDE, CLAUDE), (HookAgent.CODEX, CODEX)]
)
def test_real_hook_inputs_parse(agent: HookAgent, prefix: str) -> None:
    first = parse_hook_input(agent, (DATA / f"{prefix}-stop-input-1.json").read_bytes())
    second = parse_hook_input(agent, (DATA / f"{prefix}-stop-input-2.json").read_bytes())
    assert first.session_id and first.session_id == second.session_id
    assert (first.stop_hook_active, second.stop_hook_active) == (False, True)
    assert (first.last_assistant_message, second.last_assistant_message) == (
        "first part done",
        "second part done",
    )
    assert first.hook_event_name == "Stop"
    assert first.transcript_path and first.transcript_path.endswith(".jsonl")
    assert (first.turn_id is not None) is (agent is HookAgent.CODEX)


@pytest.mark.parametrize(
    ("agent", "prefix"), [(HookAgent.CLAUDE, CLAUDE), (HookAgent.CODEX, CODEX)]
)
def test_real_transcripts_give_the_turns_text_and_a_newer_key_after_a_block(
    agent: HookAgent, prefix: str
) -> None:
    first = summarize(agent, _lines(f"{prefix}-transcript-at-stop-1.jsonl"))
    second = summarize(agent, _lines(f"{prefix}-transcript-at-stop-2.jsonl"))
    # The first turn ran a shell command between two texts: both are the turn's.
    assert first.turn_text is not None and first.turn_text.endswith("first part done")
    assert "env | sort" in first.turn_text
    # The block's reason is a new prompt: the second turn holds only its own answer.
    assert second.turn_text == "second part done"
    assert first.newest_assistant_key and second.newest_assistant_key
    assert first.newest_assistant_key != second.newest_assistant_key
    assert first.ended_by is None and second.ended_by is None
    assert first.tokens is not None and second.tokens is not None
    assert second.tokens.output_tokens > first.tokens.output_tokens > 0


def _claude(kind: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, "uuid": f"u{len(fields)}", **fields}).encode()


def _assistant(key: str, *blocks: dict[str, object]) -> bytes:
    return json.dumps(
        {"type": "assistant", "uuid": key, "message": {"id": key, "content": list(blocks)}}
    ).encode()


PROMPT = _claude("user", message={"role": "user", "content": "do it"})
TOOL_USE = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
RESULT = _claude(
    "user", message={"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}
)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param([], TurnView(), id="empty"),
        pytest.param([PROMPT], TurnView(), id="no-assistant-entry"),
        pytest.param(
            [PROMPT, _assistant("a1", TOOL_USE)], TurnView("a1", None), id="tool-call-only"
        ),
        pytest.param(
            [
                PROMPT,
                _assistant("a1", {"type": "text", "text": "<promise>COMPLETE</promise>"}),
                _assistant("a2", TOOL_USE),
                RESULT,
                _assistant("a3", TOOL_USE),
            ],
            TurnView("a3", "<promise>COMPLETE</promise>"),
            id="promise-before-the-last-entries",
        ),
        pytest.param(
            [
                _assistant("a1", {"type": "text", "text": "old turn"}),
                PROMPT,
                _assistant("a2", TOOL_USE),
            ],
            TurnView("a2", None),
            id="older-turns-text-not-counted",
        ),
        pytest.param(
            [
                PROMPT,
                _assistant("a1", {"type": "text", "text": "half"}),
                _claude(
                    "user",
                    message={
                        "content": [{"type": "text", "text": "[Request interrupted by user]"}]
                    },
                ),
            ],
            TurnView("a1", None, TurnEnd.INTERRUPT),
            id="interrupt",
        ),
        pytest.param(
            [PROMPT, _assistant("a1", TOOL_USE), _claude("system", subtype="compact_boundary")],
            TurnView("a1", None, TurnEnd.COMPACTION),
            id="compaction",
        ),
        pytest.param(
            [PROMPT, b"{not json", b"[1,2]", _assistant("a1", {"type": "text", "text": "ok"})],
            TurnView("a1", "ok"),
            id="bad-lines-skipped",
        ),
        pytest.param(
            [
                PROMPT,
                json.dumps(
                    {
                        "type": "assistant",
                        "uuid": "s1",
                        "isSidechain": True,
                        "message": {"content": [{"type": "text", "text": "subagent"}]},
                    }
                ).encode(),
            ],
            TurnView(),
            id="sidechain-skipped",
        ),
    ],
)
def test_claude_turns(lines: list[bytes], expected: TurnView) -> None:
    assert summarize(HookAgent.CLAUDE, lines) == expected


def test_codex_interrupt_and_usage() -> None:
    lines = [
        json.dumps(
            {
                "type": "response_item",
                "payload": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "go"}],
                },
            }
        ).encode(),
        json.dumps(
            {
                "type": "response_item",
                "payload": {"type": "function_call", "id": "fc1", "name": "exec_command"},
            }
        ).encode(),
        json.dumps(
            {
                "type": "event_msg",
                "payload": {
                    "type": "token_count",
                    "info": {
                        "total_token_usage": {
                            "input_tokens": 120,
                            "cached_input_tokens": 20,
                            "output_tokens": 7,
                        }
                    },
                },
            }
        ).encode(),
        json.dumps({"type": "event_msg", "payload": {"type": "turn_aborted"}}).encode(),
    ]
    assert summarize(HookAgent.CODEX, lines) == TurnView(
        "fc1", None, TurnEnd.INTERRUPT, TokenTotals(100, 7, 20, 0)
    )


def test_read_turn_skips_a_line_being_written_and_reads_a_bounded_tail(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        b"\n".join([PROMPT, _assistant("a1", {"type": "text", "text": "x" * 100})])
        + b"\n"
        + _assistant("a2", {"type": "text", "text": "partial"})[:-5]
    )
    assert read_turn(HookAgent.CLAUDE, str(path)) == TurnView("a1", "x" * 100)
    tail = read_turn(HookAgent.CLAUDE, str(path), max_bytes=150)
    assert tail is not None and tail.newest_assistant_key is None
    assert read_turn(HookAgent.CLAUDE, str(tmp_path / "missing.jsonl")) is None
    assert read_turn(HookAgent.CLAUDE, str(tmp_path)) is None


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b"\xff\xfe", b'"text"'], ids=repr)
def test_input_that_is_not_an_object_is_refused(data: bytes) -> None:
    with pytest.raises(HookInputError):
        parse_hook_input(HookAgent.CLAUDE, data)


def test_fields_missing_or_mistyped_count_as_missing() -> None:
    hook = parse_hook_input(
        HookAgent.CODEX,
        b'{"session_id": 5, "stop_hook_active": "yes", "last_assistant_message": null}',
    )
    assert hook.session_id == ""
    assert hook.stop_hook_active is False
    assert hook.last_assistant_message is None
    assert hook.transcript_path is None
    assert hook.hook_event_name == "Stop"


CODEX_OUTPUT_KEYS = {
    "continue",
    "decision",
    "reason",
    "stopReason",
    "suppressOutput",
    "systemMessage",
}


def test_answers_use_only_keys_codex_accepts() -> None:
    block = json.loads(keep_going("next: item 2", "autopilot: iteration 2"))
    assert block == {
        "decision": "block",
        "reason": "next: item 2",
        "systemMessage": "autopilot: iteration 2",
    }
    assert set(block) <= CODEX_OUTPUT_KEYS
    assert let_stop() == ""
    assert json.loads(let_stop("autopilot: run complete")) == {
        "systemMessage": "autopilot: run complete"
    }
    with pytest.raises(ValueError):
        keep_going(" ", "note")


@pytest.mark.parametrize(
    ("agent", "prefix"), [(HookAgent.CLAUDE, CLAUDE), (HookAgent.CODEX, CODEX)]
)
def test_the_pinned_clis_record_no_cost(agent: HookAgent, prefix: str) -> None:
    for number in (1, 2):
        view = summarize(agent, _lines(f"{prefix}-transcript-at-stop-{number}.jsonl"))
        assert view.tokens is not None and view.cost_usd is None
    for number in (1, 2):
        raw = json.loads((DATA / f"{prefix}-stop-input-{number}.json").read_bytes())
        assert not [key for key in raw if "cost" in key.lower()]


def test_a_claude_cost_per_entry_is_summed_once_per_message() -> None:
    def entry(message_id: str, cost: object) -> bytes:
        message = {"id": message_id, "content": [{"type": "text", "text": "x"}]}
        return json.dumps({"type": "assistant", "message": message, "costUSD": cost}).encode()

    lines = [
        entry("m1", 0.01),
        entry("m1", 0.01),  # the same API call, another content block
        entry("m2", 0.02),
        entry("m3", -1),
        entry("m4", "0.5"),
        entry("m5", True),
        b'{"type":"assistant","message":{"id":"m6"},"costUSD":NaN}',
    ]
    assert summarize(HookAgent.CLAUDE, lines).cost_usd == 0.03
