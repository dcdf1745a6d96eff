"""The Anthropic Messages API (``POST /v1/messages``) as Claude Code 2.1.197 uses it.

Verified on Claude Code 2.1.197 run offline against this server: streamed answers are
``event:``/``data:`` SSE frames message_start, ping, content blocks, message_delta,
message_stop; requests carry role ``system`` messages part-way through, and the cwd
appears as "Primary working directory:" in the system prompt.
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
    find_cwd,
    read_transcript,
    schema_params,
)
from autopilot.testkit.model_server.scripts import ErrorKind, HttpError
from autopilot.testkit.model_server.tools import Reply, ToolCall
from autopilot.testkit.model_server.wire import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    ErrorAnswer,
    Request,
    halves,
    iso_utc,
    json_error,
    retry_after,
    sse,
)

DEFAULT_MODEL = "claude-opus-4-8"
"""What Claude Code 2.1.197 asks for when no model is set."""

_ERRORS = {
    ErrorKind.AUTH: ("authentication_error", "invalid x-api-key"),
    ErrorKind.RATE_LIMIT: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests "
        "per minute. Please try again later.",
    ),
    ErrorKind.USAGE_LIMIT: (
        "rate_limit_error",
        "You have reached your usage limit for this period. Your limit resets later.",
    ),
    ErrorKind.SERVER: ("api_error", "Internal server error"),
    ErrorKind.BAD_REQUEST: ("invalid_request_error", "request body is not a JSON object"),
}


def texts(content: Any) -> list[str]:
    """Text pieces of an Anthropic ``content`` (a str or a list of blocks)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
    return []


class AnthropicWire:
    """Anthropic Messages API bodies and answers."""

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """Read a Messages request body ``{system, messages, tools, ...}``."""
        entries, found = [], list(texts(body.get("system")))
        for message in body.get("messages") or []:
            if not isinstance(message, dict) or message.get("role") in ("system", "developer"):
                continue
            content = message.get("content")
            found += texts(content)
            results = [
                b
                for b in (content if isinstance(content, list) else [])
                if isinstance(b, dict) and b.get("type") == "tool_result"
            ]
            if message.get("role") != "user":
                entries.append(Entry(EntryKind.ASSISTANT))
            elif results:
                entries += [
                    Entry(EntryKind.TOOL_RESULT, "\n".join(texts(r.get("content"))))
                    for r in results
                ]
            else:
                entries += [Entry(EntryKind.USER, text) for text in texts(content)]
        tools = [
            ToolSpec(str(t["name"]), schema_params(t.get("input_schema")))
            for t in body.get("tools") or []
            if isinstance(t, dict) and isinstance(t.get("name"), str)
        ]
        return read_transcript(entries, tools, find_cwd(found))

    def message(self, reply: Reply, request: Request) -> dict[str, Any]:
        """The non-streamed answer.

        Returns:
            ``{"id": "msg_..", "type": "message", "role": "assistant", "model", "content":
            [text block?, tool_use block?], "stop_reason": "tool_use"|"end_turn",
            "stop_sequence": None, "usage": {input_tokens: 100, output_tokens: 20, ...}}``.
        """
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        if reply.tool:
            content.append(_tool_block(reply.tool, request.seed, dict(reply.tool.arguments)))
        return {
            **_head(request),
            "content": content,
            "stop_reason": "tool_use" if reply.tool else "end_turn",
            "usage": _usage(OUTPUT_TOKENS),
        }

    def stream(self, reply: Reply, request: Request) -> list[bytes]:
        """The streamed answer as SSE frames, in the order Claude Code 2.1.197 accepts.

        Returns:
            ``b"event: NAME\\ndata: JSON\\n\\n"`` frames: message_start, ping, a text
            block (content_block_start/delta/stop) if there is text, a tool_use block
            whose input arrives as input_json_delta pieces, then message_delta
            (stop_reason tool_use or end_turn, output_tokens 20) and message_stop.
        """
        return list(self._frames(reply, request))

    def _frames(self, reply: Reply, request: Request) -> Iterator[bytes]:
        start = {**_head(request), "content": [], "stop_reason": None, "usage": _usage(1)}
        yield _event({"type": "message_start", "message": start})
        yield _event({"type": "ping"})
        index = 0
        if reply.text:
            yield _block_start(index, {"type": "text", "text": ""})
            yield _block_delta(index, {"type": "text_delta", "text": reply.text})
            yield _event({"type": "content_block_stop", "index": index})
            index += 1
        if reply.tool:
            yield _block_start(index, _tool_block(reply.tool, request.seed, {}))
            for part in ["", *halves(json.dumps(reply.tool.arguments))]:
                yield _block_delta(index, {"type": "input_json_delta", "partial_json": part})
            yield _event({"type": "content_block_stop", "index": index})
        yield _event(
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if reply.tool else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": OUTPUT_TOKENS},
            }
        )
        yield _event({"type": "message_stop"})

    def error(self, error: HttpError, request: Request, now_ms: int) -> ErrorAnswer:
        """``{"type":"error","error":{type, message},"request_id"}`` plus headers.

        A reset becomes ``retry-after`` and the ``anthropic-ratelimit-*-reset`` headers
        (RFC 3339); a usage limit also sends the subscription headers
        ``anthropic-ratelimit-unified-{status,reset,representative-claim}``.
        """
        kind, default = _ERRORS[error.kind]
        request_id = f"req_{request.seed}"
        body = {
            "type": "error",
            "error": {"type": kind, "message": json_error(error, default)},
            "request_id": request_id,
        }
        headers = [("request-id", request_id)]
        resets_at_ms, seconds = error.resets_at_ms(now_ms), retry_after(error)
        if resets_at_ms is not None and seconds is not None:
            headers.append(("retry-after", seconds))
            for family in ("requests", "tokens", "input-tokens", "output-tokens"):
                prefix = f"anthropic-ratelimit-{family}"
                headers += [(f"{prefix}-limit", "50"), (f"{prefix}-remaining", "0")]
                headers.append((f"{prefix}-reset", iso_utc(resets_at_ms)))
            if error.kind is ErrorKind.USAGE_LIMIT:
                prefix = "anthropic-ratelimit-unified"
                headers += [
                    (f"{prefix}-status", "rejected"),
                    (f"{prefix}-reset", str(-(-resets_at_ms // 1000))),
                    (f"{prefix}-representative-claim", "five_hour"),
                ]
        return ErrorAnswer(error.status, body, tuple(headers))


def _usage(output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": INPUT_TOKENS,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _head(request: Request) -> dict[str, Any]:
    return {
        "id": f"msg_{request.seed}",
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "stop_sequence": None,
    }


def _tool_block(tool: ToolCall, seed: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{seed}", "name": tool.name, "input": arguments}


def _event(data: Mapping[str, Any]) -> bytes:
    return sse(data, event=str(data["type"]))


def _block_start(index: int, block: Mapping[str, Any]) -> bytes:
    return _event({"type": "content_block_start", "index": index, "content_block": block})


def _block_delta(index: int, delta: Mapping[str, Any]) -> bytes:
    return _event({"type": "content_block_delta", "index": index, "delta": delta})
