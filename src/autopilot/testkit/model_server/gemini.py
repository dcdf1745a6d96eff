"""The Gemini API (``POST /v1beta/models/<m>:streamGenerateContent?alt=sse``) for Gemini CLI.

Request shape as Gemini CLI 0.61.0 sends it: ``contents`` of role user/model with
``text``, ``functionCall`` and ``functionResponse`` parts (a resumed session repeats
a response, so responses count once per call id), ``systemInstruction``, and
``tools: [{functionDeclarations: [...]}]``. The first user message starts with a
``<session_context>`` block naming the workspace ("Workspace Directories:").
Streamed answers are ``data: <GenerateContentResponse>`` SSE frames; the last one has
``finishReason: "STOP"`` and ``usageMetadata``. Errors are Google RPC statuses:
``{"error": {code, message, status, details}}`` with ``QuotaFailure`` and
``RetryInfo.retryDelay`` for quota errors.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    json_error,
    sse,
)

DEFAULT_MODEL = "gemini-2.5-flash"
"""The model listed by ``GET /v1beta/models``."""

_TYPE = "type.googleapis.com/google.rpc."
_ERRORS = {
    ErrorKind.AUTH: (
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token, "
        "login cookie or other valid authentication credential.",
    ),
    ErrorKind.RATE_LIMIT: (
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    ErrorKind.USAGE_LIMIT: (
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    ErrorKind.SERVER: (
        "INTERNAL",
        "An internal error has occurred. Please retry or report in "
        "https://developers.generativeai.google/guide/troubleshooting",
    ),
    ErrorKind.BAD_REQUEST: ("INVALID_ARGUMENT", "Invalid JSON payload received."),
}
_QUOTA_METRIC = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
_QUOTA_IDS = {
    ErrorKind.RATE_LIMIT: "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
    ErrorKind.USAGE_LIMIT: "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
}


def _texts(value: Any) -> list[str]:
    """Texts of a ``Content`` (``{parts: [{text}]}``), a list of parts, or a str."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = value.get("parts")
    if isinstance(value, list):
        return [p["text"] for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return []


class GeminiWire:
    """Gemini ``generateContent`` bodies and answers."""

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """Read a ``{contents, systemInstruction, tools, generationConfig}`` body."""
        entries, found = [], _texts(body.get("systemInstruction"))
        for content in body.get("contents") or []:
            if not isinstance(content, dict):
                continue
            parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
            pieces = _texts(parts)
            found += pieces
            responses = _unique_responses(parts)
            if content.get("role") == "model":
                entries.append(Entry(EntryKind.ASSISTANT))
            elif responses:
                entries += [Entry(EntryKind.TOOL_RESULT, _result_text(r)) for r in responses]
            else:
                entries += [Entry(EntryKind.USER, text) for text in pieces]
        return read_transcript(entries, _tools(body.get("tools")), find_cwd(found))

    def stream(self, reply: Reply, request: Request) -> list[bytes]:
        """The streamed answer as ``data:`` frames (``\\r\\n\\r\\n``-separated, as Google sends).

        Returns:
            One ``GenerateContentResponse`` per text piece, then one with the
            ``functionCall`` part; the last has ``finishReason: "STOP"`` and the final
            ``usageMetadata`` (100 prompt, 20 candidate tokens).
        """
        chunks = [[{"text": piece}] for piece in halves(reply.text)] if reply.text else []
        if reply.tool:
            chunks.append([_call_part(reply.tool)])
        if not chunks:
            chunks.append([{"text": ""}])
        last = len(chunks) - 1
        return [
            sse(_response(request, parts, final=index == last), end="\r\n\r\n")
            for index, parts in enumerate(chunks)
        ]

    def message(self, reply: Reply, request: Request) -> dict[str, Any]:
        """The non-streamed ``GenerateContentResponse``."""
        parts: list[dict[str, Any]] = [{"text": reply.text}] if reply.text else []
        if reply.tool:
            parts.append(_call_part(reply.tool))
        return _response(request, parts or [{"text": ""}], final=True)

    def error(self, error: HttpError, request: Request, now_ms: int) -> ErrorAnswer:
        """A Google RPC error; quota errors carry ``QuotaFailure`` and ``RetryInfo``."""
        status, default = _ERRORS[error.kind]
        body: dict[str, Any] = {
            "code": error.status,
            "message": json_error(error, default),
            "status": status,
        }
        resets_at_ms = error.resets_at_ms(now_ms)
        if error.kind in _QUOTA_IDS and resets_at_ms is not None:
            violation = {
                "quotaMetric": _QUOTA_METRIC,
                "quotaId": _QUOTA_IDS[error.kind],
                "quotaDimensions": {"location": "global", "model": request.model},
                "quotaValue": "10",
            }
            delay = retry_delay(resets_at_ms - now_ms)
            body["message"] += f" Please retry in {delay}."
            body["details"] = [
                {"@type": f"{_TYPE}QuotaFailure", "violations": [violation]},
                {"@type": f"{_TYPE}RetryInfo", "retryDelay": delay},
            ]
        return ErrorAnswer(error.status, {"error": body})


def retry_delay(milliseconds: int) -> str:
    """A protobuf ``Duration`` in JSON form, e.g. ``"1s"`` or ``"9.532s"``."""
    return f"{max(milliseconds, 0) / 1000:.3f}".rstrip("0").rstrip(".") + "s"


def models() -> dict[str, Any]:
    """The answer to ``GET /v1beta/models``."""
    return {"models": [model(DEFAULT_MODEL)]}


def model(name: str) -> dict[str, Any]:
    """The answer to ``GET /v1beta/models/<name>``."""
    return {
        "name": f"models/{name}",
        "version": "001",
        "displayName": "Scripted fake model",
        "inputTokenLimit": 1_048_576,
        "outputTokenLimit": 65_536,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
    }


def _tools(tools: Any) -> list[ToolSpec]:
    specs = []
    for tool in tools if isinstance(tools, list) else []:
        for declaration in tool.get("functionDeclarations") or [] if isinstance(tool, dict) else []:
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                schema = declaration.get("parametersJsonSchema") or declaration.get("parameters")
                specs.append(ToolSpec(declaration["name"], schema_params(schema)))
    return specs


def _unique_responses(parts: list[dict[str, Any]]) -> list[Any]:
    """The ``functionResponse`` parts, each call id once.

    A resumed Gemini CLI 0.61.0 session repeats the response to a call in the same
    message; counting it twice would skip a step.
    """
    seen, unique = set(), []
    for part in parts:
        response = part.get("functionResponse")
        if response is None:
            continue
        call_id = response.get("id") if isinstance(response, dict) else None
        if call_id is None or call_id not in seen:
            unique.append(response)
        seen.add(call_id)
    return unique


def _result_text(response: Any) -> str:
    """The text of a ``functionResponse``: its ``response.output`` (or error), else JSON."""
    if not isinstance(response, dict):
        return ""
    payload = response.get("response")
    if isinstance(payload, dict):
        for key in ("output", "error", "content"):
            if isinstance(payload.get(key), str):
                return str(payload[key])
    return str(payload or "")


def _call_part(tool: ToolCall) -> dict[str, Any]:
    return {"functionCall": {"name": tool.name, "args": dict(tool.arguments)}}


def _response(request: Request, parts: list[dict[str, Any]], final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    usage = {"promptTokenCount": INPUT_TOKENS, "totalTokenCount": INPUT_TOKENS}
    if final:
        candidate["finishReason"] = "STOP"
        usage = {
            "promptTokenCount": INPUT_TOKENS,
            "candidatesTokenCount": OUTPUT_TOKENS,
            "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS,
        }
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": request.model,
        "responseId": request.seed,
    }
