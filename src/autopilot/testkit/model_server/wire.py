"""What every wire API shares: the :class:`Wire` protocol, requests, ids and framing.

A wire turns a request body into a :class:`~.conversation.Conversation` and renders
answers (:class:`~.tools.Reply`) and errors (:class:`~.scripts.HttpError`) in its API's
format. The HTTP shell (``server.py``) picks the wire from the request path.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from autopilot.testkit.model_server.conversation import Conversation
from autopilot.testkit.model_server.scripts import HttpError
from autopilot.testkit.model_server.tools import Reply

INPUT_TOKENS = 100
"""Input tokens every answer reports."""

OUTPUT_TOKENS = 20
"""Output tokens every answer reports."""

CREATED_AT_S = 1_764_460_800
"""The fixed ``created`` stamp of answers (2025-11-30), so equal requests get equal bytes."""


@dataclass(frozen=True)
class Request:
    """One model request, as a wire needs it.

    Attributes:
        body: The parsed JSON body.
        model: The model asked for (from the body, or the path for Gemini).
        seed: :func:`request_seed` of the body; ids are built from it.
        stream: Whether the answer is streamed (SSE).
    """

    body: Mapping[str, Any]
    model: str
    seed: str
    stream: bool


@dataclass(frozen=True)
class ErrorAnswer:
    """An HTTP error answer: status, JSON body and extra headers."""

    status: int
    body: Mapping[str, Any]
    headers: tuple[tuple[str, str], ...] = field(default=())


class Wire(Protocol):
    """A wire API over the same scripts."""

    def conversation(self, body: Mapping[str, Any]) -> Conversation:
        """Read turn, step, tools and cwd from a request body."""
        ...

    def stream(self, reply: Reply, request: Request) -> list[bytes]:
        """The whole streamed answer, one SSE frame per item, terminal frame last."""
        ...

    def message(self, reply: Reply, request: Request) -> dict[str, Any]:
        """The non-streamed answer as a JSON object."""
        ...

    def error(self, error: HttpError, request: Request, now_ms: int) -> ErrorAnswer:
        """The error answer; reset fields are computed from ``now_ms`` (epoch ms)."""
        ...


def request_seed(body: Any) -> str:
    """A stable id part derived from the body, so equal requests get equal answers."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]


def sse(data: Mapping[str, Any] | str, event: str | None = None, end: str = "\n\n") -> bytes:
    """One SSE frame: an optional ``event:`` line, a ``data:`` line, then ``end``."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}{end}".encode()


def halves(text: str) -> list[str]:
    """``text`` in two pieces, as a model streams it; one piece if it is short."""
    middle = len(text) // 2
    return [text[:middle], text[middle:]] if middle else [text]


def retry_after(error: HttpError) -> str | None:
    """The ``retry-after`` header value (whole seconds, at least 1) or None."""
    if error.retry_after_seconds is None:
        return None
    return str(max(1, math.ceil(error.retry_after_seconds)))


def iso_utc(epoch_ms: int) -> str:
    """``epoch_ms`` as RFC 3339 UTC with a ``Z`` and whole seconds."""
    stamp = datetime.fromtimestamp(epoch_ms / 1000, UTC).replace(microsecond=0)
    return stamp.isoformat().replace("+00:00", "Z")


def json_error(error: HttpError, default: str) -> str:
    """The script's message for ``error``, else the wire's ``default``."""
    return error.message if error.message is not None else default
