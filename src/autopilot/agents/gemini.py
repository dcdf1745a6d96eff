"""Gemini CLI (``@google/gemini-cli``), headless with ``--output-format stream-json``.

Verified against Gemini CLI 0.61.0 (its real output is in
``tests/data/captured-streams/errors-and-more/``; the format is google-gemini/gemini-cli
``packages/core/src/output/types.ts``). Invocation::

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

Facts the parser relies on:

* events ``init`` (``session_id``, a UUID; ``model``), ``message`` (``role``,
  ``content``, ``delta:true`` for streamed chunks, concatenated here), ``tool_use``,
  ``tool_result`` (``status`` success/error; ``error.type`` ``policy_violation`` when
  a policy rule denied the call), ``error`` (a warning: it does not end the run) and
  ``result`` (``status`` success/error, ``error.message``, ``stats`` with
  ``input_tokens``/``output_tokens``); no cost, no subagent marker;
* the model's text since the last tool result is its answer; a tool call after it
  that never ran does not take it back. A model turn that ends in an invalid stream
  (``error`` ``Invalid stream: The model returned an empty response or malformed
  tool call.``) ends with a ``result`` of ``status: "error"`` and *no* ``error``
  field, and exit 0: a finished answer before it is the final message and the error
  a warning; with no answer the error is the failure;
* API errors exit with the HTTP status mod 256 (429 → 173, 401 → 145, 500 → 244);
  41 is an auth error, 42 bad input, 52 config, 53 turn limit, 130 cancelled;
* a run can also end with exit 0 and no ``result`` after ``Error when talking to
  Gemini API Full report available at: /tmp/gemini-client-error-….json`` on stderr
  (seen with 0.x releases): a failure, classified from stderr and that report file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autopilot.agents import failures, fields
from autopilot.agents.adapter import CliAgent, CliFacts
from autopilot.agents.base import AgentEvent, Invocation, argv_bytes
from autopilot.agents.parser import JsonLinesParser
from autopilot.core.vocabulary import AgentEventKind, ErrorKind
from autopilot.errors import UsageError

if TYPE_CHECKING:
    from autopilot.agents.base import Classification, InvocationRequest, IterationReport, WallClock

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


class GeminiStreamParser(JsonLinesParser):
    """Parses ``gemini --output-format stream-json`` lines.

    Args:
        clock: The wall clock's zone is used for line timestamps.
    """

    def __init__(self, clock: WallClock | None = None) -> None:
        super().__init__(clock)
        self._text: list[str] = []
        self._turn_over = False
        self._calls: dict[str, tuple[object, object]] = {}

    def handle_init(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The session id and the model."""
        self._report.model = fields.text(event.get("model")) or self._report.model
        return self.attach_session(event.get("session_id"))

    def handle_tool_use(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A tool call (remembered by id, for a denial in its result)."""
        name, parameters = event.get("tool_name"), event.get("parameters")
        self._calls[str(event.get("tool_id"))] = (name, parameters)
        return [self.tool_call(name, parameters)]

    def handle_error(self, event: dict[str, Any]) -> list[AgentEvent]:
        """An error that does not end the run: a warning."""
        return [self.warn(str(event.get("message") or "error"), AgentEventKind.ERROR)]

    def handle_message(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A message; the assistant's chunks make up its answer."""
        content = event.get("content")
        if event.get("role") != "assistant" or not isinstance(content, str):
            return []
        if event.get("delta") is not True or self._turn_over:
            self._text = []
            self._turn_over = False
        self._text.append(content)
        self._report.last_root_text = "".join(self._text)
        return [AgentEvent(AgentEventKind.TEXT, content)]

    def handle_tool_result(self, event: dict[str, Any]) -> list[AgentEvent]:
        """A tool's result; a policy's denial is recorded."""
        # The model answered the tool calls before it; its next text is a new answer.
        self._turn_over = True
        error = fields.as_object(event.get("error"))
        output = event.get("output")
        text = output if isinstance(output, str) else ""
        if event.get("status") == "error" and error:
            text = str(error.get("message") or text)
            if error.get("type") == "policy_violation":
                self.deny(*self._calls.get(str(event.get("tool_id")), ("tool", None)))
        return [self.tool_result(text)]

    def handle_result(self, event: dict[str, Any]) -> list[AgentEvent]:
        """The run's end: tokens, and success or failure."""
        report = self._report
        report.result_seen = True
        stats = event.get("stats")
        if isinstance(stats, dict):
            self.add_tokens(
                fields.count(stats.get("input_tokens")), fields.count(stats.get("output_tokens"))
            )
        answer = "".join(self._text) if self._text and not self._turn_over else None
        if event.get("status") != "error":
            return self.finish(answer)
        message = fields.text(fields.as_object(event.get("error")).get("message"))
        if message is None and answer is not None:
            # An invalid stream after a finished answer: the error stays a warning.
            return self.finish(answer)
        return self.fail(
            message or report.last_warning or "gemini reported an error", at=event.get("timestamp")
        )


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
    """Drives ``gemini -p … --output-format stream-json``; see the module docstring."""

    facts = CliFacts("gemini", "0.61.0", "npm install -g @google/gemini-cli")
    parser_class = GeminiStreamParser
    env_needed = ("GEMINI_*", "GOOGLE_*")
    fixed_args = "--output-format stream-json --yolo"

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``gemini --output-format stream-json --yolo … -p PROMPT``, stdin ``/dev/null``.

        The folder is trusted through ``GEMINI_CLI_TRUST_WORKSPACE=true`` (what
        ``--skip-trust`` does), unless that variable is already set.

        Raises:
            UsageError: the prompt is over 8 MiB, more than Gemini reads from stdin.
        """
        argv = self.argv(request)
        env = {} if _TRUST_ENV in os.environ else {_TRUST_ENV: "true"}
        prompt = request.prompt
        size = argv_bytes(prompt)
        if size > _STDIN_LIMIT_BYTES:
            raise UsageError(
                f"the prompt is {size} bytes; Gemini CLI reads at most {_STDIN_LIMIT_BYTES}"
            )
        if not self.argv_can_carry(prompt, "--prompt="):
            return Invocation(argv=argv, env_set=env, stdin=prompt.encode("utf-8"))
        if prompt.startswith("-"):
            return Invocation(argv=[*argv, f"--prompt={prompt}"], env_set=env)
        return Invocation(argv=[*argv, "-p", prompt], env_set=env)

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is exit 0 and a ``result`` that is not a failure.

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
            report, exit_code, stderr_tail, program=self.name, now=self.clock(), exit_kind=kind
        )
