"""pi coding agent (``@mariozechner/pi-coding-agent``), headless with ``--mode json``.

Verified against pi 0.73.1 (``reference/agent-clis.md`` §6, ``offline-e2e.md`` and the
real streams ``pi*.jsonl`` in ``reference/streams/``). Invocation::

    pi --mode json [--model PROVIDER/ID] [--session SESSION] [extra args] PROMPT

pi has no permission prompts and no cwd flag (the process cwd is used). The prompt is
one argv element. pi reads piped stdin into the first message (``readPipedStdin``,
trimmed), so a prompt that argv cannot carry — over ``MAX_ARG_BYTES``, or starting
with ``-`` or ``@`` (an option or a file attachment to pi's parser) — goes on stdin
with no positional argument; otherwise stdin is ``/dev/null``.

Facts the parser relies on (``AgentSessionEvent``, pi's docs/json.md):

* the first line is the session header ``{"type":"session","id":…}``; resuming with
  ``--session ID`` keeps the id;
* ``message_end`` of an assistant message carries its text, ``usage``
  (``input``/``cacheRead``/``cacheWrite``/``output``, ``cost.total`` in USD) and
  ``stopReason`` (``stop``, ``toolUse``, ``length``, ``error``, ``aborted``), per
  API call, so they are summed; ``message_update`` repeats partial messages and
  is ignored; ``tool_execution_start``/``_end`` are the tool calls;
* ``--mode json`` exits 0 even when the model call failed: failure is
  ``stopReason:"error"`` with ``errorMessage`` (``429 fake rate_limit_exceeded: …``,
  ``401 …``, ``Connection error.``). After a failure pi may retry:
  ``auto_retry_start`` … ``agent_end`` … ``auto_retry_end`` (``success``,
  ``finalError``), so an ``agent_end`` after an error is final only when no retry
  follows; the parser marks the result seen on a successful ``agent_end`` or on
  ``auto_retry_end``;
* no subagents;
* ``--session`` with an unknown id prints ``No session found matching '…'`` and exits 1.
"""

from __future__ import annotations

from typing import Any

from autopilot.agents import failures, limits
from autopilot.agents.base import (
    MAX_ARG_BYTES,
    AgentEvent,
    AgentEventKind,
    Classification,
    CliAgent,
    Invocation,
    InvocationRequest,
    IterationReport,
    WallClock,
    argv_bytes,
    find_executable,
    load_json_line,
    local_now,
    shorten,
    summarize_tool_input,
)


