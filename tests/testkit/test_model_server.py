"""The scripted model server's Anthropic wire and HTTP shell, over real HTTP with urllib.

Request bodies imitate what Claude Code 2.1.197 sends: a system prompt stating the cwd, a first user message
made of a <system-reminder> block plus the prompt, and role "system" messages
part-way through the conversation.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from autopilot.testkit.model_server import (
    AnthropicWire,
    Conversation,
    ModelServer,
    Rule,
    RunShell,
    Say,
    Script,
    ToolSpec,
    WriteFile,
    get_script,
    write_port_file,
)
from tests.testkit.client import MODULE, call, module_env, served
from tests.testkit.client import sse as parse_sse
from tests.testkit.conftest import scripted

CWD = "/w/repo"
TOOLS = [
    {"name": name, "description": name, "input_schema": {"type": "object"}}
    for name in ("Task", "Bash", "Edit", "Read", "Write")
]
REMINDER = "<system-reminder>\nToday's date is 2026-11-30.\n</system-reminder>\n\n"


# --- conversation builders -------------------------------------------------------------


def prompt(text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": REMINDER}, {"type": "text", "text": text}],
    }


def system(text: str = "Note: hello.txt was modified") -> dict[str, Any]:
    return {"role": "system", "content": text}


def tool_use(name: str = "Bash") -> dict[str, Any]:
    block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}
    return {"role": "assistant", "content": [{"type": "text", "text": "ok"}, block]}


def tool_result(content: Any = "ok") -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": content}
    return {"role": "user", "content": [block]}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def body(
    *messages: dict[str, Any], tools: list[dict[str, Any]] | None = None, stream: bool = True
) -> dict[str, Any]:
    system_blocks = [
        {"type": "text", "text": "You are a Claude agent."},
        {"type": "text", "text": f"# Environment\n - Primary working directory: {CWD}\n"},
    ]
    return {
        "model": "claude-opus-4-8",
        "max_tokens": 64000,
        "system": system_blocks,
        "messages": list(messages),
        "tools": TOOLS if tools is None else tools,
        "stream": stream,
    }


TURN0 = [prompt("make hello.txt"), system()]
TURN0_STEP1 = [*TURN0, tool_use("Write"), tool_result("File created successfully")]
TURN1 = [*TURN0_STEP1, said("done. COMPLETE"), prompt("now append a line")]
TURN1_STEP1 = [*TURN1, tool_use(), tool_result("hello\nsecond-turn"), system()]


# --- HTTP helpers ----------------------------------------------------------------------


def sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Split an Anthropic SSE body into (event, data) pairs."""
    return [(str(name), data) for name, data in parse_sse(raw)]


def answer(events: list[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any] | None, str]:
    """Rebuild (text, tool call {name, input}, stop_reason) from SSE events."""
    text, tool, partial, stop = "", None, "", ""
    for name, data in events:
        if name == "content_block_start" and data["content_block"]["type"] == "tool_use":
            tool = {"name": data["content_block"]["name"]}
        elif name == "content_block_delta" and data["delta"]["type"] == "text_delta":
            text += data["delta"]["text"]
        elif name == "content_block_delta":
            partial += data["delta"]["partial_json"]
        elif name == "message_delta":
            stop = data["delta"]["stop_reason"]
    if tool is not None:
        tool["input"] = json.loads(partial)
    return text, tool, stop


def ask(srv: ModelServer, payload: dict[str, Any]) -> tuple[str, dict[str, Any] | None, str]:
    status, headers, raw = call(srv, "/v1/messages?beta=true", payload)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    return answer(sse(raw))


# --- the default script, turn by turn --------------------------------------------------


def test_turn0_step0_writes_hello_with_the_exact_event_sequence(server: ModelServer) -> None:
    status, headers, raw = call(server, "/v1/messages?beta=true", body(*TURN0))
    events = sse(raw)

    assert (status, headers["Connection"]) == (200, "close")
    assert [name for name, _ in events] == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = events[0][1]["message"]
    assert start["id"].startswith("msg_")
    assert start["model"] == "claude-opus-4-8"
    assert start["usage"]["input_tokens"] == 100
    assert events[5][1]["content_block"]["id"].startswith("toolu_")
    assert events[5][1]["index"] == 1
    assert events[-2][1]["usage"] == {"output_tokens": 20}
    text, tool, stop = answer(events)
    assert text == "I'll write hello.txt."
    assert tool == {
        "name": "Write",
        "input": {"file_path": f"{CWD}/hello.txt", "content": "hello from the fake model\n"},
    }
    assert stop == "tool_use"


