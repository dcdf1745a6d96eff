"""GitHub Copilot CLI (``@github/copilot``), headless with ``--output-format json``.

Verified against Copilot CLI 1.0.102 (``reference/agent-clis.md`` §3 and the real
streams ``copilot*.jsonl`` in ``reference/streams/errors-and-more/``). Invocation::

    copilot -p PROMPT --output-format json --allow-all-tools --no-ask-user
            --no-auto-update [--model M] -C CWD
            [--resume=SESSION] [extra args]                 (stdin: /dev/null)

``--allow-all-tools`` is required in ``-p`` mode. The prompt is one argv element
(commander takes the value after ``-p`` whatever it starts with). Copilot has no
documented way to read a prompt from stdin or a file, so a prompt over
``MAX_ARG_BYTES`` is a ``UsageError``.

Facts the parser relies on (``copilot-sdk/generated/session-events.d.ts``):

* every line has ``type`` and ``data``; lines produced inside a subagent carry a
  top-level ``agentId`` (bracketed by ``subagent.started``/``subagent.completed``)
  and are kept out of the final message;
* ``assistant.message`` (``content``, ``toolRequests``) is assistant text;
  ``tool.execution_start``/``_complete`` are tool calls; ``*_delta`` lines repeat
  partial output and are ignored;
* ``result`` is the final line: ``sessionId``, ``exitCode``; stdout has **no token
  counts** (those are only in ``--usage-output-file``) and no cost;
* failures end with ``session.error``: ``errorType`` authentication, authorization,
  policy, quota, rate_limit, context_limit or query, plus ``statusCode`` and the
  agent's ``message``; each failed model call before it is a ``model.call_failure``
  whose ``errorMessage`` is the provider's raw body. A usage limit is reported as
  ``errorType:"rate_limit"``, but that body says ``usage_limit_reached`` and holds
  ``resets_at`` (``copilot_usage.jsonl``), which the parser uses;
* exit status 0 or 1, the same as ``result.exitCode``.
"""

from __future__ import annotations

import json
from typing import Any

from autopilot.agents import failures, limits
from autopilot.agents.base import (
    MAX_ARG_BYTES,
    AgentEvent,
    AgentEventKind,
    Classification,
    CliAgent,
    ErrorKind,
    Invocation,
    InvocationRequest,
    IterationReport,
    WallClock,
    argv_bytes,
    as_object,
    find_executable,
    load_json_line,
    local_now,
    shorten,
    summarize_tool_input,
)
from autopilot.errors import UsageError

_ERROR_TYPES = {
    "authentication": ErrorKind.AUTH,
    "authorization": ErrorKind.AUTH,
    "policy": ErrorKind.AUTH,
    "quota": ErrorKind.USAGE_LIMIT,
    "rate_limit": ErrorKind.RATE_LIMIT,
    "context_limit": ErrorKind.INVALID_REQUEST,
}


