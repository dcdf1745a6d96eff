"""Error answers shared by the two OpenAI wires (Chat Completions and Responses).

Bodies follow OpenAI's ``{"error": {message, type, param, code}}``; rate limits send
``retry-after``, ``retry-after-ms`` and the ``x-ratelimit-{limit,remaining,reset}-
{requests,tokens}`` headers (reset as a duration like ``1s`` or ``59m59.5s``). A usage
limit is the body the ChatGPT backend gives Codex (``usage_limit_reached`` with
``resets_at`` in epoch seconds and ``resets_in_seconds``), which Codex 0.171.0 turns
into "You've hit your usage limit ... try again at <time>".
"""

from __future__ import annotations

import math
from typing import Any

from autopilot.testkit.model_server.scripts import ErrorKind, HttpError
from autopilot.testkit.model_server.wire import ErrorAnswer, Request, json_error, retry_after

_DEFAULTS = {
    ErrorKind.AUTH: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    ErrorKind.SERVER: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    ErrorKind.BAD_REQUEST: (
        "invalid_request_error",
        None,
        "We could not parse the JSON body of your request.",
    ),
}


class OpenAIErrors:
    """The error answers of the OpenAI wires (Chat Completions and Responses)."""

    def error(self, error: HttpError, request: Request, now_ms: int) -> ErrorAnswer:
        """An OpenAI error answer (``openai_error``)."""
        return openai_error(error, request, now_ms)


def openai_error(error: HttpError, request: Request, now_ms: int) -> ErrorAnswer:
    """The OpenAI-style answer for ``error``; reset fields count from ``now_ms``."""
    resets_at_ms = error.resets_at_ms(now_ms)
    if error.kind is ErrorKind.USAGE_LIMIT:
        return ErrorAnswer(error.status, {"error": _usage_limit(error, resets_at_ms, now_ms)})
    headers: list[tuple[str, str]] = [("x-request-id", f"req_{request.seed}")]
    if error.kind is ErrorKind.RATE_LIMIT:
        message = (
            f"Rate limit reached for {request.model} in organization org-fake on requests "
            "per min (RPM): Limit 50, Used 50, Requested 1."
        )
        seconds = retry_after(error)
        if resets_at_ms is not None and seconds is not None:
            wait = duration(resets_at_ms - now_ms)
            message += f" Please try again in {wait}."
            headers += [("retry-after", seconds), ("retry-after-ms", str(resets_at_ms - now_ms))]
            for family, limit in (("requests", "50"), ("tokens", "30000")):
                headers += [
                    (f"x-ratelimit-limit-{family}", limit),
                    (f"x-ratelimit-remaining-{family}", "0"),
                    (f"x-ratelimit-reset-{family}", wait),
                ]
        body = {
            "message": json_error(error, message),
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
        return ErrorAnswer(error.status, {"error": body}, tuple(headers))
    kind, code, default = _DEFAULTS[error.kind]
    body = {"message": json_error(error, default), "type": kind, "param": None, "code": code}
    return ErrorAnswer(error.status, {"error": body}, tuple(headers))


def _usage_limit(error: HttpError, resets_at_ms: int | None, now_ms: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "usage_limit_reached",
        "message": json_error(error, "The usage limit has been reached"),
        "plan_type": "plus",
    }
    if resets_at_ms is not None:
        body["resets_at"] = math.ceil(resets_at_ms / 1000)
        body["resets_in_seconds"] = math.ceil((resets_at_ms - now_ms) / 1000)
    return body


def duration(milliseconds: int) -> str:
    """``milliseconds`` as OpenAI's reset duration: ``17ms``, ``1s``, ``6m0s``, ``1h0m0s``."""
    if milliseconds < 1000:
        return f"{max(milliseconds, 0)}ms"
    hours, rest = divmod(milliseconds, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds = f"{rest / 1000:.3f}".rstrip("0").rstrip(".")
    head = (f"{hours}h" if hours else "") + (f"{minutes}m" if hours or minutes else "")
    return f"{head}{seconds}s"
