"""What a script sees of a request: turn, step, prompt, tools and cwd.

Every wire turns its messages into a neutral transcript of :class:`Entry` items and
calls :func:`read_transcript`, so all CLIs count turns and steps the same way:

- **turn** is the 0-based index of the current real user prompt. Consecutive user
  messages count once. Tool results, role ``system``/``developer`` messages and user
  messages made only of context blocks (:data:`CONTEXT_TAGS`: Claude's
  ``<system-reminder>``, Codex's ``<environment_context>``, Gemini's
  ``<session_context>``, Copilot's ``<current_datetime>``, ...) do not count.
- **step** is the number of tool results since that prompt.

Nothing is kept between requests, so resumed sessions, retries and side calls (a request
with no tools, such as a CLI's session-title request) need no bookkeeping.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

CONTEXT_TAGS = (
    "system-reminder",
    "environment_context",
    "session_context",
    "current_datetime",
    "user_instructions",
    "INSTRUCTIONS",
)
"""Tags whose blocks CLIs add to user messages as context, not as the user's words."""

_CONTEXT = re.compile(
    r"(?:# AGENTS\.md instructions for [^\n]*\n+)?"
    r"<(" + "|".join(CONTEXT_TAGS) + r")(?:\s[^>]*)?>.*?</\1>",
    re.DOTALL,
)

_CWD_PATTERNS = (
    re.compile(r"Primary working directory:\s*(\S[^\n]*)"),  # Claude Code
    re.compile(r"<cwd>([^<]+)</cwd>"),  # Codex <environment_context>
    re.compile(r"Current working directory:\s*(\S[^\n]*)"),  # pi, Copilot
    re.compile(r"Working directory:\s*(\S[^\n]*)"),  # opencode <env>
    re.compile(r"Workspace Directories:\**\s*\n\s*-\s*(\S[^\n]*)"),  # Gemini CLI
)


@dataclass(frozen=True)
class ToolSpec:
    """A tool the request offers.

    Attributes:
        name: The tool's name exactly as the CLI spelled it.
        params: Parameter name -> JSON type ("string", "array", ...); empty when the
            request gives no schema.
        freeform: True for a Responses API ``custom`` tool, whose input is raw text
            (Codex's ``apply_patch``).
    """

    name: str
    params: Mapping[str, str] = field(default_factory=dict)
    freeform: bool = False


@dataclass(frozen=True)
class Conversation:
    """What a script may look at, taken from one request.

    Attributes:
        turn: 0-based index of the current real user prompt.
        step: Number of tool results since that prompt.
        prompt: Text of the current prompt, context blocks left out.
        last_tool_result: Text of the latest tool result of this turn, or "".
        tools: The tools the request offers; empty for a side call.
        cwd: The agent's working directory if the request states it, else None.
    """

    turn: int
    step: int
    prompt: str = ""
    last_tool_result: str = ""
    tools: tuple[ToolSpec, ...] = ()
    cwd: str | None = None

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The names of the offered tools, in request order."""
        return tuple(tool.name for tool in self.tools)

    @property
    def is_side_call(self) -> bool:
        """True when the request offers no tools (title generation and the like)."""
        return not self.tools


class EntryKind(StrEnum):
    """The kinds of transcript entries that matter for counting."""

    USER = "user"
    TOOL_RESULT = "tool_result"
    ASSISTANT = "assistant"


@dataclass(frozen=True)
class Entry:
    """One item of the neutral transcript a wire builds from its messages."""

    kind: EntryKind
    text: str = ""


def content_texts(content: object) -> list[str]:
    """Texts of a message's ``content`` as the OpenAI wires send it: a str, or a list
    of parts holding ``text`` (``text``, ``input_text``, ``output_text``)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
    return []


def strip_context(text: str) -> str:
    """``text`` without CLI context blocks (see :data:`CONTEXT_TAGS`), trimmed."""
    return _CONTEXT.sub("", text).strip()


def read_transcript(
    entries: Iterable[Entry], tools: Sequence[ToolSpec] = (), cwd: str | None = None
) -> Conversation:
    """Count turns and steps over ``entries``, oldest first.

    ``USER`` entries whose text is only context blocks are skipped without ending a
    run of user messages.
    """
    prompts, step, prompt, result, in_prompt = 0, 0, "", "", False
    for entry in entries:
        if entry.kind is EntryKind.ASSISTANT:
            in_prompt = False
        elif entry.kind is EntryKind.TOOL_RESULT:
            step, result, in_prompt = step + 1, entry.text, False
        elif text := strip_context(entry.text):
            if not in_prompt:
                prompts, step, result, prompt = prompts + 1, 0, "", ""
            prompt = f"{prompt}\n{text}" if prompt else text
            in_prompt = True
    return Conversation(max(prompts - 1, 0), step, prompt, result, tuple(tools), cwd)


def find_cwd(texts: Iterable[str]) -> str | None:
    """The first working directory a CLI states in ``texts`` (system prompt first).

    Recognised: Claude's "Primary working directory:", Codex's ``<cwd>``, pi's and
    Copilot's "Current working directory:", opencode's "Working directory:" and Gemini's
    "Workspace Directories:" list.
    """
    for text in texts:
        for pattern in _CWD_PATTERNS:
            if found := pattern.search(text):
                return found.group(1).strip().strip("`")
    return None


def schema_params(schema: object) -> dict[str, str]:
    """Parameter name -> JSON type from a JSON schema's ``properties``; {} if none."""
    if not isinstance(schema, Mapping):
        return {}
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {
        str(name): str(spec.get("type", "")).lower() if isinstance(spec, Mapping) else ""
        for name, spec in properties.items()
    }
