"""What a Stop hook reads on stdin and what it answers on stdout (pure).

Formats (docs/hooks.md, verified on Claude Code 2.1.197 and Codex 0.171.0):

- Input, both CLIs: one JSON object with ``session_id``, ``transcript_path``,
  ``cwd``, ``hook_event_name`` (``"Stop"``), ``stop_hook_active`` (true when this stop
  follows a blocked one in the same turn) and ``last_assistant_message``; Codex adds
  ``turn_id`` and ``model``, Claude Code ``prompt_id``, ``permission_mode`` and more.
- Answer, both CLIs: nothing (exit 0) lets the session stop;
  ``{"decision": "block", "reason": TEXT}`` makes the agent go on with ``TEXT`` as a
  new user message; ``systemMessage`` is shown to the user. Codex rejects any other
  key (its output schema has ``additionalProperties: false``), so only
  ``decision``, ``reason`` and ``systemMessage`` are ever written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from autopilot.core.vocabulary import HookAgent

STOP_EVENT = "Stop"


@dataclass(frozen=True)
class HookInput:
    """One Stop hook call, as far as autopilot uses it.

    Attributes:
        agent: The CLI that called.
        session_id: The session's id ("" when missing: it never matches a run).
        transcript_path: The session's transcript (JSONL), or None.
        cwd: The session's working directory ("" when missing).
        hook_event_name: ``Stop``; anything else (``SubagentStop``) is let through.
        stop_hook_active: True when this stop follows a block in the same turn.
        last_assistant_message: The turn's last assistant text; None when missing
            or not a string (Codex sends null for a turn with no message).
        turn_id: Codex's turn id, else None.
    """

    agent: HookAgent
    session_id: str
    transcript_path: str | None
    cwd: str
    hook_event_name: str
    stop_hook_active: bool
    last_assistant_message: str | None
    turn_id: str | None = None


class HookInputError(ValueError):
    """The hook's stdin is not a JSON object."""


def _text(raw: dict[str, object], key: str) -> str | None:
    value = raw.get(key)
    return value if isinstance(value, str) else None


def parse_hook_input(agent: HookAgent, data: bytes) -> HookInput:
    """Parse a Stop hook's stdin; fields of the wrong type count as missing.

    Raises:
        HookInputError: ``data`` is not UTF-8 JSON holding an object.
    """
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise HookInputError(f"the hook input is not JSON: {error}") from None
    if not isinstance(raw, dict):
        raise HookInputError("the hook input is not a JSON object")
    return HookInput(
        agent=agent,
        session_id=(_text(raw, "session_id") or "").strip(),
        transcript_path=_text(raw, "transcript_path") or None,
        cwd=_text(raw, "cwd") or "",
        hook_event_name=_text(raw, "hook_event_name") or STOP_EVENT,
        stop_hook_active=raw.get("stop_hook_active") is True,
        last_assistant_message=_text(raw, "last_assistant_message"),
        turn_id=_text(raw, "turn_id"),
    )


def let_stop(note: str | None = None) -> str:
    """The answer that lets the session stop: nothing, or a ``systemMessage`` for
    the user (both CLIs accept it alone)."""
    if not note:
        return ""
    return json.dumps({"systemMessage": note}, ensure_ascii=False) + "\n"


def keep_going(reason: str, note: str) -> str:
    """The answer that continues the session with ``reason`` as the agent's next
    message and ``note`` shown to the user.

    Raises:
        ValueError: ``reason`` is empty (both CLIs need a non-empty reason).
    """
    if not reason.strip():
        raise ValueError("a block needs a non-empty reason")
    answer = {"decision": "block", "reason": reason, "systemMessage": note}
    return json.dumps(answer, ensure_ascii=False) + "\n"