class PiStreamParser:
    """Parses ``pi --mode json`` lines.

    Args:
        clock: The wall clock's zone is used for message timestamps; it also
            dates reset times when a message has no timestamp.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        self._report = IterationReport()
        self._clock = clock or local_now
        self._last_text: str | None = None
        self._error: str | None = None
        self._error_ms: object = None
        self._cost = 0.0

    def report(self) -> IterationReport:
        """What the stream so far said; see ``IterationReport``."""
        return self._report

    def feed(self, line: str) -> list[AgentEvent]:
        """Parse one stdout line; unknown or malformed lines give no events."""
        event = load_json_line(self._report, line)
        if event is None:
            return []
        kind = event.get("type")
        report = self._report
        if kind == "session":
            if isinstance(event.get("id"), str) and event["id"]:
                report.session_id = event["id"]
                return [AgentEvent(AgentEventKind.SESSION, event["id"])]
            return []
        if kind == "message_end":
            message = event.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                return self._assistant(message)
            return []
        if kind == "tool_execution_start":
            name = str(event.get("toolName") or "tool")
            report.tool_calls = (report.tool_calls or 0) + 1
            summary = summarize_tool_input(event.get("args"))
            return [AgentEvent(AgentEventKind.TOOL_CALL, summary, tool_name=name)]
        if kind == "tool_execution_end":
            name = str(event.get("toolName") or "tool")
            text = _text_of(event.get("result"))
            return [AgentEvent(AgentEventKind.TOOL_RESULT, shorten(text, 300), tool_name=name)]
        if kind == "agent_end":
            return self._agent_end()
        if kind == "auto_retry_start":
            report.result_seen = False
            message = str(event.get("errorMessage") or "retrying")
            report.last_warning = shorten(message, 1000)
            return [AgentEvent(AgentEventKind.RETRY, f"retry {event.get('attempt')}: {message}")]
        if kind == "auto_retry_end":
            report.result_seen = True
            if event.get("success") is False:
                final = event.get("finalError")
                self._set_error(final if isinstance(final, str) and final else self._error)
            return []
        return []

    def _assistant(self, message: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        if isinstance(message.get("model"), str):
            report.model = message["model"]
        usage = message.get("usage")
        if isinstance(usage, dict):
            added_in = sum(_count(usage.get(key)) for key in ("input", "cacheRead", "cacheWrite"))
            report.input_tokens = (report.input_tokens or 0) + added_in
            report.output_tokens = (report.output_tokens or 0) + _count(usage.get("output"))
            cost = usage.get("cost")
            total = cost.get("total") if isinstance(cost, dict) else None
            if isinstance(total, int | float) and not isinstance(total, bool) and total >= 0:
                self._cost += float(total)
                report.cost_usd = round(self._cost, 10)
        events: list[AgentEvent] = []
        text = _text_of(message)
        if text:
            report.last_root_text = text
            events.append(AgentEvent(AgentEventKind.TEXT, text))
        if message.get("stopReason") in ("error", "aborted"):
            error = message.get("errorMessage")
            self._error = error if isinstance(error, str) and error else "pi: model call failed"
            self._error_ms = message.get("timestamp")
            report.last_warning = shorten(self._error, 1000)
            events.append(AgentEvent(AgentEventKind.ERROR, self._error))
        else:
            self._error = None
            self._last_text = text or self._last_text
        return events

    def _agent_end(self) -> list[AgentEvent]:
        report = self._report
        if self._error is not None:
            # Final unless an auto_retry_start follows; record the failure now so a
            # process that exits here is classified from it.
            self._set_error(self._error)
            return []
        report.result_seen = True
        report.is_error = False
        report.error_kind = report.error_text = report.reset_at_ms = None
        report.final_message = self._last_text
        return [AgentEvent(AgentEventKind.RESULT, self._last_text or "")]

    def _set_error(self, message: str | None) -> None:
        report = self._report
        text = message or "pi: model call failed"
        report.is_error = True
        report.final_message = None
        report.error_text = text
        report.error_kind = failures.classify_error_text(text)
        if report.error_kind in failures.LIMIT_KINDS:
            now = self._clock()
            when = limits.moment_of(self._error_ms, now.tzinfo) or now
            report.reset_at_ms = limits.parse_reset_time(text, when)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _text_of(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    ]
    return "\n".join(parts)


class PiAdapter(CliAgent):
    """Drives ``pi --mode json``; see the module docstring for the invocation.

    Args:
        executable: The ``pi`` program (name on PATH or a path); the
            ``AUTOPILOT_PI_BIN`` variable overrides the default.
        clock: The wall clock, for reset times.
    """

    name = "pi"
    verified_version = "0.73.1"
    supports_sessions = True
    install_hint = "install pi: npm install -g @mariozechner/pi-coding-agent"
    default_executable = "pi"
    env_needed: tuple[str, ...] = (
        "PI_*",
        "ANTHROPIC_*",
        "OPENAI_*",
        "AZURE_OPENAI_*",
        "GEMINI_API_KEY",
        "GOOGLE_*",
        "GROQ_API_KEY",
        "CEREBRAS_API_KEY",
        "XAI_API_KEY",
        "OPENROUTER_API_KEY",
        "MISTRAL_API_KEY",
    )
    """Environment variables this CLI reads (globs); ``env_exclude`` never drops them."""

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``pi --mode json … PROMPT``; the prompt on stdin when argv cannot carry it."""
        argv = [find_executable(self.executable, self.install_hint), "--mode", "json"]
        if request.model:
            argv += ["--model", request.model]
        if request.resume_session_id:
            argv += ["--session", request.resume_session_id]
        argv += list(request.extra_args)
        prompt = request.prompt
        if prompt.startswith(("-", "@")) or argv_bytes(prompt) > MAX_ARG_BYTES:
            return Invocation(argv=argv, stdin=prompt.encode("utf-8"))
        return Invocation(argv=[*argv, prompt])

    def new_parser(self) -> PiStreamParser:
        """A parser for one iteration's ``--mode json`` output."""
        return PiStreamParser(self.clock)

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is a final ``agent_end`` whose last assistant message did not fail.

        pi exits 0 after a failed model call, so the exit status alone proves
        nothing; ``stopReason:"error"`` is the agent's error. The verdict is also
        recorded on ``report``.
        """
        return failures.conclude(report, exit_code, stderr_tail, program="pi", now=self.clock())
