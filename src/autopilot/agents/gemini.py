"""Gemini CLI (``@google/gemini-cli``), headless with ``--output-format stream-json``.

Verified against Gemini CLI 0.61.0 (``reference/agent-clis.md`` §4 and the real streams
``gemini*.jsonl``/``.err`` in ``reference/streams/errors-and-more/``). Invocation::

    gemini --output-format stream-json --yolo [-m MODEL] [--resume SESSION]
           [extra args] -p PROMPT       (stdin: /dev/null; GEMINI_CLI_TRUST_WORKSPACE=true)

Gemini adds piped stdin to the prompt, so stdin is ``/dev/null`` and the prompt is
one argv element (``--prompt=PROMPT`` when it starts with ``-``, which yargs would
otherwise read as an option). There is no cwd flag; the process cwd is used. A prompt
over ``MAX_ARG_BYTES`` goes on stdin with no ``-p`` (gemini-cli reads non-TTY stdin
as the prompt and runs non-interactively; its reader stops at 8 MiB, so a longer
prompt is a ``UsageError``). Pass ``-m``: the default ``auto`` makes extra
classifier calls. Since 0.61 a headless run in a folder the user never trusted exits
at once (``Gemini CLI is not running in a trusted directory. To proceed, either use
`--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable…``, and
``--yolo`` is overridden to ``default``); ``--skip-trust`` only sets that variable, so
the adapter sets it (unless the user's environment already says otherwise), as
``--yolo`` already trusts the repository.

Facts the parser relies on (``packages/core/src/output/types.ts``):

* events ``init`` (``session_id``, ``model``), ``message`` (``role``, ``content``,
  ``delta:true`` for streamed chunks, concatenated here), ``tool_use``,
  ``tool_result`` (``status`` success/error), ``error`` (a warning: it does not end
  the run) and ``result`` (``status`` success/error, ``error.message``, ``stats``
  with ``input_tokens``/``output_tokens``); no cost, no subagent marker;
* API errors exit with the HTTP status mod 256 (429 → 173, 401 → 145, 500 → 244);
  41 is an auth error, 42 bad input, 52 config, 53 turn limit, 130 cancelled;
* a run can also end with exit 0 and no ``result`` after ``Error when talking to
  Gemini API Full report available at: /tmp/gemini-client-error-….json`` on stderr
  (field report 21): a failure, classified from stderr and that report file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
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
    find_executable,
    load_json_line,
    local_now,
    shorten,
    summarize_tool_input,
)
from autopilot.errors import UsageError

_STDIN_LIMIT_BYTES = 8 * 1024 * 1024
_TRUST_ENV = "GEMINI_CLI_TRUST_WORKSPACE"
_EXIT_KINDS = {41: ErrorKind.AUTH, 42: ErrorKind.INVALID_REQUEST, 52: ErrorKind.INVALID_REQUEST}
_HTTP_STATUSES = (400, 401, 403, 404, 408, 429, 500, 502, 503, 504)
_REPORT_FILE = re.compile(r"Full report available at: (\S*gemini-client-error-[\w.\-]+\.json)")


def exit_kind(exit_code: int) -> ErrorKind | None:
    """What a Gemini CLI exit status means: its own codes, or an HTTP status mod 256."""
    if exit_code in _EXIT_KINDS:
        return _EXIT_KINDS[exit_code]
    for status in _HTTP_STATUSES:
        if exit_code == status % 256:
            return failures.kind_for_status(status)
    return None


class GeminiStreamParser:
    """Parses ``gemini --output-format stream-json`` lines.

    Args:
        clock: The wall clock's zone is used for line timestamps.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        self._report = IterationReport()
        self._clock = clock or local_now
        self._text: list[str] = []

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
        if kind == "init":
            if isinstance(event.get("model"), str):
                report.model = event["model"]
            if isinstance(event.get("session_id"), str) and event["session_id"]:
                report.session_id = event["session_id"]
                return [AgentEvent(AgentEventKind.SESSION, event["session_id"])]
            return []
        if kind == "message":
            content = event.get("content")
            if event.get("role") != "assistant" or not isinstance(content, str):
                return []
            if event.get("delta") is not True:
                self._text = []
            self._text.append(content)
            report.last_root_text = "".join(self._text)
            return [AgentEvent(AgentEventKind.TEXT, content)]
        if kind == "tool_use":
            self._text = []
            name = str(event.get("tool_name") or "tool")
            report.tool_calls = (report.tool_calls or 0) + 1
            summary = summarize_tool_input(event.get("parameters"))
            return [AgentEvent(AgentEventKind.TOOL_CALL, summary, tool_name=name)]
        if kind == "tool_result":
            output = event.get("output")
            error = event.get("error")
            text = output if isinstance(output, str) else ""
            if event.get("status") == "error" and isinstance(error, dict):
                text = str(error.get("message") or text)
            return [AgentEvent(AgentEventKind.TOOL_RESULT, shorten(text, 300))]
        if kind == "error":
            message = str(event.get("message") or "error")
            report.last_warning = shorten(message, 1000)
            return [AgentEvent(AgentEventKind.ERROR, message)]
        if kind == "result":
            return self._result(event)
        return []

    def _result(self, event: dict[str, Any]) -> list[AgentEvent]:
        report = self._report
        report.result_seen = True
        stats = event.get("stats")
        if isinstance(stats, dict):
            report.input_tokens = _count(stats.get("input_tokens"))
            report.output_tokens = _count(stats.get("output_tokens"))
        if event.get("status") == "error":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            text = message if isinstance(message, str) and message else "gemini reported an error"
            report.is_error = True
            report.final_message = None
            report.error_text = text
            report.error_kind = failures.classify_error_text(text)
            if report.error_kind in failures.LIMIT_KINDS:
                now = self._clock()
                when = limits.moment_of(event.get("timestamp"), now.tzinfo) or now
                report.reset_at_ms = limits.parse_reset_time(text, when)
                return [AgentEvent(AgentEventKind.RATE_LIMIT, text)]
            return [AgentEvent(AgentEventKind.ERROR, text)]
        report.final_message = "".join(self._text) if self._text else None
        return [
            AgentEvent(AgentEventKind.RESULT, report.final_message or ""),
            AgentEvent(AgentEventKind.USAGE, ""),
        ]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _error_report_text(stderr_tail: str) -> str:
    """The error report file Gemini names on stderr, if readable (first 64 KiB)."""
    match = _REPORT_FILE.search(stderr_tail)
    if match is None:
        return ""
    try:
        with Path(match.group(1)).open("rb") as handle:
            return handle.read(65_536).decode("utf-8", "replace")
    except OSError:
        return ""


