"""opencode (``opencode-ai``), headless with ``opencode run --format json``.

Verified against opencode 1.18.33 (its real output is in
``tests/data/captured-streams/errors-and-more/``; the format is sst/opencode
``packages/opencode/src/cli/cmd/run.ts``). Invocation::

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
  session ids are ``ses_`` and 26 letters and digits;
* ``text`` parts are root assistant text (only the root session's parts reach stdout;
  a subagent shows up as one completed ``task`` tool whose output is its answer);
* ``tool_use`` appears once a tool has finished (``state.status`` completed/error);
  a call a ``permission`` rule denied (or the user rejected) fails with
  ``The user has specified a rule which prevents you from using this specific tool
  call…`` (``The user rejected permission to use this specific tool call…``);
* ``step_finish`` carries ``tokens`` (``input``, ``output``, ``cache.read``/``write``)
  and ``cost`` (USD) per step, summed here; its ``reason`` is ``tool-calls`` while
  the agent goes on, anything else (``stop``) on the last step. 1.18.33 emits no
  final ``done`` event (upstream main does; it is honoured), so the last step marks
  the result;
* ``error`` (``error.name`` APIError/ProviderAuthError/UnknownError…, ``data.message``
  such as ``Model not found: p/m.``,
  ``statusCode``, ``responseHeaders`` with ``retry-after``, ``responseBody``) is
  fatal; the process then exits 1;
* ``--session`` with an unknown id prints ``Session not found`` and exits 1.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from autopilot.agents import failures, fields, limits
from autopilot.agents.adapter import CliAgent, CliFacts
from autopilot.agents.base import AgentEvent
from autopilot.agents.parser import JsonLinesParser
from autopilot.core.vocabulary import AgentEventKind, ErrorKind

if TYPE_CHECKING:
    from autopilot.agents.base import WallClock

_INVALID_NAMES = ("MessageOutputLengthError", "ContextOverflowError", "ProviderModelNotFoundError")
_ERROR_NAMES = {"ProviderAuthError": ErrorKind.AUTH} | dict.fromkeys(
    _INVALID_NAMES, ErrorKind.INVALID_REQUEST
)
_DENIED = (
    "The user has specified a rule which prevents you from using this specific tool call",
    "The user rejected permission to use this specific tool call",
)


class OpencodeStreamParser(JsonLinesParser):
    """Parses ``opencode run --format json`` lines.

    Args:
        clock: The wall clock's zone is used for line timestamps.
    """

    session_id_shape = re.compile(r"ses_[0-9A-Za-z]{8,60}")

    def __init__(self, clock: WallClock | None = None) -> None:
        super().__init__(clock)
        self._message_id: object = None
        self._texts: list[str] = []

    def on_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The session id every line carries, then the line's own events."""
        return self.attach_session(event.get("sessionID")) + super().on_event(event)

    def handle_text(self, event: dict[str, Any]) -> list[AgentEvent]:
        """Root assistant text; the last message's parts are the answer."""
        part = fields.as_object(event.get("part"))
        text = part.get("text")
        if not isinstance(text, str):
            return []
        if part.get("messageID") != self._message_id:
            self._message_id = part.get("messageID")
            self._texts = []
        self._texts.append(text)
        self._report.last_root_text = "\n".join(self._texts)
        return [AgentEvent(AgentEventKind.TEXT, text)]

    def handle_done(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The end of the run (upstream main; 1.18.33 does not print it)."""
        self._report.result_seen = True
        return []

    def handle_tool_use(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A finished tool call and its result (or the error that ended it)."""
        part = fields.as_object(event.get("part"))
        name = str(part.get("tool") or "tool")
        state = fields.as_object(part.get("state"))
        if state.get("status") == "completed":
            output = state.get("output")
        else:
            output = state.get("error")
            if isinstance(output, str) and output.startswith(_DENIED):
                self.deny(name, state.get("input"))
        # A ``task`` tool's output is a subagent's answer: never root text.
        return [
            self.tool_call(name, state.get("input")),
            self.tool_result(output, name == "task", name),
        ]

    def handle_step_finish(self, event: dict[str, Any]) -> list[AgentEvent]:
        """One model call's tokens and cost; a last step is the result."""
        part = fields.as_object(event.get("part"))
        tokens = part.get("tokens")
        if isinstance(tokens, dict):
            cache = fields.as_object(tokens.get("cache"))
            added_in = fields.count(tokens.get("input")) + fields.sum_counts(cache, "read", "write")
            self.add_tokens(added_in, fields.count(tokens.get("output")))
        self.add_cost(fields.usd(part.get("cost")))
        if part.get("reason") in ("tool-calls", "tool_calls"):
            return [AgentEvent(AgentEventKind.USAGE, "")]
        return self.finish("\n".join(self._texts) if self._texts else None)

    def handle_error(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A fatal error: the process then exits 1."""
        error = fields.as_object(event.get("error"))
        data = fields.as_object(error.get("data"))
        name = str(error.get("name") or "error")
        text = fields.text(data.get("message")) or name
        status = data.get("statusCode") if isinstance(data.get("statusCode"), int) else None
        body = data.get("responseBody") if isinstance(data.get("responseBody"), str) else ""
        kind = _ERROR_NAMES.get(name) or failures.classify_error_text(f"{text} {body}", status)
        self._report.result_seen = True
        when = self.moment(event.get("timestamp"))
        headers = data.get("responseHeaders") or {}
        reset = limits.reset_from_fields({"responseBody": body, "responseHeaders": headers}, when)
        return self.fail(text, kind, at=event.get("timestamp"), reset_at_ms=reset)


class OpencodeAdapter(CliAgent):
    """Drives ``opencode run --format json``; see the module docstring.

    Success is exit 0, a last step and no ``error`` line.
    """

    facts = CliFacts("opencode", "1.18.33", "npm install -g opencode-ai")
    parser_class = OpencodeStreamParser
    env_needed = (
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
    fixed_args = "run --format json --auto"
    cwd_flag = "--dir"
    resume_flag = "--session"
