"""Which wire answers which path, and the model catalog the ``GET`` routes list.

``POST`` routes:

- ``/v1/messages``, ``/v1/messages/count_tokens``: Anthropic (Claude Code)
- ``/v1/responses``: OpenAI Responses (Codex)
- ``/v1/chat/completions``: OpenAI Chat Completions (pi, Copilot, opencode)
- ``/v1beta/models/<m>:streamGenerateContent`` (also ``:generateContent`` and
  ``:countTokens``; ``v1`` and ``v1alpha`` too): Gemini (Gemini CLI)

``GET /v1/models[/<id>]`` answers one list in both the OpenAI and the Anthropic shape;
``GET /v1beta/models[/<m>]`` answers in the Gemini shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from autopilot.testkit.model_server import anthropic, gemini
from autopilot.testkit.model_server.anthropic import AnthropicWire
from autopilot.testkit.model_server.chat import ChatWire
from autopilot.testkit.model_server.gemini import GeminiWire
from autopilot.testkit.model_server.responses import ResponsesWire
from autopilot.testkit.model_server.wire import CREATED_AT_S, Wire

OPENAI_MODEL = "fake-model"
"""The model assumed when an OpenAI-style body names none."""

MODEL_IDS = (anthropic.DEFAULT_MODEL, "gpt-5.5", OPENAI_MODEL, gemini.DEFAULT_MODEL)
"""The ids ``GET /v1/models`` lists."""

_GEMINI_CALL = re.compile(
    r"^/v1(?:beta|alpha)?/models/([^/:]+):(streamGenerateContent|generateContent|countTokens)$"
)
_GEMINI_MODEL = re.compile(r"^/v1(?:beta|alpha)/models(?:/([^/:]+))?$")


@dataclass(frozen=True)
class Route:
    """Where a ``POST`` goes.

    Attributes:
        wire: The wire that reads the body and renders the answer.
        default_model: The model assumed when neither body nor path names one.
        model: The model named by the path (Gemini), else None.
        stream: Whether to stream; None lets the body's ``"stream"`` decide.
        count_tokens: A token-count request, answered with a fixed count.
    """

    wire: Wire
    default_model: str
    model: str | None = None
    stream: bool | None = None
    count_tokens: bool = False


def post_route(path: str) -> Route | None:
    """The route for a ``POST`` to ``path`` (without query), or None for a 404."""
    if path in ("/v1/messages", "/v1/messages/count_tokens"):
        count = path.endswith("count_tokens")
        return Route(AnthropicWire(), anthropic.DEFAULT_MODEL, count_tokens=count)
    if path in ("/v1/responses", "/responses"):
        return Route(ResponsesWire(), OPENAI_MODEL)
    if path in ("/v1/chat/completions", "/chat/completions"):
        return Route(ChatWire(), OPENAI_MODEL)
    if found := _GEMINI_CALL.match(path):
        model, method = found.groups()
        return Route(
            GeminiWire(),
            gemini.DEFAULT_MODEL,
            model=model,
            stream=method == "streamGenerateContent",
            count_tokens=method == "countTokens",
        )
    return None


def get_answer(path: str) -> dict[str, Any] | None:
    """The JSON answer to a ``GET`` of ``path`` (without query), or None for a 404."""
    if path == "/v1/models":
        return models()
    if path.startswith("/v1/models/"):
        return model_entry(path.removeprefix("/v1/models/"))
    if found := _GEMINI_MODEL.match(path):
        name = found.group(1)
        return gemini.model(name) if name else gemini.models()
    return None


def model_entry(model_id: str) -> dict[str, Any]:
    """One model in both the OpenAI (``object``, ``owned_by``) and Anthropic shape."""
    return {
        "id": model_id,
        "object": "model",
        "created": CREATED_AT_S,
        "owned_by": "autopilot",
        "type": "model",
        "display_name": "Scripted fake model",
        "created_at": "2025-11-30T00:00:00Z",
    }


def models() -> dict[str, Any]:
    """The answer to ``GET /v1/models``: an OpenAI list that is also an Anthropic page."""
    return {
        "object": "list",
        "data": [model_entry(model_id) for model_id in MODEL_IDS],
        "has_more": False,
        "first_id": MODEL_IDS[0],
        "last_id": MODEL_IDS[-1],
    }