class GeminiAdapter(CliAgent):
    """Drives ``gemini -p … --output-format stream-json``; see the module docstring.

    Args:
        executable: The ``gemini`` program (name on PATH or a path); the
            ``AUTOPILOT_GEMINI_BIN`` variable overrides the default.
        clock: The wall clock, for reset times.
    """

    name = "gemini"
    verified_version = "0.61.0"
    supports_sessions = True
    install_hint = "install Gemini CLI: npm install -g @google/gemini-cli"
    default_executable = "gemini"
    env_needed: tuple[str, ...] = ("GEMINI_*", "GOOGLE_*")
    """Environment variables this CLI reads (globs); ``env_exclude`` never drops them."""

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``gemini --output-format stream-json --yolo … -p PROMPT``, stdin ``/dev/null``.

        The folder is trusted through ``GEMINI_CLI_TRUST_WORKSPACE=true`` (what
        ``--skip-trust`` does), unless that variable is already set.

        Raises:
            UsageError: the prompt is over 8 MiB, more than Gemini reads from stdin.
        """
        argv = [
            find_executable(self.executable, self.install_hint),
            "--output-format",
            "stream-json",
            "--yolo",
        ]
        if request.model:
            argv += ["-m", request.model]
        if request.resume_session_id:
            argv += ["--resume", request.resume_session_id]
        argv += list(request.extra_args)
        env = {} if _TRUST_ENV in os.environ else {_TRUST_ENV: "true"}
        prompt = request.prompt
        size = argv_bytes(prompt)
        if size > _STDIN_LIMIT_BYTES:
            raise UsageError(
                f"the prompt is {size} bytes; Gemini CLI reads at most {_STDIN_LIMIT_BYTES}"
            )
        if size + len("--prompt=") > MAX_ARG_BYTES:
            return Invocation(argv=argv, env_set=env, stdin=prompt.encode("utf-8"))
        if prompt.startswith("-"):
            return Invocation(argv=[*argv, f"--prompt={prompt}"], env_set=env)
        return Invocation(argv=[*argv, "-p", prompt], env_set=env)

    def new_parser(self) -> GeminiStreamParser:
        """A parser for one iteration's stream-json."""
        return GeminiStreamParser(self.clock)

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is exit 0 and ``result.status`` ``success``.

        The exit status carries the HTTP status of an API error; without a
        ``result`` the error report file named on stderr is read too. The verdict is
        also recorded on ``report``.
        """
        kind = exit_kind(exit_code)
        if kind is None and (exit_code != 0 or not report.result_seen):
            extra = _error_report_text(stderr_tail)
            found = failures.classify_error_text(extra) if extra else ErrorKind.UNKNOWN
            kind = found if found is not ErrorKind.UNKNOWN else None
        return failures.conclude(
            report, exit_code, stderr_tail, program="gemini", now=self.clock(), exit_kind=kind
        )
