"""OpenAI Chat Completions (``POST /v1/chat/completions``): pi, Copilot and opencode.

Verified on the requests of pi 0.73.1, Copilot CLI 1.0.102 and opencode 1.18.33
(``tests/data/<cli>-real/requests.json``): ``messages`` of role system,
user, assistant (with ``tool_calls``) and tool; ``tools`` as ``{"type": "function",
"function": {name, parameters}}``. Streamed answers are ``data:`` lines only
(``chat.completion.chunk`` objects with ``tool_calls`` deltas and a ``finish_reason``),
a usage chunk with ``choices: []`` when ``stream_options.include_usage`` is set, then
``data: [DONE]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from autopilot.testkit.model_server.conversation import (
    Conversation,
    Entry,
    EntryKind,
    ToolSpec,
    content_texts,
    find_cwd,
    read_transcript,
    schema_params,
)
from autopilot.testkit.model_server.openai import OpenAIErrors
from autopilot.testkit.model_server.tools import Reply
from autopilot.testkit.model_server.wire import (
    CREATED_AT_S,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    Request,
    halves,
    sse,
)

DONE = b"data: [DONE]\n\n"
"""The frame that ends every streamed answer."""


class ChatWire(OpenAIErrors):
    """OpenAI Chat Completions bodies and answers."""

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """Read a Chat Completions body ``{messages, tools, stream, stream_options}``."""
        entries, found = [], []
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            role, pieces = message.get("role"), content_texts(message.get("content"))
            found += pieces
            if role == "tool":
                entries.append(Entry(EntryKind.TOOL_RESULT, "\n".join(pieces)))
            elif role == "assistant":
                entries.append(Entry(EntryKind.ASSISTANT))
            elif role == "user":
                entries += [Entry(EntryKind.USER, text) for text in pieces]
        tools = [
            ToolSpec(str(f["name"]), schema_params(f.get("parameters")))
            for t in body.get("tools") or []
            if isinstance(t, dict)
            and isinstance(f := t.get("function"), dict)
            and isinstance(f.get("name"), str)
        ]
        return read_transcript(entries, tools, find_cwd(found))

    def stream(self, reply: Reply, request: Request) -> list[bytes]:
        """The streamed answer as ``data:`` frames ending with ``data: [DONE]``.

        Returns:
            A role chunk, content deltas, a tool call chunk (id, name, empty
            arguments) followed by argument pieces, a chunk with ``finish_reason``
            "tool_calls" or "stop", the usage chunk if the request asked for it, and
            :data:`DONE`.
        """
        frames = [sse(chunk) for chunk in self._chunks(reply, request)]
        return [*frames, DONE]

    def _chunks(self, reply: Reply, request: Request) -> Iterator[dict[str, Any]]:
        yield _chunk(request, {"role": "assistant", "content": ""})
        if reply.text:
            for piece in halves(reply.text):
                yield _chunk(request, {"content": piece})
        if reply.tool:
            call = {
                "index": 0,
                "id": f"call_{request.seed}",
                "type": "function",
                "function": {"name": reply.tool.name, "arguments": ""},
            }
            yield _chunk(request, {"tool_calls": [call]})
            for piece in halves(json.dumps(reply.tool.arguments)):
                yield _chunk(
                    request, {"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}
                )
        yield _chunk(request, {}, "tool_calls" if reply.tool else "stop")
        options = request.body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            yield {**_head(request), "choices": [], "usage": _usage()}

    def message(self, reply: Reply, request: Request) -> dict[str, Any]:
        """The non-streamed ``chat.completion`` object with usage."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool:
            message["tool_calls"] = [
                {
                    "id": f"call_{request.seed}",
                    "type": "function",
                    "function": {
                        "name": reply.tool.name,
                        "arguments": json.dumps(reply.tool.arguments),
                    },
                }
            ]
        choice = {
            "index": 0,
            "message": message,
            "finish_reason": "tool_calls" if reply.tool else "stop",
        }
        return {**_head(request, "chat.completion"), "choices": [choice], "usage": _usage()}


def _head(request: Request, kind: str = "chat.completion.chunk") -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{request.seed}",
        "object": kind,
        "created": CREATED_AT_S,
        "model": request.model,
    }


def _chunk(request: Request, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {**_head(request), "choices": [choice]}


def _usage() -> dict[str, int]:
    return {
        "prompt_tokens": INPUT_TOKENS,
        "completion_tokens": OUTPUT_TOKENS,
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    }
