"""The Chat Completions wire as pi 0.73.1, Copilot CLI 1.0.102 and opencode 1.18.33 use it.

Each profile copies the tool schemas and the way the cwd and the prompt appear in the
requests those CLIs sent to the server (system prompt line, ``<current_datetime>``
prefix, list or string content).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from autopilot.testkit.model_server import ChatWire, ModelServer
from tests.testkit.client import call, sse
from tests.testkit.conftest import scripted

CWD = "/w/repo"
HELLO = "hello from the fake model\n"
APPEND = "echo second-turn >> hello.txt && cat hello.txt"


def function(name: str, **properties: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


@dataclass(frozen=True)
class Profile:
    """How one CLI's requests look, and the tool calls it must get."""

    name: str
    system: str
    tools: list[dict[str, Any]]
    write: tuple[str, dict[str, Any]]
    shell: tuple[str, dict[str, Any]]
    wrap: str = "{}"
    list_content: bool = False

    def user(self, text: str) -> dict[str, Any]:
        wrapped = self.wrap.format(text)
        if self.list_content:
            return {"role": "user", "content": [{"type": "text", "text": wrapped}]}
        return {"role": "user", "content": wrapped}


PI = Profile(
    "pi",
    f"You are pi.\nCurrent date: 2026-11-30\nCurrent working directory: {CWD}",
    [
        function("read", path="string"),
        function("bash", command="string", timeout="number"),
        function("edit", path="string"),
        function("write", path="string", content="string"),
    ],
    ("write", {"path": f"{CWD}/hello.txt", "content": HELLO}),
    ("bash", {"command": APPEND}),
    list_content=True,
)
COPILOT = Profile(
    "copilot",
    f"You are the GitHub Copilot CLI.\n* Current working directory: {CWD}\n* Git root: {CWD}",
    [
        function("bash", command="string", description="string", mode="string"),
        function("view", path="string"),
        function("create", path="string", file_text="string"),
        function("edit", path="string", old_str="string", new_str="string"),
    ],
    ("create", {"path": f"{CWD}/hello.txt", "file_text": HELLO}),
    ("bash", {"command": APPEND, "description": f"Run {APPEND}"}),
    wrap="<current_datetime>2026-11-30T08:57:01.199+00:00</current_datetime>\n\n{}",
)
OPENCODE = Profile(
    "opencode",
    f"You are opencode.\n<env>\n  Working directory: {CWD}\n  Is directory a git repo: yes\n</env>",
    [
        function("bash", command="string", timeout="integer", workdir="string"),
        function("edit", filePath="string"),
        function("glob", pattern="string"),
        function("task", prompt="string"),
        function("write", content="string", filePath="string"),
    ],
    ("write", {"filePath": f"{CWD}/hello.txt", "content": HELLO}),
    ("bash", {"command": APPEND}),
)
PROFILES = [pytest.param(p, id=p.name) for p in (PI, COPILOT, OPENCODE)]


def assistant(tool: str | None = None, text: str = "ok") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool:
        function_call = {"name": tool, "arguments": "{}"}
        message["tool_calls"] = [{"id": "call_1", "type": "function", "function": function_call}]
    return message


