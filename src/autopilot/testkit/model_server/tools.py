"""Map logical actions to the real tools a CLI offers.

The tool is found by name in the request's ``tools`` and its arguments are named
after the tool's own schema, so one mapping serves every CLI (names and schemas as
seen in the requests of Claude Code 2.1.197, Codex 0.171.0, pi 0.73.1, opencode
1.18.33, Copilot CLI 1.0.102 and Gemini CLI 0.61.0):

=============  ===========================================  ===========================
CLI            write a file                                 run a shell command
=============  ===========================================  ===========================
Claude Code    ``Write {file_path, content}``               ``Bash {command, description}``
Codex          custom ``apply_patch`` (freeform patch)      ``exec_command {cmd}``
pi             ``write {path, content}``                    ``bash {command}``
opencode       ``write {filePath, content}``                ``bash {command}``
Copilot        ``create {path, file_text}``                 ``bash {command, description}``
Gemini CLI     ``write_file {file_path, content}``          ``run_shell_command {command}``
=============  ===========================================  ===========================

Codex's older ``shell_command {command}`` and ``shell {command: [argv]}`` work too.
Paths are made absolute when the request states the cwd (opencode and Copilot refuse
relative ones). Without a write tool the file is written with the shell.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autopilot.testkit.model_server.conversation import Conversation, ToolSpec
from autopilot.testkit.model_server.scripts import Content, RunShell, Say, WriteFile

WRITE_TOOLS = ("write", "write_file", "create")
"""Write tools by preference, compared case-insensitively."""

SHELL_TOOLS = ("bash", "run_shell_command", "exec_command", "shell_command", "shell")
"""Shell tools by preference, compared case-insensitively."""

_CODEX_SHELLS = ("exec_command", "shell_command", "shell")


@dataclass(frozen=True)
class ToolCall:
    """A call of one of the CLI's real tools.

    Attributes:
        name: The tool's name as offered.
        arguments: The JSON arguments (empty for a freeform call).
        freeform_input: The raw input of a Responses ``custom`` tool, else None.
    """

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    freeform_input: str | None = None


@dataclass(frozen=True)
class Reply:
    """A model answer: ``text`` (may be empty), then at most one tool call."""

    text: str
    tool: ToolCall | None = None


def narration(action: WriteFile | RunShell) -> str:
    """The short text a model says before a tool call, as real models do."""
    if isinstance(action, WriteFile):
        return f"I'll write {action.path}."
    return f"I'll run `{action.command}`."


def reply(action: Content, conversation: Conversation) -> Reply:
    """Map ``action`` to text plus a call of one of the tools the request offers.

    A tool action that no offered tool can carry becomes a text saying so.
    """
    if isinstance(action, Say):
        return Reply(action.text)
    tools = conversation.tools
    call = None
    if isinstance(action, WriteFile):
        call = _write_call(action, tools, conversation.cwd)
    if call is None:
        command = action.command if isinstance(action, RunShell) else write_command(action)
        call = _shell_call(command, tools)
    if call is None:
        return Reply(f"(no tool offered for: {narration(action)})")
    return Reply(narration(action), call)


def add_file_patch(action: WriteFile) -> str:
    """An ``apply_patch`` text (Codex's patch grammar) that adds ``action.path``."""
    lines = "".join(f"+{line}\n" for line in action.content.splitlines())
    return f"*** Begin Patch\n*** Add File: {action.path}\n{lines}*** End Patch\n"


def write_command(action: WriteFile) -> str:
    """A shell command that writes ``action.content`` to ``action.path``."""
    return f"printf '%s' {shlex.quote(action.content)} > {shlex.quote(action.path)}"


def _find(tools: Sequence[ToolSpec], names: Sequence[str]) -> ToolSpec | None:
    by_name = {tool.name.lower(): tool for tool in reversed(tools)}
    return next((by_name[name] for name in names if name in by_name), None)


def _first(params: Mapping[str, str], keys: Sequence[str], default: str) -> str:
    return next((key for key in keys if key in params), default)


def _write_call(action: WriteFile, tools: Sequence[ToolSpec], cwd: str | None) -> ToolCall | None:
    patch = _find(tools, ["apply_patch"])
    if patch is not None and patch.freeform:
        return ToolCall(patch.name, freeform_input=add_file_patch(action))
    if patch is not None and "input" in patch.params:
        return ToolCall(patch.name, {"input": add_file_patch(action)})
    tool = _find(tools, WRITE_TOOLS)
    if tool is None:
        return None
    lower = tool.name.lower()
    path_key = _first(tool.params, ("file_path", "filePath", "path"), _default_path_key(lower))
    content_key = _first(
        tool.params, ("content", "file_text", "contents"), _default_content_key(lower)
    )
    path = action.path
    if cwd and not posixpath.isabs(path):
        path = posixpath.join(cwd, path)
    return ToolCall(tool.name, {path_key: path, content_key: action.content})


def _default_path_key(name: str) -> str:
    return "file_path" if name in ("write", "write_file") else "path"


def _default_content_key(name: str) -> str:
    return "file_text" if name == "create" else "content"


def _shell_call(command: str, tools: Sequence[ToolSpec]) -> ToolCall | None:
    tool = _find(tools, SHELL_TOOLS)
    if tool is None:
        return None
    lower, params = tool.name.lower(), tool.params
    key = _first(params, ("cmd", "command"), "cmd" if lower == "exec_command" else "command")
    as_list = params.get(key) == "array" or (not params and lower == "shell")
    arguments: dict[str, Any] = {key: ["bash", "-lc", command] if as_list else command}
    if "description" in params or (not params and lower not in _CODEX_SHELLS):
        arguments["description"] = f"Run {command[:60]}"
    return ToolCall(tool.name, arguments)
