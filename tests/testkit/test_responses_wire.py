"""The OpenAI Responses wire as Codex 0.171.0 uses it, over real HTTP.

Request bodies copy the shape Codex sends (``tests/data/codex-real/requests.json``): the
system prompt as two ``developer`` messages, an ``<environment_context>`` user message
with the cwd, ``function``/``custom``/``namespace``/``web_search`` tools, and tool
results as ``custom_tool_call_output``/``function_call_output`` items.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from autopilot.testkit.model_server import ModelServer, ResponsesWire
from tests.testkit.client import call, sse
from tests.testkit.conftest import scripted

CWD = "/w/repo"
ENV = (
    f"<environment_context>\n  <cwd>{CWD}</cwd>\n  <shell>bash</shell>\n"
    "  <current_date>2026-11-30</current_date>\n</environment_context>"
)
EXEC = {
    "type": "function",
    "name": "exec_command",
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}},
        "required": ["cmd"],
        "additionalProperties": False,
    },
}
PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+"},
}
OTHERS = [
    {"type": "function", "name": "write_stdin", "parameters": {"type": "object"}},
    {"type": "namespace", "name": "multi_agent_v1", "tools": []},
    {"type": "web_search"},
]
TOOLS = [EXEC, *OTHERS, PATCH]
PATCH_TEXT = "*** Begin Patch\n*** Add File: hello.txt\n+hello from the fake model\n*** End Patch\n"


def message(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def custom_call() -> list[dict[str, Any]]:
    call_item = {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "x"}
    output = {"type": "custom_tool_call_output", "call_id": "c1", "output": "Success. A hello.txt"}
    return [call_item, output]


def function_call(output: str) -> list[dict[str, Any]]:
    call_item = {
        "type": "function_call",
        "call_id": "c2",
        "name": "exec_command",
        "arguments": "{}",
    }
    result = {"type": "function_call_output", "call_id": "c2", "output": output}
    return [call_item, result]


SYSTEM = [message("developer", "You are Codex."), message("developer", "<skills_instructions>")]
TURN0 = [*SYSTEM, message("user", ENV), message("user", "make hello.txt")]
TURN0_STEP1 = [*TURN0, message("assistant", "I'll write hello.txt."), *custom_call()]
TURN1 = [*TURN0_STEP1, message("assistant", "done. COMPLETE"), message("user", "now append a line")]
TURN1_STEP1 = [*TURN1, *function_call("Process exited with code 0\nOutput:\nhello\nsecond-turn\n")]


def body(items: list[dict[str, Any]], tools: list[Any] | None = None) -> dict[str, Any]:
    return {
        "model": "gpt-5.5",
        "instructions": "",
        "input": items,
        "tools": TOOLS if tools is None else tools,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "01a22b71-thread",
    }


def ask(srv: ModelServer, payload: dict[str, Any]) -> list[tuple[str | None, Any]]:
    status, headers, raw = call(srv, "/v1/responses", payload)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    return sse(raw)


def completed_output(events: list[tuple[str | None, Any]]) -> list[dict[str, Any]]:
    name, data = events[-1]
    assert name == data["type"] == "response.completed"
    output: list[dict[str, Any]] = data["response"]["output"]
    return output


def test_turn0_writes_hello_with_the_freeform_apply_patch(server: ModelServer) -> None:
    events = ask(server, body(TURN0))
    names = [name for name, _ in events]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert all(name == data["type"] for name, data in events)
    created = events[0][1]["response"]
    assert (created["status"], created["model"], created["output"]) == (
        "in_progress",
        "gpt-5.5",
        [],
    )
    message_item, patch = completed_output(events)
    assert message_item["content"][0]["text"] == "I'll write hello.txt."
    assert patch["type"] == "custom_tool_call"
    assert (patch["name"], patch["input"], patch["status"]) == (
        "apply_patch",
        PATCH_TEXT,
        "completed",
    )
    assert patch["call_id"].startswith("call_")
    deltas = "".join(d["delta"] for n, d in events if n == "response.custom_tool_call_input.delta")
    assert deltas == PATCH_TEXT
    assert events[13][1]["item"] == patch
    assert events[9][1]["item"]["input"] == ""
    assert events[9][1]["item"]["status"] == "in_progress"


def test_completed_response_reports_usage(server: ModelServer) -> None:
    usage = ask(server, body(TURN0))[-1][1]["response"]["usage"]
    assert usage == {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 20,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 120,
    }


def test_turn0_step1_says_done(server: ModelServer) -> None:
    output = completed_output(ask(server, body(TURN0_STEP1)))
    assert [item["type"] for item in output] == ["message"]
    assert output[0]["content"] == [
        {"type": "output_text", "text": "done. COMPLETE", "annotations": []}
    ]


def test_turn1_runs_exec_command_with_cmd(server: ModelServer) -> None:
    events = ask(server, body(TURN1))
    tool = completed_output(events)[-1]
    assert (tool["type"], tool["name"]) == ("function_call", "exec_command")
    assert json.loads(tool["arguments"]) == {
        "cmd": "echo second-turn >> hello.txt && cat hello.txt"
    }
    pieces = [d["delta"] for n, d in events if n == "response.function_call_arguments.delta"]
    assert "".join(pieces) == tool["arguments"]


def test_turn1_step1_says_second_turn_done(server: ModelServer) -> None:
    output = completed_output(ask(server, body(TURN1_STEP1)))
    assert output[0]["content"][0]["text"] == "second turn done. COMPLETE"


def test_developer_and_environment_context_messages_do_not_count() -> None:
    wire = ResponsesWire()
    first = wire.conversation(body(TURN0))
    assert (first.turn, first.step, first.prompt, first.cwd) == (0, 0, "make hello.txt", CWD)
    resumed = wire.conversation(
        body([*TURN0_STEP1, message("assistant", "ok"), message("user", ENV), *TURN1[-1:]])
    )
    assert (resumed.turn, resumed.step, resumed.prompt) == (1, 0, "now append a line")
    later = wire.conversation(body(TURN1_STEP1))
    assert (later.turn, later.step) == (1, 1)
    assert later.last_tool_result.endswith("second-turn\n")


def test_tools_are_read_with_their_kind() -> None:
    conversation = ResponsesWire().conversation(body(TURN0))
    assert conversation.tool_names == ("exec_command", "write_stdin", "apply_patch")
    assert conversation.tools[2].freeform
    assert dict(conversation.tools[0].params) == {"cmd": "string", "workdir": "string"}


def test_without_apply_patch_the_file_is_written_through_exec_command(server: ModelServer) -> None:
    tool = completed_output(ask(server, body(TURN0, tools=[EXEC])))[-1]
    assert json.loads(tool["arguments"]) == {
        "cmd": "printf '%s' 'hello from the fake model\n' > hello.txt"
    }


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (
            {"type": "function", "name": "shell_command", "parameters": {"type": "object"}},
            {"command": "echo second-turn >> hello.txt && cat hello.txt"},
        ),
        (
            {
                "type": "function",
                "name": "shell",
                "parameters": {
                    "type": "object",
                    "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                },
            },
            {"command": ["bash", "-lc", "echo second-turn >> hello.txt && cat hello.txt"]},
        ),
    ],
)
def test_older_codex_shell_tools_are_used_when_exec_command_is_missing(
    server: ModelServer, tool: dict[str, Any], arguments: dict[str, Any]
) -> None:
    item = completed_output(ask(server, body(TURN1, tools=[tool])))[-1]
    assert (item["name"], json.loads(item["arguments"])) == (tool["name"], arguments)


def test_a_plain_string_input_is_one_prompt(server: ModelServer) -> None:
    payload = {**body([]), "input": "make hello.txt"}
    conversation = ResponsesWire().conversation(payload)
    assert (conversation.turn, conversation.prompt) == (0, "make hello.txt")


def test_non_streamed_answer_is_a_completed_response(server: ModelServer) -> None:
    status, headers, raw = call(server, "/v1/responses", {**body(TURN1), "stream": False})
    response = json.loads(raw)
    assert (status, int(headers["Content-Length"])) == (200, len(raw))
    assert (response["object"], response["status"]) == ("response", "completed")
    assert [item["type"] for item in response["output"]] == ["message", "function_call"]
    assert response["usage"]["total_tokens"] == 120


@scripted("check-then-write")
def test_check_then_write_checks_with_exec_command_then_patches(server: ModelServer) -> None:
    check = completed_output(ask(server, body(TURN0)))[-1]
    assert json.loads(check["arguments"])["cmd"] == "cat hello.txt 2>/dev/null || echo MISSING"
    missing = body([*TURN0, *function_call("Output:\nMISSING\n")])
    assert completed_output(ask(server, missing))[-1]["input"] == PATCH_TEXT


def test_a_side_call_without_tools_gets_text(server: ModelServer) -> None:
    output = completed_output(ask(server, body(TURN0, tools=[])))
    assert [item["type"] for item in output] == ["message"]
    assert output[0]["content"][0]["text"] == "Scripted session"
