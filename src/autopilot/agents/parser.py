"""What every agent CLI's output parser shares.

``AgentParser`` holds the ``IterationReport`` a parser fills in and the steps every
CLI's events come down to: a session id (kept only in the CLI's shape), root text, a
tool call and its result, tokens and cost, a warning, a permission denial, a failure
(with the reset time of a limit) and the final result. ``JsonLinesParser`` adds the
decoding of one JSON object per line; each CLI's module maps its own events onto
these steps in ``on_event``.

The loop calls ``feed`` for each stdout line and ``report`` whenever it needs the
state so far, so both are cheap and neither raises on bad input.
"""

from __future__ import annotations

import abc
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from autopilot.agents import failures, limits
from autopilot.agents.base import (
    UUID_SHAPE,
    AgentEvent,
    IterationReport,
    PermissionDenial,
    local_now,
    session_id_fits,
    shorten,
)
from autopilot.core.vocabulary import AgentEventKind, ErrorKind

if TYPE_CHECKING:
    from autopilot.agents.base import WallClock

_LONE_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")
_EVENT_TYPE = re.compile(r"[a-z][a-z_.]{0,63}")


def loads_agent_json(text: str) -> Any:
    """``json.loads`` for agent output, with lone surrogates made U+FFFD.

    JavaScript CLIs can cut a string inside a surrogate pair and print ``"\\ud83d"``;
    Python decodes that to a lone surrogate, which cannot be printed or written as
    UTF-8. Pairs that are whole come out as their character.

    Raises:
        ValueError: not JSON.
        RecursionError: nested too deeply.
    """
    value = json.loads(text)
    if _LONE_SURROGATE_ESCAPE.search(text) is None:
        return value
    return _repair(value)


def _repair(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_repair(item) for item in value]
    if isinstance(value, dict):
        return {_repair(key): _repair(item) for key, item in value.items()}
    return value


def summarize_tool_input(tool_input: Any) -> str:
    """A short human summary of a tool call's arguments."""
    if isinstance(tool_input, Mapping):
        for key in ("command", "cmd", "file_path", "path", "pattern", "url", "description"):
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                return shorten(value, 160)
        return shorten(", ".join(f"{k}={v}" for k, v in list(tool_input.items())[:3]), 160)
    if isinstance(tool_input, Sequence) and not isinstance(tool_input, str):
        return shorten(" ".join(str(item) for item in tool_input), 160)
    return shorten(str(tool_input), 160)


_DENIAL_ARGUMENTS = ("command", "cmd", "file_path", "filePath", "path", "url", "pattern")
_DENIAL_COMMAND_CHARS = 2000


def permission_denial(tool: object, tool_input: object) -> PermissionDenial:
    """A ``PermissionDenial`` for a refused call of ``tool`` with ``tool_input``.

    Args:
        tool: The tool's name (``"tool"`` when it is not a non-empty string).
        tool_input: The call's arguments as the CLI printed them; the command is
            the first string among ``command``, ``cmd``, ``file_path``, ``filePath``,
            ``path``, ``url`` and ``pattern``, kept verbatim up to 2,000 characters.
    """
    name = tool if isinstance(tool, str) and tool else "tool"
    command = None
    if isinstance(tool_input, Mapping):
        for key in _DENIAL_ARGUMENTS:
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                command = value[:_DENIAL_COMMAND_CHARS]
                break
    return PermissionDenial(name, command)