def test_turn0_step1_says_done(server: ModelServer) -> None:
    assert ask(server, body(*TURN0_STEP1)) == ("done. COMPLETE", None, "end_turn")


def test_turn1_step0_appends_with_bash(server: ModelServer) -> None:
    command = "echo second-turn >> hello.txt && cat hello.txt"
    _, tool, stop = ask(server, body(*TURN1))
    assert tool is not None
    assert tool["name"] == "Bash"
    assert tool["input"]["command"] == command
    assert tool["input"]["description"]
    assert stop == "tool_use"


def test_turn1_step1_says_second_turn_done(server: ModelServer) -> None:
    assert ask(server, body(*TURN1_STEP1)) == ("second turn done. COMPLETE", None, "end_turn")


def test_a_plain_string_prompt_counts_as_a_turn(server: ModelServer) -> None:
    resumed = [*TURN0_STEP1, said("done."), {"role": "user", "content": "now append a line"}]
    _, tool, _ = ask(server, body(*resumed))
    assert tool is not None
    assert tool["name"] == "Bash"


def test_answers_after_the_script_ends_say_so_without_the_token(server: ModelServer) -> None:
    text, tool, stop = ask(server, body(*TURN1_STEP1, said("x"), prompt("third")))
    assert (tool, stop) == (None, "end_turn")
    assert "turn 2 step 0" in text
    assert "COMPLETE" not in text


# --- counting turns and steps ----------------------------------------------------------


def test_consecutive_user_messages_count_as_one_prompt() -> None:
    conversation = AnthropicWire().conversation(
        body(prompt("a"), {"role": "user", "content": "b"}, system(), prompt("c"))
    )
    assert (conversation.turn, conversation.step) == (0, 0)
    assert conversation.prompt == "a\nb\nc"


def test_reminder_only_user_messages_and_system_messages_do_not_count() -> None:
    reminder_only = {"role": "user", "content": [{"type": "text", "text": REMINDER}]}
    messages = [*TURN0_STEP1, reminder_only, system("developer note"), tool_use(), tool_result()]
    conversation = AnthropicWire().conversation(body(*messages))
    assert (conversation.turn, conversation.step) == (0, 2)
    assert conversation.cwd == CWD


def test_tool_result_blocks_as_a_list_are_read_as_text() -> None:
    result = tool_result([{"type": "text", "text": "line one"}, {"type": "text", "text": "two"}])
    conversation = AnthropicWire().conversation(body(prompt("p"), tool_use(), result))
    assert conversation.last_tool_result == "line one\ntwo"
    assert conversation.step == 1


# --- the other scripts -----------------------------------------------------------------


CHECK_COMMAND = "cat hello.txt 2>/dev/null || echo MISSING"


@scripted("check-then-write")
@pytest.mark.parametrize("turn", [TURN0, [*TURN0_STEP1, said("x"), prompt("again")]])
def test_check_then_write_looks_first_in_any_turn(
    server: ModelServer, turn: list[dict[str, Any]]
) -> None:
    _, tool, _ = ask(server, body(*turn))
    assert tool is not None
    assert (tool["name"], tool["input"]["command"]) == ("Bash", CHECK_COMMAND)


@scripted("check-then-write")
def test_check_then_write_writes_when_missing(server: ModelServer) -> None:
    _, tool, _ = ask(server, body(*TURN0, tool_use(), tool_result("MISSING")))
    assert tool is not None
    assert tool["name"] == "Write"
    assert tool["input"]["file_path"] == f"{CWD}/hello.txt"


@scripted("check-then-write")
def test_check_then_write_completes_when_present(server: ModelServer) -> None:
    text, tool, _ = ask(server, body(*TURN0, tool_use(), tool_result("hello from the fake model")))
    assert (text, tool) == ("hello.txt is in place. <promise>COMPLETE</promise>", None)


@scripted("check-then-write")
def test_check_then_write_defers_the_token_after_writing(server: ModelServer) -> None:
    messages = [*TURN0, tool_use(), tool_result("MISSING"), tool_use("Write"), tool_result()]
    text, tool, _ = ask(server, body(*messages))
    assert (text, tool) == ("wrote hello.txt; will verify next iteration.", None)


