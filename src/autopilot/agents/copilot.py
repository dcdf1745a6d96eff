"""GitHub Copilot CLI (``@github/copilot``), headless with ``--output-format json``.

Verified against Copilot CLI 1.0.102 (its real output is in
``tests/data/captured-streams/errors-and-more/``; the format is
``copilot-sdk/generated/session-events.d.ts``). Invocation::

    copilot -p PROMPT --output-format json --allow-all-tools --no-ask-user
            --no-auto-update [--model M] -C CWD [--resume=SESSION]
            --usage-output-file ITERATION/copilot-usage.json [extra args]
                                                            (stdin: /dev/null)

``--allow-all-tools`` is required in ``-p`` mode. The prompt is one argv element
(commander takes the value after ``-p`` whatever it starts with). Copilot has no
documented way to read a prompt from stdin or a file, so a prompt over
``MAX_ARG_BYTES`` is a ``UsageError``.

Facts the parser relies on:

* every line has ``type`` and ``data``; lines produced inside a subagent carry a
  top-level ``agentId`` (bracketed by ``subagent.started``/``subagent.completed``)
  and are kept out of the final message;
* ``assistant.message`` (``content``, ``toolRequests``) is assistant text; some
  builds add ``outputTokens`` to it. ``tool.execution_start``/``_complete`` are
  tool calls (``success: false`` with ``error.code: "denied"`` when a permission rule
  such as ``--deny-tool`` refused it); ``*_delta`` lines repeat partial output and
  are ignored;
* ``result`` is the final line: ``sessionId`` (a UUID), ``exitCode``; stdout has no
  input token counts and no cost. ``--usage-output-file F`` writes, before the
  ``result`` line, ``modelMetrics`` with each model's ``usage.inputTokens`` and
  ``outputTokens`` (cache reads and writes apart) for the whole *session*: after a
  resume they include earlier iterations, as Codex's do;
* failures end with ``session.error``: ``errorType`` authentication, authorization,
  policy, quota, rate_limit, context_limit or query, plus ``statusCode`` and the
  agent's ``message``; each failed model call before it is a ``model.call_failure``
  whose ``errorMessage`` is the provider's raw body. A usage limit is reported as
  ``errorType:"rate_limit"``, but that body says ``usage_limit_reached`` and holds
  ``resets_at`` (``copilot_usage.jsonl``), which the parser uses;
* exit status 0 or 1, the same as ``result.exitCode``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autopilot.agents import failures, fields, limits
from autopilot.agents.adapter import CliAgent, CliFacts
from autopilot.agents.base import (
    MAX_ARG_BYTES,
    AgentEvent,
    Invocation,
    SessionUsage,
    argv_bytes,
)
from autopilot.agents.parser import JsonLinesParser, loads_agent_json
from autopilot.core.vocabulary import AgentEventKind, ErrorKind
from autopilot.errors import UsageError

if TYPE_CHECKING:
    from autopilot.agents.base import Classification, InvocationRequest, IterationReport, WallClock

_ERROR_TYPES = {
    **dict.fromkeys(("authentication", "authorization", "policy"), ErrorKind.AUTH),
    "quota": ErrorKind.USAGE_LIMIT,
    "rate_limit": ErrorKind.RATE_LIMIT,
    "context_limit": ErrorKind.INVALID_REQUEST,
}
USAGE_FILE_NAME = "copilot-usage.json"
"""The ``--usage-output-file`` of an iteration, beside its saved prompt."""
_USAGE_FILE_MAX_BYTES = 1024 * 1024


class CopilotStreamParser(JsonLinesParser):
    """Parses ``copilot -p … --output-format json`` lines.

    Args:
        clock: The wall clock's zone is used for line timestamps.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        super().__init__(clock)
        self._last_text: str | None = None
        self._failure: dict[str, Any] | None = None
        self._failure_at: object = None
        self._calls: dict[str, tuple[object, object]] = {}

    def handle_assistant_message(self, event: dict[str, Any]) -> list[AgentEvent]:
        """Assistant text (a subagent's is kept apart); some builds add tokens."""
        data, subagent = _data(event)
        if "outputTokens" in data or "inputTokens" in data:
            # Spend, wherever it was made (subagents too); the usage file supersedes it.
            self.add_tokens(
                fields.count(data.get("inputTokens")), fields.count(data.get("outputTokens"))
            )
        content = fields.text(data.get("content"))
        if content is None:
            return []
        if not subagent:
            self._last_text = content
        return [self.text(content, subagent)]

    def handle_tool_execution_start(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A tool call (remembered by id, for a denial when it completes)."""
        data, subagent = _data(event)
        name, arguments = data.get("toolName"), data.get("arguments")
        self._calls[str(data.get("toolCallId"))] = (name, arguments)
        return [self.tool_call(name, arguments, subagent)]

    def handle_tool_execution_complete(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A tool's result; ``error.code: "denied"`` is a permission denial."""
        data, subagent = _data(event)
        error = fields.as_object(data.get("error"))
        if data.get("success") is False and error.get("code") == "denied":
            self.deny(*self._calls.get(str(data.get("toolCallId")), ("tool", None)))
        text = fields.as_object(data.get("result")).get("content") or error.get("message")
        return [self.tool_result(text, subagent)]

    def handle_model_call_failure(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A failed model call that Copilot may retry; its body tells limits apart."""
        data, subagent = _data(event)
        if subagent:
            return []
        self._failure = data
        self._failure_at = event.get("timestamp")
        message = f"model call failed ({data.get('statusCode')}): {data.get('errorType')}"
        return [AgentEvent(AgentEventKind.RETRY, message)]

    def handle_session_error(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The session failed: the agent's own words are the error."""
        data, subagent = _data(event)
        if subagent:
            return []
        text = fields.text(data.get("message")) or "copilot reported an error"
        status = data.get("statusCode") if isinstance(data.get("statusCode"), int) else None
        kind = _ERROR_TYPES.get(str(data.get("errorType"))) or failures.classify_error_text(
            text, status
        )
        if kind is ErrorKind.RATE_LIMIT:
            # The provider's own body tells a usage limit from a rate limit.
            detail = " ".join(
                [str(data.get("errorCode") or ""), _failure_words(self._failure), text]
            )
            kind = failures.classify_error_text(detail, 429)
        return self.fail(text, kind, at=event.get("timestamp"), reset_at_ms=self._failure_reset())

    def _failure_reset(self) -> int | None:
        if self._failure is None:
            return None
        when = self.moment(self._failure_at)
        body = self._failure.get("errorMessage")
        if not isinstance(body, str):
            return None
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return limits.parse_reset_time(body, when)
        return limits.reset_from_fields(decoded, when) if isinstance(decoded, dict) else None

    def handle_result(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The last line: the session id and the exit code."""
        events = self.attach_session(event.get("sessionId"))
        exit_code = event.get("exitCode")
        if not self._report.is_error and isinstance(exit_code, int) and exit_code != 0:
            events += self.fail(f"copilot result exitCode {exit_code}", ErrorKind.UNKNOWN)
        return events + self.finish(self._last_text)


def _data(event: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """A line's ``data``, and whether a subagent produced it (top-level ``agentId``)."""
    return fields.as_object(event.get("data")), event.get("agentId") is not None


def _failure_words(failure: dict[str, Any] | None) -> str:
    if failure is None:
        return ""
    return " ".join(str(failure.get(key) or "") for key in ("errorType", "errorMessage"))


def read_usage_file(path: Path) -> tuple[int, int] | None:
    """The (input, output) tokens a ``--usage-output-file`` holds, summed over its
    ``modelMetrics``; None when the file is missing, too large (1 MiB) or not that
    shape."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(_USAGE_FILE_MAX_BYTES + 1)
        if len(raw) > _USAGE_FILE_MAX_BYTES:
            return None
        value = loads_agent_json(raw.decode("utf-8", "replace"))
    except (OSError, ValueError, RecursionError):
        return None
    metrics = fields.as_object(value).get("modelMetrics")
    if not isinstance(metrics, dict):
        return None
    usages = [fields.as_object(fields.as_object(m).get("usage")) for m in metrics.values()]
    return (
        sum(fields.count(usage.get("inputTokens")) for usage in usages),
        sum(fields.count(usage.get("outputTokens")) for usage in usages),
    )


class CopilotAdapter(CliAgent):
    """Drives ``copilot … --output-format json -p PROMPT``; see the module docstring.

    The adapter remembers the usage file it asked the last invocation for, and reads
    it when that iteration is classified: one iteration at a time per adapter.
    """

    facts = CliFacts("copilot", "1.0.102", "npm install -g @github/copilot")
    parser_class = CopilotStreamParser
    env_needed = ("COPILOT_*", "GH_TOKEN", "GH_HOST", "GITHUB_TOKEN")
    # Unattended: never stop to ask the user, never update itself mid-run.
    fixed_args = "--output-format json --allow-all-tools --no-ask-user --no-auto-update"
    cwd_flag = "-C"
    resume_flag = "--resume="

    def __init__(self, executable: str | None = None, *, clock: WallClock | None = None) -> None:
        super().__init__(executable, clock=clock)
        self._usage_file: Path | None = None

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``copilot --output-format json --allow-all-tools … -p PROMPT``, stdin
        ``/dev/null``.

        Its tokens are asked for in ``copilot-usage.json`` beside the iteration's
        saved prompt (a file left there by an earlier attempt is removed first).

        Raises:
            UsageError: the prompt is longer than one argv element may be.
        """
        if not self.argv_can_carry(request.prompt):
            raise UsageError(
                f"the prompt is {argv_bytes(request.prompt)} bytes; Copilot CLI takes it as "
                f"one argument, which Linux limits to {MAX_ARG_BYTES} bytes"
            )
        self._usage_file = request.prompt_path.with_name(USAGE_FILE_NAME)
        with contextlib.suppress(OSError):
            self._usage_file.unlink(missing_ok=True)
        usage = ["--usage-output-file", str(self._usage_file)]
        return Invocation(argv=[*self.argv(request), *usage, "-p", request.prompt])

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is exit 0, a ``result`` line and no ``session.error``.

        The tokens of the usage file, when Copilot wrote one, replace those counted
        from the stream; they are the session's totals, so they are also the report's
        ``session_usage`` (see ``apply_usage_baseline``). The verdict is also recorded
        on ``report``.
        """
        usage = read_usage_file(self._usage_file) if self._usage_file is not None else None
        if usage is not None:
            report.input_tokens, report.output_tokens = usage
            if report.session_id:
                report.session_usage = SessionUsage(report.session_id, *usage)
        return super().classify(report, exit_code, stderr_tail)