class CopilotStreamParser:
    """Parses ``copilot -p … --output-format json`` lines.

    Args:
        clock: The wall clock's zone is used for line timestamps.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        self._report = IterationReport()
        self._clock = clock or local_now
        self._last_text: str | None = None
        self._failure: dict[str, Any] | None = None
        self._failure_at: object = None

    def report(self) -> IterationReport:
        """What the stream so far said; see ``IterationReport``."""
        return self._report

    def feed(self, line: str) -> list[AgentEvent]:
        """Parse one stdout line; unknown or malformed lines give no events."""
        event = load_json_line(self._report, line)
        if event is None:
            return []
        report = self._report
        kind = event.get("type")
        data = as_object(event.get("data"))
        subagent = event.get("agentId") is not None
        if kind == "assistant.message":
            content = data.get("content")
            if isinstance(content, str) and content:
                if not subagent:
                    report.last_root_text = self._last_text = content
                return [AgentEvent(AgentEventKind.TEXT, content, subagent)]
            return []
        if kind == "tool.execution_start":
            name = str(data.get("toolName") or "tool")
            report.tool_calls = (report.tool_calls or 0) + 1
            summary = summarize_tool_input(data.get("arguments"))
            return [AgentEvent(AgentEventKind.TOOL_CALL, summary, subagent, name)]
        if kind == "tool.execution_complete":
            result = data.get("result")
            text = result.get("content") if isinstance(result, dict) else None
            return [AgentEvent(AgentEventKind.TOOL_RESULT, shorten(str(text or ""), 300), subagent)]
        if kind == "model.call_failure" and not subagent:
            self._failure = data
            self._failure_at = event.get("timestamp")
            message = f"model call failed ({data.get('statusCode')}): {data.get('errorType')}"
            return [AgentEvent(AgentEventKind.RETRY, message)]
        if kind == "session.error" and not subagent:
            return self._error(data, event.get("timestamp"))
        if kind == "result":
            return self._result(event)
        return []

    def _error(self, data: dict[str, Any], timestamp: object) -> list[AgentEvent]:
        report = self._report
        message = data.get("message")
        text = message if isinstance(message, str) and message else "copilot reported an error"
        status = data.get("statusCode") if isinstance(data.get("statusCode"), int) else None
        error_type = str(data.get("errorType") or "")
        failure_words = _failure_words(self._failure)
        kind = _ERROR_TYPES.get(error_type) or failures.classify_error_text(text, status)
        if kind is ErrorKind.RATE_LIMIT:
            # The provider's own body tells a usage limit from a rate limit.
            detail = " ".join([str(data.get("errorCode") or ""), failure_words, text])
            kind = failures.classify_error_text(detail, 429)
        report.is_error = True
        report.final_message = None
        report.error_text = text
        report.error_kind = kind
        if kind in failures.LIMIT_KINDS:
            now = self._clock()
            report.reset_at_ms = self._failure_reset(now) or limits.parse_reset_time(
                text, limits.moment_of(timestamp, now.tzinfo) or now
            )
            return [AgentEvent(AgentEventKind.RATE_LIMIT, text)]
        return [AgentEvent(AgentEventKind.ERROR, text)]

    def _failure_reset(self, now: Any) -> int | None:
        if self._failure is None:
            return None
        when = limits.moment_of(self._failure_at, now.tzinfo) or now
        body = self._failure.get("errorMessage")
        if isinstance(body, str):
            try:
                decoded = json.loads(body)
            except (ValueError, RecursionError):
                return limits.parse_reset_time(body, when)
            if isinstance(decoded, dict):
                return limits.reset_from_fields(decoded, when)
        return None

    def _result(self, event: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        report.result_seen = True
        session = event.get("sessionId")
        if isinstance(session, str) and session:
            report.session_id = session
        exit_code = event.get("exitCode")
        if not report.is_error:
            if isinstance(exit_code, int) and exit_code != 0:
                report.is_error = True
                report.error_text = f"copilot result exitCode {exit_code}"
                report.error_kind = ErrorKind.UNKNOWN
            else:
                report.final_message = self._last_text
        events = [AgentEvent(AgentEventKind.SESSION, report.session_id or "")]
        if not report.is_error:
            events.append(AgentEvent(AgentEventKind.RESULT, report.final_message or ""))
        return events


def _failure_words(failure: dict[str, Any] | None) -> str:
    if failure is None:
        return ""
    return " ".join(str(failure.get(key) or "") for key in ("errorType", "errorMessage"))


class CopilotAdapter(CliAgent):
    """Drives ``copilot -p … --output-format json``; see the module docstring.

    Args:
        executable: The ``copilot`` program (name on PATH or a path); the
            ``AUTOPILOT_COPILOT_BIN`` variable overrides the default.
        clock: The wall clock, for reset times.
    """

    name = "copilot"
    verified_version = "1.0.102"
    supports_sessions = True
    install_hint = "install Copilot CLI: npm install -g @github/copilot"
    default_executable = "copilot"
    env_needed: tuple[str, ...] = ("COPILOT_*", "GH_TOKEN", "GH_HOST", "GITHUB_TOKEN")
    """Environment variables this CLI reads (globs); ``env_exclude`` never drops them."""

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``copilot -p PROMPT --output-format json --allow-all-tools …``, stdin ``/dev/null``.

        Raises:
            UsageError: the prompt is longer than one argv element may be.
        """
        size = argv_bytes(request.prompt)
        if size > MAX_ARG_BYTES:
            raise UsageError(
                f"the prompt is {size} bytes; Copilot CLI takes it as one argument, "
                f"which Linux limits to {MAX_ARG_BYTES} bytes"
            )
        argv = [
            find_executable(self.executable, self.install_hint),
            "-p",
            request.prompt,
            "--output-format",
            "json",
            "--allow-all-tools",
            # Unattended: never stop to ask the user, never update itself mid-run.
            "--no-ask-user",
            "--no-auto-update",
        ]
        if request.model:
            argv += ["--model", request.model]
        argv += ["-C", str(request.cwd)]
        if request.resume_session_id:
            argv.append(f"--resume={request.resume_session_id}")
        argv += list(request.extra_args)
        return Invocation(argv=argv)

    def new_parser(self) -> CopilotStreamParser:
        """A parser for one iteration's JSON lines."""
        return CopilotStreamParser(self.clock)

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is exit 0, a ``result`` line and no ``session.error``.

        The verdict is also recorded on ``report``.
        """
        return failures.conclude(
            report, exit_code, stderr_tail, program="copilot", now=self.clock()
        )