@scripted("continue")
def test_continue_stops_without_the_token_in_turn0(server: ModelServer) -> None:
    _, tool, _ = ask(server, body(*TURN0))
    assert tool is not None
    assert tool["name"] == "Write"
    assert ask(server, body(*TURN0_STEP1)) == (
        "wrote hello.txt; not finished yet.",
        None,
        "end_turn",
    )
    assert ask(server, body(*TURN1_STEP1)) == ("second turn done. COMPLETE", None, "end_turn")


# --- side calls and errors -------------------------------------------------------------


@pytest.mark.parametrize("server", ["default", "auth-401", "stall"], indirect=True)
def test_side_calls_get_a_short_text(server: ModelServer) -> None:
    text, tool, stop = ask(server, body(prompt("Write the title"), tools=[]))
    assert (text, tool, stop) == ("Scripted session", None, "end_turn")


@pytest.mark.parametrize(
    ("server", "status", "kind"),
    [
        ("auth-401", 401, "authentication_error"),
        ("rate-429", 429, "rate_limit_error"),
        ("server-500", 500, "api_error"),
    ],
    indirect=["server"],
)
def test_error_scripts_answer_anthropic_error_json(
    server: ModelServer, status: int, kind: str
) -> None:
    got_status, headers, raw = call(server, "/v1/messages?beta=true", body(*TURN0))
    error = json.loads(raw)
    assert got_status == status
    assert headers["Content-Type"] == "application/json"
    assert error["type"] == "error"
    assert error["error"]["type"] == kind
    assert error["error"]["message"]
    assert error["request_id"].startswith("req_")


@scripted("rate-429")
def test_rate_limit_announces_when_it_resets(server: ModelServer) -> None:
    before = time.time()
    _, headers, _ = call(server, "/v1/messages?beta=true", body(*TURN0))
    assert headers["retry-after"] == "1"
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"
    reset = datetime.fromisoformat(headers["anthropic-ratelimit-requests-reset"])
    assert before - 1 <= reset.timestamp() <= time.time() + 2
    assert (
        headers["anthropic-ratelimit-tokens-reset"] == headers["anthropic-ratelimit-requests-reset"]
    )


def test_stall_sends_message_start_then_nothing_and_does_not_block_stop() -> None:
    srv = ModelServer("stall")
    srv.start()
    data = json.dumps(body(*TURN0)).encode()
    host, port = srv.host, srv.port
    with socket.create_connection((host, port), timeout=5) as sock:
        head = f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n"
        sock.sendall(head.encode() + data)
        received = b""
        while b"event: message_start" not in received:
            received += sock.recv(65536)
        sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            sock.recv(65536)
        srv.stop()
    assert b"200 OK" in received
    assert b"event: ping" not in received


# --- other routes ----------------------------------------------------------------------


def test_non_streaming_answer_is_json_with_content_length(server: ModelServer) -> None:
    status, headers, raw = call(server, "/v1/messages", body(*TURN0, stream=False))
    message = json.loads(raw)
    assert status == 200
    assert int(headers["Content-Length"]) == len(raw)
    assert message["stop_reason"] == "tool_use"
    assert [block["type"] for block in message["content"]] == ["text", "tool_use"]
    assert message["content"][1]["input"]["file_path"] == f"{CWD}/hello.txt"
    assert message["usage"]["output_tokens"] == 20


def test_count_tokens_models_and_head(server: ModelServer) -> None:
    count = call(server, "/v1/messages/count_tokens?beta=true", body(*TURN0))
    assert (count[0], json.loads(count[2])) == (200, {"input_tokens": 100})
    status, _, raw = call(server, "/v1/models")
    assert status == 200
    listing = json.loads(raw)
    assert [model["id"] for model in listing["data"]] == [
        "claude-opus-4-8",
        "gpt-5.5",
        "fake-model",
        "gemini-2.5-flash",
    ]
    assert listing["object"] == "list"
    assert listing["first_id"] == "claude-opus-4-8"
    assert {model["object"] for model in listing["data"]} == {"model"}
    assert {model["type"] for model in listing["data"]} == {"model"}
    assert call(server, "/", method="HEAD")[0] == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/nope"), ("POST", "/v1/complete"), ("HEAD", "/v1/x"), ("PUT", "/v1/messages")],
)
def test_unknown_routes_get_404_json(server: ModelServer, method: str, path: str) -> None:
    payload: dict[str, Any] | None = {} if method in ("POST", "PUT") else None
    status, headers, raw = call(server, path, payload, method=method)
    assert status == 404
    assert headers["Content-Type"] == "application/json"
    if method != "HEAD":
        assert json.loads(raw)["error"]["type"] == "not_found_error"