def result(text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_1", "content": text}


def turns(p: Profile) -> dict[str, list[dict[str, Any]]]:
    turn0 = [{"role": "system", "content": p.system}, p.user("make hello.txt")]
    turn0_step1 = [*turn0, assistant(p.write[0], "I'll write hello.txt."), result("Wrote file")]
    turn1 = [*turn0_step1, assistant(text="done. COMPLETE"), p.user("now append a line")]
    turn1_step1 = [*turn1, assistant(p.shell[0]), result("hello\nsecond-turn\n")]
    return {"turn0": turn0, "turn0_step1": turn0_step1, "turn1": turn1, "turn1_step1": turn1_step1}


def body(p: Profile, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "messages": messages,
        "tools": p.tools,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


def ask(srv: ModelServer, payload: dict[str, Any]) -> list[Any]:
    status, headers, raw = call(srv, "/v1/chat/completions", payload)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    events = sse(raw)
    assert all(name is None for name, _ in events)  # data: lines only, no event: lines
    return [data for _, data in events]


def rebuild(chunks: list[Any]) -> tuple[str, dict[str, Any] | None, str | None]:
    """(text, {name, arguments} or None, finish_reason) from streamed chunks."""
    text, tool, arguments, finish = "", None, "", None
    for chunk in chunks:
        if chunk == "[DONE]" or not chunk["choices"]:
            continue
        choice = chunk["choices"][0]
        delta = choice["delta"]
        text += delta.get("content") or ""
        for piece in delta.get("tool_calls") or []:
            if "id" in piece:
                tool = {"name": piece["function"]["name"], "id": piece["id"]}
            arguments += piece["function"].get("arguments", "")
        finish = choice["finish_reason"] or finish
    if tool is not None:
        tool["arguments"] = json.loads(arguments)
    return text, tool, finish


@pytest.mark.parametrize("p", PROFILES)
def test_turn0_writes_hello_with_the_clis_own_write_tool(server: ModelServer, p: Profile) -> None:
    chunks = ask(server, body(p, turns(p)["turn0"]))
    text, tool, finish = rebuild(chunks)
    assert text == "I'll write hello.txt."
    assert tool is not None
    assert (tool["name"], tool["arguments"]) == p.write
    assert tool["id"].startswith("call_")
    assert finish == "tool_calls"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert {c["object"] for c in chunks[:-1]} == {"chat.completion.chunk"}
    assert {c["id"] for c in chunks[:-1]} == {chunks[0]["id"]}
    assert chunks[-1] == "[DONE]"
    assert chunks[-2]["choices"] == []
    assert chunks[-2]["usage"] == {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
    }


@pytest.mark.parametrize("p", PROFILES)
def test_the_default_script_turn_by_turn(server: ModelServer, p: Profile) -> None:
    t = turns(p)
    assert rebuild(ask(server, body(p, t["turn0_step1"]))) == ("done. COMPLETE", None, "stop")
    _, tool, finish = rebuild(ask(server, body(p, t["turn1"])))
    assert tool is not None
    assert (tool["name"], tool["arguments"], finish) == (*p.shell, "tool_calls")
    assert rebuild(ask(server, body(p, t["turn1_step1"])))[0] == "second turn done. COMPLETE"


@pytest.mark.parametrize("p", PROFILES)
def test_turns_steps_prompt_and_cwd_are_read(p: Profile) -> None:
    t = turns(p)
    wire = ChatWire()
    first = wire.conversation(body(p, t["turn0"]))
    assert (first.turn, first.step, first.prompt, first.cwd) == (0, 0, "make hello.txt", CWD)
    later = wire.conversation(body(p, t["turn1_step1"]))
    assert (later.turn, later.step, later.last_tool_result) == (1, 1, "hello\nsecond-turn\n")
    assert later.tool_names == tuple(tool["function"]["name"] for tool in p.tools)


def test_without_include_usage_there_is_no_usage_chunk(server: ModelServer) -> None:
    chunks = ask(server, body(PI, turns(PI)["turn0"], stream_options=None))
    assert all(chunk == "[DONE]" or chunk["choices"] for chunk in chunks)


def test_a_title_request_without_tools_is_a_side_call(server: ModelServer) -> None:
    messages = [
        {"role": "system", "content": "You are a title generator."},
        {"role": "user", "content": "Generate a title for this conversation:\n"},
        {"role": "user", "content": '"make hello.txt"'},
    ]
    payload = {"model": "fake-model", "messages": messages, "stream": True, "max_tokens": 8192}
    assert rebuild(ask(server, payload)) == ("Scripted session", None, "stop")


def test_non_streamed_answer_is_a_chat_completion(server: ModelServer) -> None:
    payload = body(COPILOT, turns(COPILOT)["turn0"], stream=False)
    status, headers, raw = call(server, "/v1/chat/completions", payload)
    completion = json.loads(raw)
    assert (status, int(headers["Content-Length"])) == (200, len(raw))
    assert completion["object"] == "chat.completion"
    choice = completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "I'll write hello.txt."
    call_ = choice["message"]["tool_calls"][0]
    assert (call_["function"]["name"], json.loads(call_["function"]["arguments"])) == COPILOT.write
    assert completion["usage"]["total_tokens"] == 120


def test_the_route_without_v1_also_answers(server: ModelServer) -> None:
    status, _, raw = call(server, "/chat/completions", body(PI, turns(PI)["turn0"]))
    assert status == 200
    assert raw.endswith(b"data: [DONE]\n\n")


@scripted("check-then-write")
@pytest.mark.parametrize("p", PROFILES)
def test_check_then_write_checks_with_the_shell_first(server: ModelServer, p: Profile) -> None:
    _, tool, _ = rebuild(ask(server, body(p, turns(p)["turn0"])))
    assert tool is not None
    assert tool["name"] == "bash"
    assert tool["arguments"]["command"] == "cat hello.txt 2>/dev/null || echo MISSING"
    missing = [*turns(p)["turn0"], assistant("bash"), result("MISSING\n")]
    _, tool, _ = rebuild(ask(server, body(p, missing)))
    assert tool is not None
    assert (tool["name"], tool["arguments"]) == p.write
