"""Claude Code (``@anthropic-ai/claude-code``), headless with stream-json output.

Verified against Claude Code 2.1.197 (``reference/agent-clis.md`` §1 and the real
streams in ``reference/streams/``). Invocation::

    claude -p --output-format stream-json --verbose --dangerously-skip-permissions
           [--model M] [--resume SESSION] [extra args]      (prompt on stdin)

The prompt goes on stdin, then stdin is closed: no argv length limit, no shell.
Facts the parser relies on:

* one ``assistant`` line per content block; lines inside a subagent carry a
  non-null ``parent_tool_use_id`` and are kept out of the final message;
* ``result.result`` is the final message; failure is ``is_error`` or a non-zero
  exit, never ``subtype`` (an API failure has ``subtype: "success"``);
* ``session_id`` is on every line; usage and ``total_cost_usd`` are on ``result``;
* the assistant line's ``error`` (``rate_limit``, ``authentication_failed``,
  ``server_error``, ``billing_error``, …) and ``result.api_error_status`` classify
  a failure; ``rate_limit_event.rate_limit_info.resetsAt`` (epoch s) gives a reset;
* a subscription limit ends in a failed ``result`` whose text is the user-facing
  notice (``You've hit your limit · resets 7pm (Area/City)``, or the older
  ``Claude AI usage limit reached|<epoch>``): a usage limit, with the reset parsed
  from that text by ``limits.parse_reset_time`` when no ``rate_limit_event`` gave one.

Only the ``result`` event, the assistant ``error`` field and (after a failed exit)
stderr classify an iteration; tool results and the model's prose never do.
"""

from __future__ import annotations

import os
from typing import Any

from autopilot.agents import failures, limits
from autopilot.agents.base import (
    AgentEvent,
    AgentEventKind,
    Classification,
    CliAgent,
    ErrorKind,
    Invocation,
    InvocationRequest,
    IterationReport,
    WallClock,
    find_executable,
    loads_agent_json,
    local_now,
    permission_denial,
    shorten,
    summarize_tool_input,
)

_ASSISTANT_ERRORS = {
    "rate_limit": ErrorKind.RATE_LIMIT,
    "authentication_failed": ErrorKind.AUTH,
    "billing_error": ErrorKind.USAGE_LIMIT,
    "server_error": ErrorKind.SERVER,
    "overloaded": ErrorKind.SERVER,
    "invalid_request": ErrorKind.INVALID_REQUEST,
}


def _status_kind(status: Any) -> ErrorKind | None:
    if not isinstance(status, int):
        return None
    if status in (401, 403):
        return ErrorKind.AUTH
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status >= 500:
        return ErrorKind.SERVER
    if status >= 400:
        return ErrorKind.INVALID_REQUEST
    return None