class AgentParser(abc.ABC):
    """The report of one iteration and the steps that fill it in.

    Subclasses implement ``feed`` (abstract: a parser without it cannot be made).
    ``session_id_shape`` is what the CLI's session ids look like (None: it has
    none); an id of another shape is never recorded.

    Args:
        clock: The wall clock, for reset times given as a clock time or relative
            to a line's timestamp; ``local_now`` by default.
    """

    session_id_shape: ClassVar[re.Pattern[str] | None] = UUID_SHAPE

    def __init__(self, clock: WallClock | None = None) -> None:
        self._report = IterationReport()
        self._clock = clock or local_now

    @abc.abstractmethod
    def feed(self, line: str) -> list[AgentEvent]:
        """Parse one stdout line (without its newline) and return its events."""

    def report(self) -> IterationReport:
        """What the output so far said; see ``IterationReport``."""
        return self._report

    def moment(self, timestamp: object = None) -> datetime:
        """When a line happened: its own ``timestamp`` (epoch s or ms, ISO 8601) in
        the clock's zone, else the clock's now."""
        now = self._clock()
        return limits.moment_of(timestamp, now.tzinfo) or now

    def attach_session(self, value: object) -> list[AgentEvent]:
        """Record ``value`` as the session id if it has the CLI's shape.

        Returns:
            A ``SESSION`` event when the id is new; nothing for the same id again or
            for a value that is not an id (dropped: never stored, never resumed).
        """
        report = self._report
        if not session_id_fits(value, self.session_id_shape):
            return []
        if value == report.session_id:
            return []
        report.session_id = value
        return [AgentEvent(AgentEventKind.SESSION, value)]

    def text(self, text: str, subagent: bool = False) -> AgentEvent:
        """Assistant text; the root agent's is remembered for the excerpt."""
        if not subagent:
            self._report.last_root_text = text
        return AgentEvent(AgentEventKind.TEXT, text, subagent)

    def tool_call(
        self, name: object, tool_input: object, subagent: bool = False, summary: str | None = None
    ) -> AgentEvent:
        """A tool call (root or subagent), counted; ``summary`` defaults to one
        made from ``tool_input``."""
        report = self._report
        report.tool_calls = (report.tool_calls or 0) + 1
        tool = name if isinstance(name, str) and name else "tool"
        line = summary if summary is not None else summarize_tool_input(tool_input)
        return AgentEvent(AgentEventKind.TOOL_CALL, line, subagent, tool)

    @staticmethod
    def tool_result(output: object, subagent: bool = False, name: str | None = None) -> AgentEvent:
        """A tool's result, shortened to one line of 300 characters."""
        text = output if isinstance(output, str) else "" if output is None else str(output)
        return AgentEvent(AgentEventKind.TOOL_RESULT, shorten(text, 300), subagent, name)

    def deny(self, tool: object, tool_input: object) -> None:
        """Record a tool call the CLI refused under a permission rule."""
        denial = permission_denial(tool, tool_input)
        self._report.permission_denials = (*self._report.permission_denials, denial)

    def add_tokens(self, input_tokens: int, output_tokens: int) -> None:
        """Add one model call's (or one cycle's) tokens to the iteration's."""
        report = self._report
        report.input_tokens = (report.input_tokens or 0) + input_tokens
        report.output_tokens = (report.output_tokens or 0) + output_tokens

    def add_cost(self, cost_usd: float | None) -> None:
        """Add an amount in USD to the iteration's cost (None adds nothing)."""
        if cost_usd is not None:
            self._report.cost_usd = round((self._report.cost_usd or 0.0) + cost_usd, 10)

    def warn(self, message: str, kind: AgentEventKind = AgentEventKind.RETRY) -> AgentEvent:
        """An error the CLI reported that did not end its run (a retry, a reconnect):
        kept as ``last_warning``, which explains a run that then fails silently."""
        self._report.last_warning = shorten(message, 1000)
        return AgentEvent(kind, message)

    def fail(
        self,
        message: str,
        kind: ErrorKind | None = None,
        *,
        at: object = None,
        reset_at_ms: int | None = None,
    ) -> list[AgentEvent]:
        """Record that the CLI itself said the iteration failed.

        Args:
            message: The CLI's own error words.
            kind: The kind its structured fields give; else read from ``message``.
            at: The failing line's timestamp, for relative reset times.
            reset_at_ms: A reset time from structured fields (epoch ms); else, for
                a rate or usage limit, the one ``message`` names, if any.

        Returns:
            One ``RATE_LIMIT`` event for a limit, else one ``ERROR`` event.
        """
        report = self._report
        report.is_error = True
        report.final_message = None
        report.error_text = message
        report.error_kind = kind or failures.classify_error_text(message)
        if report.error_kind not in failures.LIMIT_KINDS:
            return [AgentEvent(AgentEventKind.ERROR, message)]
        report.reset_at_ms = reset_at_ms or limits.parse_reset_time(message, self.moment(at))
        return [AgentEvent(AgentEventKind.RATE_LIMIT, message)]

    def clear_failure(self) -> None:
        """Forget an earlier failure: the CLI recovered from it (a retry succeeded)."""
        report = self._report
        report.is_error = False
        report.error_kind = report.error_text = report.reset_at_ms = None

    def finish(self, final_message: str | None) -> list[AgentEvent]:
        """The CLI's final result: ``final_message`` is the root agent's answer,
        unless a failure was recorded (it stands).

        Returns:
            ``RESULT`` (and ``USAGE`` when tokens were reported); nothing after a
            failure, whose event was already returned.
        """
        report = self._report
        report.result_seen = True
        if report.is_error:
            return []
        report.final_message = final_message
        events = [AgentEvent(AgentEventKind.RESULT, final_message or "")]
        if report.input_tokens is not None:
            events.append(AgentEvent(AgentEventKind.USAGE, ""))
        return events


class JsonLinesParser(AgentParser):
    """A parser for CLIs that print one JSON object per line.

    Blank lines are skipped; a line that is not JSON goes to ``on_text`` (counted in
    ``report().bad_lines`` by default: a stray message, a torn last line); each
    object goes to ``on_event``, which calls the subclass's ``handle_<type>`` method
    for the object's ``type`` (dots read as underscores: ``turn.completed`` →
    ``handle_turn_completed``); a type with no handler gives no events. With
    ``accepts_arrays`` a line holding a JSON array is read as one object per element.
    """

    accepts_arrays: ClassVar[bool] = False

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
            return self.on_text(text)
        items = value if isinstance(value, list) and self.accepts_arrays else [value]
        events: list[AgentEvent] = []
        for item in items:
            if isinstance(item, dict):
                events.extend(self.on_event(item))
            else:
                report.bad_lines += 1
        return events

    def on_event(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The events one JSON object holds: its ``handle_<type>`` method's."""
        kind = event.get("type")
        if not isinstance(kind, str) or _EVENT_TYPE.fullmatch(kind) is None:
            return []
        handler = getattr(self, "handle_" + kind.replace(".", "_"), None)
        if handler is None:
            return []
        events: list[AgentEvent] = handler(event)
        return events

    def on_text(self, text: str) -> list[AgentEvent]:
        """A line that is not JSON: counted as not understood."""
        self._report.bad_lines += 1
        return []
