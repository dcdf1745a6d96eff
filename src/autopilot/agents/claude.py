"""Claude Code (``@anthropic-ai/claude-code``), headless with stream-json output.

Verified against Claude Code 2.1.197 (its real output is in
``tests/data/captured-streams/``; the format is the ``SDKMessage`` union of
``@anthropic-ai/claude-agent-sdk``, https://code.claude.com/docs/en/headless).
Invocation::

    claude -p --output-format stream-json --verbose --dangerously-skip-permissions
           [--model M] [--resume SESSION] [extra args]      (prompt on stdin)

The prompt goes on stdin, then stdin is closed: no argv length limit, no shell.
Facts the parser relies on:

* one ``assistant`` line per content block; lines inside a subagent carry a
  non-null ``parent_tool_use_id`` and are kept out of the final message;
* ``result.result`` is the final message; failure is ``is_error`` or a non-zero
  exit, not ``subtype`` (an API failure has ``subtype: "success"``), except that
  Claude Code 1.0.x ends a failed turn with ``subtype: "error_during_execution"``,
  ``is_error: false`` and no ``result``;
* ``session_id`` (a UUID) is on every line; ``result.usage`` counts the main
  thread's tokens of one query, while ``modelUsage`` and ``total_cost_usd`` are the
  process's totals (subagents included). Background agents (2.1.198) make one
  process print several ``init`` … ``result`` cycles, so tokens are the larger of
  the summed ``usage`` and the last ``modelUsage``, and the cost is the last total;
* the assistant line's ``error`` (``rate_limit``, ``authentication_failed``,
  ``server_error``, ``billing_error``, …), ``result.api_error_status`` and the
  result's own words classify a failure; words that name a usage limit or a network
  failure refine the assistant's generic kind;
* ``result.permission_denials`` (``tool_name``, ``tool_input``) lists the tool calls
  a permission rule refused;
* subscription logins print ``rate_limit_event``; ``status: "rejected"`` means the
  plan's usage limit was hit (``resetsAt`` in epoch seconds). The failed ``result``
  that follows holds the user-facing notice (``You've hit your limit · resets 7pm
  (Area/City)``, ``You're out of extra usage · resets Apr 24, 4am (Asia/Tokyo)``,
  the older ``Claude AI usage limit reached|<epoch>``); some versions print that
  notice as a bare text line instead, with no ``result``.

Only the ``result`` event, the assistant ``error`` field, a rejected
``rate_limit_event`` and (after a failed exit) stderr classify an iteration; tool
results and the model's prose never do.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TypeGuard

from autopilot.agents import failures, fields
from autopilot.agents.adapter import CliAgent, CliFacts
from autopilot.agents.base import AgentEvent, shorten
from autopilot.agents.parser import JsonLinesParser
from autopilot.core.structs import replace
from autopilot.core.vocabulary import AgentEventKind, ErrorKind

if TYPE_CHECKING:
    from autopilot.agents.base import Invocation, InvocationRequest, WallClock

_ASSISTANT_ERRORS = {
    **dict.fromkeys(("server_error", "overloaded"), ErrorKind.SERVER),
    "rate_limit": ErrorKind.RATE_LIMIT,
    "authentication_failed": ErrorKind.AUTH,
    "billing_error": ErrorKind.USAGE_LIMIT,
    "invalid_request": ErrorKind.INVALID_REQUEST,
}
_REFINABLE = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.SERVER, ErrorKind.UNKNOWN})
_REFINING = frozenset({ErrorKind.USAGE_LIMIT, ErrorKind.NETWORK})
_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
_MODEL_INPUT_KEYS = ("inputTokens", "cacheCreationInputTokens", "cacheReadInputTokens")


class ClaudeStreamParser(JsonLinesParser):
    """Parses Claude Code's ``--output-format stream-json`` lines.

    Also accepts the single-object and JSON-array shapes of ``--output-format json``:
    every element is parsed as a line of its own.

    Args:
        clock: The wall clock, for reset times given as a clock time
            (``resets 7pm``); ``local_now`` by default.
    """

    accepts_arrays = True

    def __init__(self, clock: WallClock | None = None) -> None:
        super().__init__(clock)
        self._assistant_error: ErrorKind | None = None
        self._limit_reset_ms: int | None = None
        self._limit_rejected = False
        self._summed = (0, 0)

    def on_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The session id every line carries, then the message's own events."""
        return self.attach_session(event.get("session_id")) + super().on_event(event)

    def on_text(self, text: str) -> list[AgentEvent]:
        """After a rejected ``rate_limit_event`` and before any result, a bare text
        line is the CLI's own notice of the limit; otherwise it is not understood."""
        if not self._limit_rejected or self._report.result_seen:
            return super().on_text(text)
        kind = failures.classify_error_text(text)
        limit = kind if kind in failures.LIMIT_KINDS else ErrorKind.USAGE_LIMIT
        return self.fail(shorten(text, 1000), limit, reset_at_ms=self._limit_reset_ms)

    def handle_system(self, event: dict[str, Any]) -> list[AgentEvent]:
        """``init`` (a cycle begins) and ``api_retry``."""
        subtype = event.get("subtype")
        if subtype == "init":
            self._report.model = fields.text(event.get("model")) or self._report.model
            # A new cycle (a background agent woke the session): its result is to come.
            self._report.result_seen = False
            self._assistant_error = None
            return []
        if subtype == "api_retry":
            detail = event.get("error") or event.get("error_status") or "error"
            return [AgentEvent(AgentEventKind.RETRY, f"API retry {event.get('attempt')}: {detail}")]
        return []

    def handle_assistant(self, event: dict[str, Any]) -> list[AgentEvent]:
        """Assistant text and tool calls; an ``error`` field classifies a failure."""
        subagent = event.get("parent_tool_use_id") is not None
        error = event.get("error")
        if isinstance(error, str) and not subagent:
            self._assistant_error = _ASSISTANT_ERRORS.get(error, ErrorKind.UNKNOWN)
        events: list[AgentEvent] = []
        for block in _content(event):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                events.append(self.text(block["text"], subagent))
            elif block.get("type") == "tool_use":
                events.append(self.tool_call(block.get("name"), block.get("input"), subagent))
        return events

    def handle_user(self, event: dict[str, Any]) -> list[AgentEvent]:
        """Tool results."""
        subagent = event.get("parent_tool_use_id") is not None
        return [
            self.tool_result(_result_text(block), subagent)
            for block in _content(event)
            if block.get("type") == "tool_result"
        ]

    def handle_result(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The end of a cycle: tokens, cost, denials, and success or failure."""
        self._count_usage(event)
        denials = event.get("permission_denials")
        for denial in denials if isinstance(denials, list) else []:
            if isinstance(denial, dict):
                self.deny(denial.get("tool_name"), denial.get("tool_input"))
        text = fields.text(event.get("result"))
        subtype = fields.text(event.get("subtype")) or ""
        self.clear_failure()
        if event.get("is_error") is True or (text is None and subtype.startswith("error")):
            self._report.result_seen = True
            message = (
                text or _first_error(event) or f"Claude Code ended with {subtype or 'an error'}"
            )
            return self.fail(message, self._kind(event, message), reset_at_ms=self._limit_reset_ms)
        return self.finish(text)

    def _count_usage(self, event: dict[str, Any]) -> None:
        usage = fields.as_object(event.get("usage"))
        summed_in = self._summed[0] + fields.sum_counts(usage, *_INPUT_KEYS)
        summed_out = self._summed[1] + fields.count(usage.get("output_tokens"))
        self._summed = (summed_in, summed_out)
        models = [fields.as_object(m) for m in fields.as_object(event.get("modelUsage")).values()]
        total_in = sum(fields.sum_counts(model, *_MODEL_INPUT_KEYS) for model in models)
        total_out = sum(fields.count(model.get("outputTokens")) for model in models)
        report = self._report
        report.input_tokens = max(summed_in, total_in)
        report.output_tokens = max(summed_out, total_out)
        cost = fields.usd(event.get("total_cost_usd"))
        report.cost_usd = cost if cost is not None else report.cost_usd

    def _kind(self, event: dict[str, Any], message: str) -> ErrorKind:
        found = failures.classify_error_text(message)
        kind = self._assistant_error
        if kind in (None, ErrorKind.UNKNOWN):
            status = event.get("api_error_status")
            kind = failures.kind_for_status(status, message) if _is_status(status) else found
        if kind in _REFINABLE and found in _REFINING:
            # "You've hit your limit", "Unable to connect": the words are more precise
            # than the assistant's generic rate_limit or server_error.
            return found
        return kind or ErrorKind.UNKNOWN

    def handle_rate_limit_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A subscription's limit; ``rejected`` fails the iteration until a result
        says otherwise."""
        info = fields.as_object(event.get("rate_limit_info"))
        if info.get("status") != "rejected":
            return []
        resets = fields.usd(info.get("resetsAt"))
        if resets:
            # Epoch seconds in 2.1.x; tolerate milliseconds.
            self._limit_reset_ms = int(resets if resets > 10**11 else resets * 1000)
            self._report.reset_at_ms = self._limit_reset_ms
        self._limit_rejected = True
        if self._report.result_seen:
            return []
        window = fields.text(info.get("rateLimitType")) or "usage"
        # Failed until a result says otherwise: the CLI may exit with no result line.
        return self.fail(
            f"{window} limit reached", ErrorKind.USAGE_LIMIT, reset_at_ms=self._limit_reset_ms
        )


def _is_status(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599


def _content(event: dict[str, Any]) -> list[dict[str, Any]]:
    content = fields.as_object(event.get("message")).get("content")
    return (
        [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    )


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _first_error(event: dict[str, Any]) -> str | None:
    errors = event.get("errors")
    if isinstance(errors, list) and errors:
        return str(errors[0])
    return None


class ClaudeAdapter(CliAgent):
    """Drives Claude Code; see the module docstring for the invocation."""

    facts = CliFacts("claude", "2.1.197", "npm install -g @anthropic-ai/claude-code")
    parser_class = ClaudeStreamParser
    env_needed = (
        "ANTHROPIC_*",
        "CLAUDE_*",
        "DISABLE_*",
        "IS_SANDBOX",
        "MCP_*",
        "MAX_THINKING_TOKENS",
        "BASH_*",
        "CLOUD_ML_REGION",
        "VERTEX_REGION_*",
    )
    fixed_args = "-p --output-format stream-json --verbose --dangerously-skip-permissions"

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``claude -p … --output-format stream-json --verbose``, the prompt on stdin;
        as root with ``IS_SANDBOX=1``, without which ``--dangerously-skip-permissions``
        refuses to run (2.1.197)."""
        invocation = super().build_invocation(request)
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            return replace(invocation, env_set={"IS_SANDBOX": "1"})
        return invocation
