"""The Gemini wire as Gemini CLI 0.61.0 uses it, over real HTTP.

Request bodies copy what the CLI sent: a first user message whose first part is a
``<session_context>`` block naming the workspace, ``functionDeclarations`` with
JSON schemas, and tool results as ``functionResponse`` parts (repeated on resume).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from autopilot.testkit.model_server import GeminiWire, ModelServer
from tests.testkit.client import call, sse
from tests.testkit.conftest import scripted

CWD = "/w/repo"
MODEL = "gemini-2.5-flash"
STREAM = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
CONTEXT = (
    "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n"
    "My operating system is: linux\n- **Workspace Directories:**\n"
    f"  - {CWD}\n- **Directory Structure:**\n\n{CWD}/\n</session_context>"
)


def declaration(name: str, **properties: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in properties.items()}}
    return {"name": name, "description": name, "parametersJsonSchema": schema}


TOOLS = [
    {
        "functionDeclarations": [
            declaration("list_directory", dir_path="string"),
            declaration("read_file", file_path="string"),
            declaration("write_file", file_path="string", content="string"),
            declaration("run_shell_command", command="string", description="string"),
        ]
    }
]


def user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text} for text in texts]}


def model(name: str | None = None, text: str = "ok") -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"text": text}]
    if name:
        parts.append({"functionCall": {"id": f"{name}_1", "name": name, "args": {}}})
    return {"role": "model", "parts": parts}


def response(name: str, output: str, repeats: int = 1) -> dict[str, Any]:
    part = {"functionResponse": {"id": f"{name}_1", "name": name, "response": {"output": output}}}
    return {"role": "user", "parts": [part] * repeats}


TURN0 = [user(CONTEXT, "make hello.txt")]
TURN0_STEP1 = [*TURN0, model("write_file"), response("write_file", "Successfully created")]
TURN1 = [*TURN0_STEP1, model(text="done. COMPLETE"), user("now append a line")]
TURN1_STEP1 = [*TURN1, model("run_shell_command"), response("run_shell_command", "hello\n")]


def body(contents: list[dict[str, Any]], tools: list[Any] | None = None) -> dict[str, Any]:
    return {
        "contents": contents,
        "systemInstruction": {"parts": [{"text": "You are a non-interactive CLI agent."}]},
        "tools": TOOLS if tools is None else tools,
        "generationConfig": {"temperature": 1, "thinkingConfig": {"includeThoughts": True}},
    }


def ask(srv: ModelServer, payload: dict[str, Any]) -> list[dict[str, Any]]:
    status, headers, raw = call(srv, STREAM, payload)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    assert raw.endswith(b"\r\n\r\n")
    return [data for _, data in sse(raw)]


def rebuild(chunks: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]], str | None]:
    """(text, function calls, finish reason of the last chunk)."""
    parts = [part for c in chunks for part in c["candidates"][0]["content"]["parts"]]
    text = "".join(part.get("text", "") for part in parts)
    calls = [part["functionCall"] for part in parts if "functionCall" in part]
    return text, calls, chunks[-1]["candidates"][0].get("finishReason")


def test_turn0_writes_hello_with_write_file(server: ModelServer) -> None:
    chunks = ask(server, body(TURN0))
    text, calls, finish = rebuild(chunks)
    assert text == "I'll write hello.txt."
    assert calls == [
        {
            "name": "write_file",
            "args": {"file_path": f"{CWD}/hello.txt", "content": "hello from the fake model\n"},
        }
    ]
    assert finish == "STOP"
    assert [c["candidates"][0].get("finishReason") for c in chunks[:-1]] == [None] * (
        len(chunks) - 1
    )
    assert {c["candidates"][0]["content"]["role"] for c in chunks} == {"model"}
    assert chunks[-1]["usageMetadata"] == {
        "promptTokenCount": 100,
        "candidatesTokenCount": 20,
        "totalTokenCount": 120,
    }
    assert {c["modelVersion"] for c in chunks} == {MODEL}


def test_the_default_script_turn_by_turn(server: ModelServer) -> None:
    assert rebuild(ask(server, body(TURN0_STEP1))) == ("done. COMPLETE", [], "STOP")
    _, calls, _ = rebuild(ask(server, body(TURN1)))
    command = "echo second-turn >> hello.txt && cat hello.txt"
    assert calls == [
        {"name": "run_shell_command", "args": {"command": command, "description": f"Run {command}"}}
    ]
    assert rebuild(ask(server, body(TURN1_STEP1)))[0] == "second turn done. COMPLETE"


def test_session_context_is_not_a_prompt_and_names_the_cwd() -> None:
    conversation = GeminiWire().conversation(body(TURN0))
    assert (conversation.turn, conversation.step, conversation.prompt) == (0, 0, "make hello.txt")
    assert conversation.cwd == CWD
    assert "write_file" in conversation.tool_names


def test_a_repeated_function_response_counts_once() -> None:
    resumed = [*TURN0, model("write_file"), response("write_file", "ok", repeats=2)]
    conversation = GeminiWire().conversation(body(resumed))
    assert (conversation.turn, conversation.step, conversation.last_tool_result) == (0, 1, "ok")


def test_non_streamed_generate_content(server: ModelServer) -> None:
    status, _, raw = call(server, f"/v1beta/models/{MODEL}:generateContent", body(TURN1))
    answer = json.loads(raw)
    assert status == 200
    candidate = answer["candidates"][0]
    assert candidate["finishReason"] == "STOP"
    assert [list(part) for part in candidate["content"]["parts"]] == [["text"], ["functionCall"]]


def test_count_tokens_and_model_gets(server: ModelServer) -> None:
    count = call(server, f"/v1beta/models/{MODEL}:countTokens", body(TURN0))
    assert json.loads(count[2]) == {"totalTokens": 100}
    listing = json.loads(call(server, "/v1beta/models")[2])
    assert [m["name"] for m in listing["models"]] == [f"models/{MODEL}"]
    one = json.loads(call(server, "/v1beta/models/gemini-2.5-pro")[2])
    assert one["name"] == "models/gemini-2.5-pro"
    assert "generateContent" in one["supportedGenerationMethods"]


def test_the_model_comes_from_the_path(server: ModelServer) -> None:
    path = "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    status, _, raw = call(server, path, body(TURN0))
    assert status == 200
    assert {data["modelVersion"] for _, data in sse(raw)} == {"gemini-3-pro-preview"}


def test_a_request_without_tools_gets_text(server: ModelServer) -> None:
    assert rebuild(ask(server, body(TURN0, tools=[]))) == ("Scripted session", [], "STOP")


@scripted("check-then-write")
def test_check_then_write_on_gemini(server: ModelServer) -> None:
    _, calls, _ = rebuild(ask(server, body(TURN0)))
    assert calls[0]["name"] == "run_shell_command"
    missing = [*TURN0, model("run_shell_command"), response("run_shell_command", "MISSING")]
    _, calls, _ = rebuild(ask(server, body(missing)))
    assert calls[0]["name"] == "write_file"


@pytest.mark.parametrize("kind", ["STRING", "string"])
def test_schema_types_are_read_in_either_case(kind: str) -> None:
    tools = [
        {
            "functionDeclarations": [
                {
                    "name": "write_file",
                    "parameters": {"type": "OBJECT", "properties": {"file_path": {"type": kind}}},
                }
            ]
        }
    ]
    conversation = GeminiWire().conversation(body(TURN0, tools=tools))
    assert dict(conversation.tools[0].params) == {"file_path": "string"}
