"""pi coding agent (``@mariozechner/pi-coding-agent``), headless with ``--mode json``.

Verified against pi 0.73.1 (its real output is in ``tests/data/captured-streams/``; the
format is ``AgentSessionEvent``, pi's ``docs/json.md``). Invocation::

    pi --mode json [--model PROVIDER/ID] [--session SESSION] [extra args] PROMPT

pi has no permission prompts and no cwd flag (the process cwd is used). The prompt is
one argv element. pi reads piped stdin into the first message (``readPipedStdin``,
trimmed), so a prompt that argv cannot carry — over ``MAX_ARG_BYTES``, or starting
with ``-`` or ``@`` (an option or a file attachment to pi's parser) — goes on stdin
with no positional argument; otherwise stdin is ``/dev/null``.

Facts the parser relies on:

* the first line is the session header ``{"type":"session","id":…}`` (a UUID);
  resuming with ``--session ID`` keeps the id;
* ``message_end`` of an assistant message carries its text, ``usage``
  (``input``/``cacheRead``/``cacheWrite``/``output``, ``cost.total`` in USD) and
  ``stopReason`` (``stop``, ``toolUse``, ``length``, ``error``, ``aborted``), per
  API call, so they are summed; ``message_update`` repeats partial messages and
  is ignored; ``tool_execution_start``/``_end`` are the tool calls;
* ``--mode json`` exits 0 even when the model call failed: failure is
  ``stopReason:"error"`` with ``errorMessage`` (``429 fake rate_limit_exceeded: …``,
  ``401 …``, ``Connection error.``, ``400 … You're out of extra usage. Add more at
  claude.ai/settings/usage…`` from an Anthropic subscription: a usage limit with no
  reset). After a failure pi may retry:
  ``auto_retry_start`` … ``agent_end`` … ``auto_retry_end`` (``success``,
  ``finalError``), so an ``agent_end`` after an error is final only when no retry
  follows; the parser marks the result seen on a successful ``agent_end`` or on
  ``auto_retry_end``;
* no subagents and no permission rules;
* ``--session`` with an unknown id prints ``No session found matching '…'`` and exits 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autopilot.agents import fields
from autopilot.agents.adapter import CliAgent, CliFacts
from autopilot.agents.base import AgentEvent, Invocation
from autopilot.agents.parser import JsonLinesParser
from autopilot.core.vocabulary import AgentEventKind

if TYPE_CHECKING:
    from autopilot.agents.base import InvocationRequest, WallClock

_INPUT_KEYS = ("input", "cacheRead", "cacheWrite")


class PiStreamParser(JsonLinesParser):
    """Parses ``pi --mode json`` lines.

    Args:
        clock: The wall clock's zone is used for message timestamps; it also
            dates reset times when a message has no timestamp.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        super().__init__(clock)
        self._last_text: str | None = None
        self._error: str | None = None
        self._error_at: object = None

    def handle_session(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The session header: its id."""
        return self.attach_session(event.get("id"))

    def handle_message_end(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A whole message; an assistant's carries text, usage and its stop reason."""
        message = fields.as_object(event.get("message"))
        return self._assistant(message) if message.get("role") == "assistant" else []

    def handle_tool_execution_start(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A tool call."""
        return [self.tool_call(event.get("toolName"), event.get("args"))]

    def handle_tool_execution_end(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A tool's result."""
        name = str(event.get("toolName") or "tool")
        return [self.tool_result(_text_of(event.get("result")), name=name)]

    def handle_agent_end(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The run's end, unless a retry follows a failure."""
        if self._error is not None:
            # Final unless an auto_retry_start follows; record the failure now so a
            # process that exits here is classified from it.
            self._set_error(self._error)
            return []
        self.clear_failure()
        return self.finish(self._last_text)

    def handle_auto_retry_start(self, event: dict[str, Any]) -> list[AgentEvent]:
        """pi retries a failed call: the run goes on."""
        self._report.result_seen = False
        error = str(event.get("errorMessage") or "retrying")
        self.warn(error)
        return [AgentEvent(AgentEventKind.RETRY, f"retry {event.get('attempt')}: {error}")]

    def handle_auto_retry_end(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The retries are over: failed for good, or recovered."""
        self._report.result_seen = True
        if event.get("success") is False:
            self._set_error(fields.text(event.get("finalError")) or self._error)
        return []

    def _assistant(self, message: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        report.model = fields.text(message.get("model")) or report.model
        usage = message.get("usage")
        if isinstance(usage, dict):
            self.add_tokens(
                fields.sum_counts(usage, *_INPUT_KEYS), fields.count(usage.get("output"))
            )
            self.add_cost(fields.usd(fields.as_object(usage.get("cost")).get("total")))
        events: list[AgentEvent] = []
        text = _text_of(message)
        if text:
            events.append(self.text(text))
        if message.get("stopReason") in ("error", "aborted"):
            self._error = fields.text(message.get("errorMessage")) or "pi: model call failed"
            self._error_at = message.get("timestamp")
            events.append(self.warn(self._error, AgentEventKind.ERROR))
        else:
            self._error = None
            self._last_text = text or self._last_text
        return events

    def _set_error(self, message: str | None) -> None:
        self.fail(message or "pi: model call failed", at=self._error_at)


def _text_of(message: Any) -> str:
    content = fields.as_object(message).get("content")
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

    Success is a final ``agent_end`` whose last assistant message did not fail: pi
    exits 0 after a failed model call, so the exit status alone proves nothing.
    """

    facts = CliFacts("pi", "0.73.1", "npm install -g @mariozechner/pi-coding-agent")
    parser_class = PiStreamParser
    env_needed = (
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
    fixed_args = "--mode json"
    resume_flag = "--session"

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``pi --mode json … PROMPT``; the prompt on stdin when argv cannot carry it."""
        argv = self.argv(request)
        prompt = request.prompt
        if prompt.startswith(("-", "@")) or not self.argv_can_carry(prompt):
            return Invocation(argv=argv, stdin=prompt.encode("utf-8"))
        return Invocation(argv=[*argv, prompt])
