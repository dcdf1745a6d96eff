"""Turn/step counting over the neutral transcript and the mapping to each CLI's tools."""

from __future__ import annotations

from typing import Any

import pytest

from autopilot.testkit.model_server import (
    Conversation,
    Entry,
    EntryKind,
    RunShell,
    Say,
    ToolCall,
    ToolSpec,
    WriteFile,
    read_transcript,
    reply,
)
from autopilot.testkit.model_server.conversation import find_cwd, strip_context

USER, RESULT, ASSISTANT = EntryKind.USER, EntryKind.TOOL_RESULT, EntryKind.ASSISTANT
HELLO = WriteFile("hello.txt", "hello from the fake model\n")
APPEND = RunShell("echo hi >> hello.txt")


# --- counting --------------------------------------------------------------------------


def test_an_empty_transcript_is_turn_0_step_0() -> None:
    assert read_transcript([]) == Conversation(0, 0)


def test_results_count_steps_and_a_new_prompt_resets_them() -> None:
    entries = [
        Entry(USER, "a"),
        Entry(ASSISTANT),
        Entry(RESULT, "one"),
        Entry(ASSISTANT),
        Entry(RESULT, "two"),
    ]
    assert read_transcript(entries).step == 2
    assert read_transcript(entries).last_tool_result == "two"
    later = read_transcript([*entries, Entry(ASSISTANT), Entry(USER, "b")])
    assert (later.turn, later.step, later.prompt, later.last_tool_result) == (1, 0, "b", "")


def test_user_messages_in_a_row_are_one_prompt_even_across_context_only_ones() -> None:
    entries = [
        Entry(USER, "a"),
        Entry(USER, "<environment_context><cwd>/x</cwd></environment_context>"),
        Entry(USER, "b"),
    ]
    conversation = read_transcript(entries)
    assert (conversation.turn, conversation.prompt) == (0, "a\nb")


@pytest.mark.parametrize(
    ("text", "left"),
    [
        ("<system-reminder>\nnote\n</system-reminder>\n\nmake it", "make it"),
        ("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>", ""),
        ("<session_context>\nThis is the Gemini CLI.\n</session_context>", ""),
        ("<current_datetime>2026-11-30T08:57</current_datetime>\n\nmake it", "make it"),
        ("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nbe nice\n</INSTRUCTIONS>", ""),
        (
            '<hook_prompt hook_run_id="x">keep going</hook_prompt>',
            '<hook_prompt hook_run_id="x">keep going</hook_prompt>',
        ),
    ],
)
def test_context_blocks_are_stripped_but_other_tags_stay(text: str, left: str) -> None:
    assert strip_context(text) == left


@pytest.mark.parametrize(
    "text",
    [
        "# Environment\n - Primary working directory: /w/repo\n",
        "<environment_context>\n  <cwd>/w/repo</cwd>\n</environment_context>",
        "Current date: 2026-11-30\nCurrent working directory: /w/repo",
        "* Current working directory: /w/repo\n* Git repository root: /w/repo",
        "<env>\n  Working directory: /w/repo\n  Workspace root folder: /w\n</env>",
        "- **Workspace Directories:**\n  - /w/repo\n- **Directory Structure:**",
    ],
    ids=["claude", "codex", "pi", "copilot", "opencode", "gemini"],
)
def test_each_clis_way_of_stating_the_cwd_is_found(text: str) -> None:
    assert find_cwd(["no cwd here", text]) == "/w/repo"


def test_no_cwd_is_none() -> None:
    assert find_cwd(["nothing", ""]) is None


# --- tool mapping ----------------------------------------------------------------------


def spec(name: str, *params: str, freeform: bool = False, **typed: str) -> ToolSpec:
    return ToolSpec(name, {**dict.fromkeys(params, "string"), **typed}, freeform)


