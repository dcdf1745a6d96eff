"""opencode (``opencode-ai``), headless with ``opencode run --format json``.

Verified against opencode 1.18.33 (``reference/agent-clis.md`` §5 and the real streams
``oc*.jsonl`` in ``reference/streams/errors-and-more/``). Invocation::

    opencode run --format json --auto [-m PROVIDER/MODEL] --dir CWD
                 [--session SESSION] [extra args]             (prompt on stdin)

``--auto`` is required for tools (otherwise every permission request is rejected).
The prompt goes on stdin, then stdin is closed, with no message arguments: ``run``
joins its message arguments with spaces and wraps each one that contains a space in
double quotes, escaping inner quotes (``packages/opencode/src/cli/cmd/run.ts``), so
an argv prompt would not arrive verbatim; piped stdin alone becomes the message
unchanged (``resolveRunInput``). This also lifts the argv length limit.

Facts the parser relies on:

* every line is ``{"type", "timestamp" (epoch ms), "sessionID", "part" | "error"}``;
* ``text`` parts are root assistant text (only the root session's parts reach stdout;
  a subagent shows up as one completed ``task`` tool whose output is its answer);
* ``tool_use`` appears once a tool has finished (``state.status`` completed/error);
* ``step_finish`` carries ``tokens`` (``input``, ``output``, ``cache.read``/``write``)
  and ``cost`` (USD) per step, summed here; its ``reason`` is ``tool-calls`` while
  the agent goes on, anything else (``stop``) on the last step. 1.18.33 emits no
  final ``done`` event (upstream main does; it is honoured), so the last step marks
  the result;
* ``error`` (``error.name`` APIError/ProviderAuthError/…, ``data.message``,
  ``statusCode``, ``responseHeaders`` with ``retry-after``, ``responseBody``) is
  fatal; the process then exits 1;
* ``--session`` with an unknown id prints ``Session not found`` and exits 1.
"""

from __future__ import annotations

import re
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
    as_object,
    find_executable,
    load_json_line,
    local_now,
    shorten,
    summarize_tool_input,
)

_ERROR_NAMES = {
    "ProviderAuthError": ErrorKind.AUTH,
    "MessageOutputLengthError": ErrorKind.INVALID_REQUEST,
    "ContextOverflowError": ErrorKind.INVALID_REQUEST,
}