def test_a_body_that_is_not_json_is_a_400(server: ModelServer) -> None:
    request = urllib.request.Request(server.base_url + "/v1/messages", data=b"{nope", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    with caught.value as error:
        assert error.code == 400
        assert json.loads(error.read())["error"]["type"] == "invalid_request_error"


# --- statelessness and recording -------------------------------------------------------


def test_same_request_gets_the_same_answer_in_any_order(server: ModelServer) -> None:
    late = call(server, "/v1/messages?beta=true", body(*TURN1))[2]
    first = call(server, "/v1/messages?beta=true", body(*TURN0))[2]
    assert call(server, "/v1/messages?beta=true", body(*TURN0))[2] == first
    assert call(server, "/v1/messages?beta=true", body(*TURN1))[2] == late
    assert first != late


def test_requests_are_recorded_with_parsed_bodies(server: ModelServer) -> None:
    call(server, "/", method="HEAD")
    call(server, "/v1/messages?beta=true", body(*TURN0))
    recorded = server.requests
    assert [(r.method, r.path) for r in recorded] == [
        ("HEAD", "/"),
        ("POST", "/v1/messages?beta=true"),
    ]
    assert recorded[0].body is None
    assert recorded[1].body == body(*TURN0)
    assert recorded[1].headers["content-type"] == "application/json"


# --- tools, custom scripts, registry ---------------------------------------------------


def test_without_a_cwd_in_the_system_prompt_the_path_stays_relative(server: ModelServer) -> None:
    payload = body(*TURN0)
    payload["system"] = "You are a Claude agent."
    _, tool, _ = ask(server, payload)
    assert tool is not None
    assert tool["input"]["file_path"] == "hello.txt"


def test_without_a_write_tool_the_file_is_written_by_the_shell(server: ModelServer) -> None:
    bash_only = [tool for tool in TOOLS if tool["name"] == "Bash"]
    _, tool, _ = ask(server, body(*TURN0, tools=bash_only))
    assert tool is not None
    assert tool["input"]["command"] == "printf '%s' 'hello from the fake model\n' > hello.txt"


def test_without_any_known_tool_the_answer_is_text(server: ModelServer) -> None:
    text, tool, _ = ask(server, body(*TURN0, tools=[{"name": "Read"}]))
    assert tool is None
    assert "no tool offered" in text


def test_a_custom_script_matches_prompt_and_result_text() -> None:
    script = Script(
        "custom",
        (
            Rule(RunShell("ls"), step=0, prompt_contains="list"),
            Rule(Say("found it"), step=1, result_contains="README"),
            Rule(WriteFile("x.txt", "x"), step=0),
        ),
    )
    bash = (ToolSpec("Bash"),)
    assert script.decide(Conversation(0, 0, "please list", tools=bash)) == RunShell("ls")
    assert script.decide(Conversation(3, 0, "write", tools=bash)) == WriteFile("x.txt", "x")
    found = Conversation(0, 1, "list", "README.md", tools=bash)
    assert script.decide(found) == Say("found it")
    with ModelServer(script) as srv:
        _, tool, _ = ask(srv, body(prompt("please list")))
    assert tool is not None
    assert tool["input"]["command"] == "ls"


def test_unknown_script_names_are_refused() -> None:
    with pytest.raises(KeyError, match="known: default"):
        get_script("nope")
    with pytest.raises(KeyError):
        ModelServer("nope")


def test_requests_before_start_raise() -> None:
    with pytest.raises(RuntimeError):
        _ = ModelServer().requests


# --- the command line ------------------------------------------------------------------


def test_command_line_writes_the_port_file_and_stops_on_sigterm(tmp_path: Path) -> None:
    with served(tmp_path / "port", "--script", "default") as (process, port, line):
        assert line == f"listening on http://127.0.0.1:{port}\n"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as response:
            assert response.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["port"]


def test_command_line_rejects_an_unknown_script() -> None:
    process = subprocess.run(
        [*MODULE, "--script", "nope"],
        capture_output=True,
        text=True,
        env=module_env(),
        check=False,
    )
    assert process.returncode == 2
    assert "invalid choice" in process.stderr


def test_port_file_is_replaced_whole(tmp_path: Path) -> None:
    target = tmp_path / "port"
    target.write_text("stale")
    write_port_file(str(target), 4242)
    assert target.read_text() == "4242\n"
    assert [p.name for p in tmp_path.iterdir()] == ["port"]