CLIS: dict[str, tuple[ToolSpec, ...]] = {
    "claude": (
        spec("Bash", "command", "description", "timeout"),
        spec("Write", "file_path", "content"),
    ),
    "codex": (spec("exec_command", "cmd", "workdir"), spec("apply_patch", freeform=True)),
    "pi": (spec("read", "path"), spec("bash", "command"), spec("write", "path", "content")),
    "opencode": (spec("bash", "command", "workdir"), spec("write", "content", "filePath")),
    "copilot": (
        spec("bash", "command", "description", "mode"),
        spec("create", "path", "file_text"),
    ),
    "gemini": (
        spec("run_shell_command", "command", "description", "dir_path"),
        spec("write_file", "file_path", "content"),
    ),
}
WRITES: dict[str, ToolCall] = {
    "claude": ToolCall("Write", {"file_path": "/w/hello.txt", "content": HELLO.content}),
    "codex": ToolCall(
        "apply_patch",
        freeform_input="*** Begin Patch\n*** Add File: hello.txt\n"
        "+hello from the fake model\n*** End Patch\n",
    ),
    "pi": ToolCall("write", {"path": "/w/hello.txt", "content": HELLO.content}),
    "opencode": ToolCall("write", {"filePath": "/w/hello.txt", "content": HELLO.content}),
    "copilot": ToolCall("create", {"path": "/w/hello.txt", "file_text": HELLO.content}),
    "gemini": ToolCall("write_file", {"file_path": "/w/hello.txt", "content": HELLO.content}),
}
DESCRIBED = {"command": APPEND.command, "description": f"Run {APPEND.command}"}
SHELLS: dict[str, ToolCall] = {
    "claude": ToolCall("Bash", DESCRIBED),
    "codex": ToolCall("exec_command", {"cmd": APPEND.command}),
    "pi": ToolCall("bash", {"command": APPEND.command}),
    "opencode": ToolCall("bash", {"command": APPEND.command}),
    "copilot": ToolCall("bash", DESCRIBED),
    "gemini": ToolCall("run_shell_command", DESCRIBED),
}


def on(cli: str, cwd: str | None = "/w") -> Conversation:
    return Conversation(0, 0, tools=CLIS[cli], cwd=cwd)


@pytest.mark.parametrize("cli", list(CLIS))
def test_a_file_is_written_with_each_clis_write_tool(cli: str) -> None:
    assert reply(HELLO, on(cli)).tool == WRITES[cli]


@pytest.mark.parametrize("cli", list(CLIS))
def test_a_command_runs_with_each_clis_shell_tool(cli: str) -> None:
    answer = reply(APPEND, on(cli))
    assert answer.tool == SHELLS[cli]
    assert answer.text == "I'll run `echo hi >> hello.txt`."


def test_text_is_just_text() -> None:
    assert reply(Say("done"), on("pi")).text == "done"
    assert reply(Say("done"), on("pi")).tool is None


def test_paths_stay_relative_without_a_cwd() -> None:
    tool = reply(HELLO, on("opencode", cwd=None)).tool
    assert tool is not None
    assert tool.arguments["filePath"] == "hello.txt"


def test_an_absolute_path_is_kept() -> None:
    tool = reply(WriteFile("/abs/x.txt", "x"), on("pi")).tool
    assert tool is not None
    assert tool.arguments["path"] == "/abs/x.txt"


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        ((ToolSpec("Write"),), {"file_path": "/w/hello.txt"}),
        ((ToolSpec("write_file"),), {"file_path": "/w/hello.txt"}),
        ((ToolSpec("create"),), {"path": "/w/hello.txt"}),
    ],
)
def test_write_tools_without_a_schema_get_their_usual_names(
    tools: tuple[ToolSpec, ...], expected: dict[str, Any]
) -> None:
    tool = reply(HELLO, Conversation(0, 0, tools=tools, cwd="/w")).tool
    assert tool is not None
    assert expected.items() <= dict(tool.arguments).items()


def test_an_apply_patch_function_gets_the_patch_as_input() -> None:
    tools = (spec("exec_command", "cmd"), spec("apply_patch", "input"))
    tool = reply(HELLO, Conversation(0, 0, tools=tools)).tool
    assert tool is not None
    assert tool.name == "apply_patch"
    assert str(tool.arguments["input"]).startswith("*** Begin Patch\n*** Add File: hello.txt\n")


def test_without_a_write_tool_the_shell_writes_the_file() -> None:
    tool = reply(HELLO, Conversation(0, 0, tools=(spec("bash", "command"),))).tool
    assert tool == ToolCall(
        "bash", {"command": "printf '%s' 'hello from the fake model\n' > hello.txt"}
    )


def test_without_any_usable_tool_the_answer_says_so() -> None:
    answer = reply(APPEND, Conversation(0, 0, tools=(spec("read", "path"),)))
    assert answer.tool is None
    assert answer.text == "(no tool offered for: I'll run `echo hi >> hello.txt`.)"


def test_tool_names_match_case_insensitively_and_keep_their_spelling() -> None:
    tool = reply(APPEND, Conversation(0, 0, tools=(spec("BASH", "command"),))).tool
    assert tool == ToolCall("BASH", {"command": APPEND.command})