class OpencodeStreamParser:
    """Parses ``opencode run --format json`` lines.

    Args:
        clock: The wall clock's zone is used for line timestamps.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        self._report = IterationReport()
        self._clock = clock or local_now
        self._message_id: object = None
        self._texts: list[str] = []
        self._cost = 0.0

    def report(self) -> IterationReport:
        """What the stream so far said; see ``IterationReport``."""
        return self._report

    def feed(self, line: str) -> list[AgentEvent]:
        """Parse one stdout line; unknown or malformed lines give no events."""
        event = load_json_line(self._report, line)
        if event is None:
            return []
        report = self._report
        events: list[AgentEvent] = []
        session = event.get("sessionID")
        if isinstance(session, str) and session and report.session_id is None:
            report.session_id = session
            events.append(AgentEvent(AgentEventKind.SESSION, session))
        kind = event.get("type")
        part = as_object(event.get("part"))
        if kind == "text" and isinstance(part.get("text"), str):
            if part.get("messageID") != self._message_id:
                self._message_id = part.get("messageID")
                self._texts = []
            self._texts.append(part["text"])
            report.last_root_text = "\n".join(self._texts)
            events.append(AgentEvent(AgentEventKind.TEXT, part["text"]))
        elif kind == "tool_use":
            events += self._tool(part)
        elif kind == "step_finish":
            events += self._step_finish(part)
        elif kind == "error":
            events += self._error(event)
        elif kind == "done":
            report.result_seen = True
        return events

    def _tool(self, part: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        name = str(part.get("tool") or "tool")
        state = as_object(part.get("state"))
        report.tool_calls = (report.tool_calls or 0) + 1
        output = state.get("output") if state.get("status") == "completed" else state.get("error")
        # A ``task`` tool's output is a subagent's answer: never root text.
        summary = summarize_tool_input(state.get("input"))
        return [
            AgentEvent(AgentEventKind.TOOL_CALL, summary, False, name),
            AgentEvent(
                AgentEventKind.TOOL_RESULT, shorten(str(output or ""), 300), name == "task", name
            ),
        ]

    def _step_finish(self, part: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        tokens = part.get("tokens")
        if isinstance(tokens, dict):
            cache = as_object(tokens.get("cache"))
            added_in = _count(tokens.get("input")) + _count(cache.get("read"))
            added_in += _count(cache.get("write"))
            report.input_tokens = (report.input_tokens or 0) + added_in
            report.output_tokens = (report.output_tokens or 0) + _count(tokens.get("output"))
        cost = part.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
            self._cost += float(cost)
            report.cost_usd = round(self._cost, 10)
        if part.get("reason") in ("tool-calls", "tool_calls"):
            return [AgentEvent(AgentEventKind.USAGE, "")]
        report.result_seen = True
        if not report.is_error:
            report.final_message = "\n".join(self._texts) if self._texts else None
        return [
            AgentEvent(AgentEventKind.USAGE, ""),
            AgentEvent(AgentEventKind.RESULT, report.final_message or ""),
        ]

    def _error(self, event: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        error = as_object(event.get("error"))
        data = as_object(error.get("data"))
        name = str(error.get("name") or "error")
        message = data.get("message") if isinstance(data.get("message"), str) else None
        text = message or name
        status = data.get("statusCode") if isinstance(data.get("statusCode"), int) else None
        body = data.get("responseBody") if isinstance(data.get("responseBody"), str) else ""
        kind = _ERROR_NAMES.get(name) or failures.classify_error_text(f"{text} {body}", status)
        report.result_seen = True
        report.is_error = True
        report.final_message = None
        report.error_text = text
        report.error_kind = kind
        if kind not in failures.LIMIT_KINDS:
            return [AgentEvent(AgentEventKind.ERROR, text)]
        now = self._clock()
        when = limits.moment_of(event.get("timestamp"), now.tzinfo) or now
        fields = {"responseBody": body, "responseHeaders": data.get("responseHeaders") or {}}
        report.reset_at_ms = limits.reset_from_fields(fields, when) or limits.parse_reset_time(
            text, when
        )
        return [AgentEvent(AgentEventKind.RATE_LIMIT, text)]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class OpencodeAdapter(CliAgent):
    """Drives ``opencode run --format json``; see the module docstring.

    Args:
        executable: The ``opencode`` program (name on PATH or a path); the
            ``AUTOPILOT_OPENCODE_BIN`` variable overrides the default.
        clock: The wall clock, for reset times.
    """

    name = "opencode"
    verified_version = "1.18.33"
    supports_sessions = True
    install_hint = "install opencode: npm install -g opencode-ai"
    default_executable = "opencode"
    env_needed: tuple[str, ...] = (
        "OPENCODE_*",
        "ANTHROPIC_*",
        "OPENAI_*",
        "GEMINI_API_KEY",
        "GOOGLE_*",
        "GROQ_API_KEY",
        "OPENROUTER_API_KEY",
        "XAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "MISTRAL_API_KEY",
    )
    """Environment variables this CLI reads (globs); ``env_exclude`` never drops them."""
    session_id_shape = re.compile(r"ses_[0-9A-Za-z]{8,60}")

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``opencode run --format json --auto …`` with the prompt on stdin."""
        argv = [
            find_executable(self.executable, self.install_hint),
            "run",
            "--format",
            "json",
            "--auto",
        ]
        if request.model:
            argv += ["-m", request.model]
        argv += ["--dir", str(request.cwd)]
        if request.resume_session_id:
            argv += ["--session", request.resume_session_id]
        argv += list(request.extra_args)
        return Invocation(argv=argv, stdin=request.prompt.encode("utf-8"))

    def new_parser(self) -> OpencodeStreamParser:
        """A parser for one iteration's JSON lines."""
        return OpencodeStreamParser(self.clock)

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is exit 0, a last step and no ``error`` line.

        The verdict is also recorded on ``report``.
        """
        return failures.conclude(
            report, exit_code, stderr_tail, program="opencode", now=self.clock()
        )
