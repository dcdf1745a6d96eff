"""The OpenAI Responses API (``POST /v1/responses``) as Codex 0.171.0 uses it.

Verified on Codex 0.171.0's requests (``tests/data/codex-real/requests.json``). Codex
sends its system prompt as ``developer`` input messages (``instructions`` is empty) and
the cwd in an ``<environment_context>`` user message, which does not count as a turn. It
builds its history from ``response.output_item.done`` and needs ``response.completed``
with usage. Shell commands go to ``exec_command {cmd}``; files are written with the
freeform ``apply_patch`` custom tool when it is offered (model ``gpt-5.5``).
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

_RESULTS = ("function_call_output", "custom_tool_call_output")
_CALLS = ("function_call", "custom_tool_call", "reasoning", "local_shell_call")


class ResponsesWire(OpenAIErrors):
    """OpenAI Responses API bodies and answers."""

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """Read a Responses body ``{instructions, input: [items], tools, ...}``."""
        items = body.get("input")
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        entries, found = [], content_texts(body.get("instructions"))
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            kind, role = item.get("type", "message"), item.get("role")
            if kind in _RESULTS:
                entries.append(
                    Entry(EntryKind.TOOL_RESULT, "\n".join(content_texts(item.get("output"))))
                )
            elif kind in _CALLS or (kind == "message" and role == "assistant"):
                entries.append(Entry(EntryKind.ASSISTANT))
            elif kind == "message":
                pieces = content_texts(item.get("content"))
                found += pieces
                if role == "user":
                    entries += [Entry(EntryKind.USER, text) for text in pieces]
        return read_transcript(entries, _tools(body.get("tools")), find_cwd(found))

    def stream(self, reply: Reply, request: Request) -> list[bytes]:
        """The streamed answer as ``event:``/``data:`` SSE frames.

        Returns:
            response.created, response.in_progress, then per output item
            output_item.added, its deltas (content_part/output_text for text,
            function_call_arguments or custom_tool_call_input for a call) and
            output_item.done, then response.completed with usage. Every data object
            has ``type`` and a running ``sequence_number``.
        """
        frames = []
        for number, data in enumerate(self._events(reply, request)):
            frames.append(sse({**data, "sequence_number": number}, event=str(data["type"])))
        return frames

    def _events(self, reply: Reply, request: Request) -> Iterator[dict[str, Any]]:
        head = _response(request, "in_progress", [])
        yield {"type": "response.created", "response": head}
        yield {"type": "response.in_progress", "response": head}
        items = _items(reply, request.seed)
        for index, item in enumerate(items):
            yield {
                "type": "response.output_item.added",
                "output_index": index,
                "item": _started(item),
            }
            yield from _item_events(item, index)
            yield {"type": "response.output_item.done", "output_index": index, "item": item}
        yield {"type": "response.completed", "response": _response(request, "completed", items)}

    def message(self, reply: Reply, request: Request) -> dict[str, Any]:
        """The non-streamed answer: a completed response object with usage."""
        return _response(request, "completed", _items(reply, request.seed))


def _tools(tools: Any) -> list[ToolSpec]:
    specs = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        if tool.get("type") == "function":
            specs.append(ToolSpec(tool["name"], schema_params(tool.get("parameters"))))
        elif tool.get("type") == "custom":
            specs.append(ToolSpec(tool["name"], freeform=True))
    return specs


def _items(reply: Reply, seed: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        content = [{"type": "output_text", "text": reply.text, "annotations": []}]
        items.append(
            {
                "type": "message",
                "id": f"msg_{seed}",
                "role": "assistant",
                "status": "completed",
                "content": content,
            }
        )
    tool = reply.tool
    if tool is not None and tool.freeform_input is not None:
        items.append(
            {
                "type": "custom_tool_call",
                "id": f"ctc_{seed}",
                "call_id": f"call_{seed}",
                "name": tool.name,
                "input": tool.freeform_input,
                "status": "completed",
            }
        )
    elif tool is not None:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{seed}",
                "call_id": f"call_{seed}",
                "name": tool.name,
                "arguments": json.dumps(tool.arguments),
                "status": "completed",
            }
        )
    return items


def _item_events(item: Mapping[str, Any], index: int) -> Iterator[dict[str, Any]]:
    """The events between an item's ``output_item.added`` and ``output_item.done``."""
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message":
        text = item["content"][0]["text"]
        part = {"type": "output_text", "text": "", "annotations": []}
        at = {**where, "content_index": 0}
        yield {"type": "response.content_part.added", **at, "part": part}
        for piece in halves(text):
            yield {"type": "response.output_text.delta", **at, "delta": piece}
        yield {"type": "response.output_text.done", **at, "text": text}
        yield {"type": "response.content_part.done", **at, "part": {**part, "text": text}}
        return
    stem, key = "custom_tool_call_input", "input"
    if item["type"] == "function_call":
        stem, key = "function_call_arguments", "arguments"
    for piece in halves(item[key]):
        yield {"type": f"response.{stem}.delta", **where, "delta": piece}
    yield {"type": f"response.{stem}.done", **where, key: item[key]}


def _started(item: Mapping[str, Any]) -> dict[str, Any]:
    """``item`` as ``output_item.added`` shows it: in progress, without its payload."""
    emptied: dict[str, Any] = {"content": []} if item["type"] == "message" else {}
    if item["type"] == "function_call":
        emptied = {"arguments": ""}
    elif item["type"] == "custom_tool_call":
        emptied = {"input": ""}
    return {**item, **emptied, "status": "in_progress"}


def _response(request: Request, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    response: dict[str, Any] = {
        "id": f"resp_{request.seed}",
        "object": "response",
        "created_at": CREATED_AT_S,
        "status": status,
        "model": request.model,
        "output": output,
        "usage": None,
    }
    if status == "completed":
        response["usage"] = {
            "input_tokens": INPUT_TOKENS,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        }
    return response