class ClaudeStreamParser:
    """Parses Claude Code's ``--output-format stream-json`` lines.

    Also accepts the single-object and JSON-array shapes of ``--output-format json``
    (field report 18): every element is parsed as a line of its own.

    Args:
        clock: The wall clock, for reset times given as a clock time
            (``resets 7pm``); ``local_now`` by default.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        self._report = IterationReport()
        self._assistant_error: ErrorKind | None = None
        self._clock = clock or local_now

    def report(self) -> IterationReport:
        """What the stream so far said; see ``IterationReport``."""
        return self._report

    def feed(self, line: str) -> list[AgentEvent]:
        """Parse one stdout line; unknown or malformed lines give no events."""
        report = self._report
        report.lines += 1
        text = line.strip()
        if not text:
            return []
        try:
            value = loads_agent_json(text)
        except (ValueError, RecursionError):
            report.bad_lines += 1
            return []
        items = value if isinstance(value, list) else [value]
        events: list[AgentEvent] = []
        for item in items:
            if isinstance(item, dict):
                events.extend(self._message(item))
            else:
                report.bad_lines += 1
        return events

    def _message(self, msg: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        session = msg.get("session_id")
        if isinstance(session, str) and session and report.session_id != session:
            report.session_id = session
        kind = msg.get("type")
        if kind == "system":
            return self._system(msg)
        if kind == "assistant":
            return self._assistant(msg)
        if kind == "user":
            return self._user(msg)
        if kind == "result":
            return self._result(msg)
        if kind == "rate_limit_event":
            return self._rate_limit(msg)
        return []

    def _system(self, msg: dict[str, Any]) -> list[AgentEvent]:
        subtype = msg.get("subtype")
        if subtype == "init":
            if isinstance(msg.get("model"), str):
                self._report.model = msg["model"]
            return [AgentEvent(AgentEventKind.SESSION, self._report.session_id or "")]
        if subtype == "api_retry":
            status = msg.get("error_status")
            detail = msg.get("error") or status or "error"
            attempt = msg.get("attempt")
            return [AgentEvent(AgentEventKind.RETRY, f"API retry {attempt}: {detail}")]
        return []

    def _assistant(self, msg: dict[str, Any]) -> list[AgentEvent]:
        subagent = msg.get("parent_tool_use_id") is not None
        error = msg.get("error")
        if isinstance(error, str) and not subagent:
            self._assistant_error = _ASSISTANT_ERRORS.get(error, ErrorKind.UNKNOWN)
        message = msg.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return []
        events: list[AgentEvent] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                if not subagent:
                    self._report.last_root_text = block["text"]
                events.append(AgentEvent(AgentEventKind.TEXT, block["text"], subagent))
            elif block.get("type") == "tool_use":
                name = block.get("name") if isinstance(block.get("name"), str) else "tool"
                self._report.tool_calls = (self._report.tool_calls or 0) + 1
                summary = summarize_tool_input(block.get("input"))
                events.append(AgentEvent(AgentEventKind.TOOL_CALL, summary, subagent, name))
        return events

    def _user(self, msg: dict[str, Any]) -> list[AgentEvent]:
        subagent = msg.get("parent_tool_use_id") is not None
        message = msg.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return []
        events = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                events.append(
                    AgentEvent(
                        AgentEventKind.TOOL_RESULT, shorten(_result_text(block), 300), subagent
                    )
                )
        return events

    def _result(self, msg: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        report.result_seen = True
        result_text = msg.get("result") if isinstance(msg.get("result"), str) else None
        report.is_error = msg.get("is_error") is True
        usage = msg.get("usage")
        if isinstance(usage, dict):
            report.input_tokens = sum(
                _int(usage.get(key))
                for key in (
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                )
            )
            report.output_tokens = _int(usage.get("output_tokens"))
        denials = msg.get("permission_denials")
        if isinstance(denials, list):
            report.permission_denials = tuple(
                permission_denial(item.get("tool_name"), item.get("tool_input"))
                for item in denials
                if isinstance(item, dict)
            )
        cost = msg.get("total_cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
            report.cost_usd = float(cost)
        if report.is_error:
            report.error_text = result_text or _first_error(msg) or "Claude Code reported an error"
            report.error_kind = (
                self._assistant_error
                or _status_kind(msg.get("api_error_status"))
                or _subtype_kind(msg.get("subtype"), report.error_text)
            )
            if report.error_kind in (ErrorKind.RATE_LIMIT, ErrorKind.UNKNOWN):
                # The subscription notice ("You've hit your limit · resets 7pm") is a
                # usage limit whatever the assistant line called it.
                refined = failures.classify_error_text(report.error_text)
                if refined is ErrorKind.USAGE_LIMIT:
                    report.error_kind = refined
            if report.error_kind in failures.LIMIT_KINDS and report.reset_at_ms is None:
                report.reset_at_ms = limits.parse_reset_time(report.error_text, self._clock())
            report.final_message = None
            return [AgentEvent(AgentEventKind.ERROR, report.error_text)]
        report.final_message = result_text
        events = [AgentEvent(AgentEventKind.RESULT, result_text or "")]
        if report.input_tokens is not None:
            events.append(AgentEvent(AgentEventKind.USAGE, ""))
        return events

    def _rate_limit(self, msg: dict[str, Any]) -> list[AgentEvent]:
        info = msg.get("rate_limit_info")
        if not isinstance(info, dict) or info.get("status") != "rejected":
            return []
        resets = info.get("resetsAt")
        if isinstance(resets, int | float) and not isinstance(resets, bool) and resets > 0:
            # Epoch seconds in 2.1.x; tolerate milliseconds.
            self._report.reset_at_ms = int(resets if resets > 10**11 else resets * 1000)
        kind = str(info.get("rateLimitType") or "usage")
        return [AgentEvent(AgentEventKind.RATE_LIMIT, f"{kind} limit reached")]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


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


def _first_error(msg: dict[str, Any]) -> str | None:
    errors = msg.get("errors")
    if isinstance(errors, list) and errors:
        return str(errors[0])
    return None


def _subtype_kind(subtype: Any, text: str) -> ErrorKind:
    if "No conversation found with session ID" in text:
        return ErrorKind.SESSION_NOT_FOUND
    if isinstance(subtype, str) and subtype.startswith("error_"):
        return ErrorKind.UNKNOWN
    return ErrorKind.UNKNOWN


class ClaudeAdapter(CliAgent):
    """Drives Claude Code; see the module docstring for the invocation.

    Args:
        executable: The ``claude`` program (name on PATH or a path); the
            ``AUTOPILOT_CLAUDE_BIN`` variable overrides the default.
        clock: The wall clock, for reset times given as a clock time.
    """

    name = "claude"
    verified_version = "2.1.197"
    supports_sessions = True
    install_hint = "install Claude Code: npm install -g @anthropic-ai/claude-code"
    default_executable = "claude"
    env_needed: tuple[str, ...] = (
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
    """Environment variables this CLI reads (globs); ``env_exclude`` never drops them."""

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``claude -p … --output-format stream-json --verbose``; prompt on stdin."""
        argv = [
            find_executable(self.executable, self.install_hint),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]
        if request.model:
            argv += ["--model", request.model]
        if request.resume_session_id:
            argv += ["--resume", request.resume_session_id]
        argv += list(request.extra_args)
        env: dict[str, str] = {}
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            # As root, --dangerously-skip-permissions refuses to run without it (2.1.197).
            env["IS_SANDBOX"] = "1"
        return Invocation(argv=argv, env_set=env, stdin=request.prompt.encode("utf-8"))

    def new_parser(self) -> ClaudeStreamParser:
        """A parser for one iteration's stream-json."""
        return ClaudeStreamParser(self.clock)

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is exit 0, a ``result`` event and ``is_error`` false.

        A failed exit without an error result is classified from stderr (the CLI's
        own words), never from the stream's tool results or prose (field report 3).
        The verdict is also recorded on ``report``.
        """
        return failures.conclude(report, exit_code, stderr_tail, program="claude", now=self.clock())
