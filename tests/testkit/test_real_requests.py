"""Replays requests the real CLIs sent during a ``default`` run (tests/data/<cli>-real).

``requests.json`` holds every request of a two-call run (the second call resumes the
session), reduced for size: long texts are cut to their head, the lines naming the
cwd, and their tail; tools other than the shell and write tools lost their schemas.
Paths were rewritten to /home/dev. Versions: Codex 0.171.0, pi 0.73.1, Gemini CLI
0.61.0, Copilot CLI 1.0.102, opencode 1.18.33.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from autopilot.testkit.model_server import (
    ModelServer,
    RunShell,
    Say,
    WriteFile,
    get_script,
    reply,
)
from autopilot.testkit.model_server.routes import post_route
from tests.testkit.client import call

DATA = Path(__file__).resolve().parents[1] / "data"
CWD = "/home/dev/work"
DONE, SECOND_DONE = "done. COMPLETE", "second turn done. COMPLETE"
SIDE = "Scripted session"
TOOLS = {
    "apply_patch",
    "exec_command",
    "write",
    "bash",
    "write_file",
    "run_shell_command",
    "create",
}

# Per request: (turn, step, the tool called or the text said)
EXPECTED: dict[str, list[tuple[int, int, str]]] = {
    "codex": [(0, 0, "apply_patch"), (0, 1, DONE), (1, 0, "exec_command"), (1, 1, SECOND_DONE)],
    "pi": [(0, 0, "write"), (0, 1, DONE), (1, 0, "bash"), (1, 1, SECOND_DONE)],
    "gemini": [
        (0, 0, "write_file"),
        (0, 1, DONE),
        (1, 0, "run_shell_command"),
        (1, 1, SECOND_DONE),
    ],
    "copilot": [(0, 0, "create"), (0, 1, DONE), (1, 0, "bash"), (1, 1, SECOND_DONE)],
    "opencode": [
        (0, 0, SIDE),
        (0, 0, "write"),
        (0, 1, DONE),
        (1, 0, "bash"),
        (1, 1, SECOND_DONE),
    ],
}


def recorded(cli: str) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = json.loads(
        (DATA / f"{cli}-real" / "requests.json").read_text()
    )
    return requests


@pytest.mark.parametrize("cli", list(EXPECTED))
def test_each_real_request_gets_the_scripted_answer(cli: str) -> None:
    script = get_script("default")
    got = []
    for request in recorded(cli):
        route = post_route(request["path"].split("?")[0])
        assert route is not None
        conversation = route.wire.conversation(request["body"])
        if not conversation.is_side_call:
            assert conversation.cwd == CWD
        action = script.decide(conversation)
        assert isinstance(action, WriteFile | RunShell | Say)
        answer = reply(action, conversation)
        said = answer.tool.name if answer.tool else answer.text
        got.append((conversation.turn, conversation.step, said))
    assert got == EXPECTED[cli]


@pytest.mark.parametrize("cli", list(EXPECTED))
def test_real_requests_over_http_name_the_expected_tool(server: ModelServer, cli: str) -> None:
    for request, (_, _, said) in zip(recorded(cli), EXPECTED[cli], strict=True):
        status, _, raw = call(server, request["path"], request["body"])
        assert status == 200
        if said in TOOLS:
            assert f'"{said}"'.encode() in raw
        else:  # text is streamed in two halves
            assert said[: len(said) // 2].encode() in raw


def test_the_codex_write_is_a_patch_relative_to_the_cwd() -> None:
    first = recorded("codex")[0]
    route = post_route(first["path"])
    assert route is not None
    conversation = route.wire.conversation(first["body"])
    action = get_script("default").decide(conversation)
    assert isinstance(action, WriteFile)
    tool = reply(action, conversation).tool
    assert tool is not None
    assert tool.freeform_input == (
        "*** Begin Patch\n*** Add File: hello.txt\n+hello from the fake model\n*** End Patch\n"
    )
