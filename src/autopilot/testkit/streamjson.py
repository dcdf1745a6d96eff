"""Build Claude Code stream-json lines (the shape of Claude Code 2.1.197's output).

Shared by the scripted fake agent and the demo agent so both print what the real
CLI prints (``tests/data/captured-streams/claude-stream.jsonl``).
"""

from __future__ import annotations

import json
import uuid
from typing import Any


def dumps(value: dict[str, Any]) -> str:
    """Compact JSON, as the CLI writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class StreamJson:
    """Makes the lines of one Claude Code session.

    Args:
        session_id: The session id stamped on every line.
        cwd: Reported in the init line.
        model: Reported in the init line.
    """

    def __init__(self, session_id: str, cwd: str, model: str = "claude-scripted") -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.model = model
        self._message = f"msg_{uuid.uuid4().hex[:24]}"

    def init(self) -> str:
        """The ``system/init`` line."""
        return dumps(
            {
                "type": "system",
                "subtype": "init",
                "cwd": self.cwd,
                "session_id": self.session_id,
                "tools": ["Bash", "Write", "Read"],
                "model": self.model,
                "permissionMode": "bypassPermissions",
                "apiKeySource": "none",
            }
        )

    def text(self, text: str, parent: str | None = None) -> str:
        """An assistant text block (``parent``: the subagent's tool_use id)."""
        return self._assistant([{"type": "text", "text": text}], parent)

    def tool_use(
        self, tool_id: str, name: str, tool_input: dict[str, Any], parent: str | None = None
    ) -> str:
        """An assistant tool_use block."""
        block = {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
        return self._assistant([block], parent)

    def tool_result(self, tool_id: str, content: str, parent: str | None = None) -> str:
        """A user tool_result line."""
        return dumps(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"tool_use_id": tool_id, "type": "tool_result", "content": content}
                    ],
                },
                "parent_tool_use_id": parent,
                "session_id": self.session_id,
            }
        )

    def result(
        self,
        text: str,
        *,
        is_error: bool = False,
        cost_usd: float = 0.0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        api_error_status: int | None = None,
        subtype: str = "success",
    ) -> str:
        """The final ``result`` line."""
        return dumps(
            {
                "type": "result",
                "subtype": subtype,
                "is_error": is_error,
                "api_error_status": api_error_status,
                "num_turns": 1,
                "result": text,
                "stop_reason": "end_turn",
                "session_id": self.session_id,
                "total_cost_usd": cost_usd,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
            }
        )

    def _assistant(self, content: list[dict[str, Any]], parent: str | None) -> str:
        return dumps(
            {
                "type": "assistant",
                "message": {
                    "id": self._message,
                    "type": "message",
                    "role": "assistant",
                    "model": self.model,
                    "content": content,
                    "stop_reason": None,
                },
                "parent_tool_use_id": parent,
                "session_id": self.session_id,
            }
        )
