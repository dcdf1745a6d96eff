"""aider (``aider-chat``), one message per iteration, plain-text output.

Verified against aider 0.86.2 (its real output is in
``tests/data/captured-streams/errors-and-more/``). Invocation::

    aider --yes-always --no-pretty --no-stream --no-auto-commits --no-check-update
          --analytics-disable --no-show-model-warnings --no-show-release-notes
          [--model M] [extra args] --message PROMPT           (stdin: /dev/null)

The prompt is one argv element; a prompt argparse would misread (starting with
``-``) or one over ``MAX_ARG_BYTES`` is passed as ``--message-file`` with the
iteration's saved prompt file instead. ``--yes-always`` does not run the shell
commands the model suggests. aider has no session ids (``supports_sessions`` False).

Facts the parser relies on (``aider/exceptions.py``, ``aider/main.py``):

* there is no JSON mode: a banner (``Aider v0.86.2``, ``Model: …``, ``Git repo: …``,
  ``Repo-map: …``, ``Added … to the chat.``), then the reply, then
  ``Tokens: 12 sent, 5 received.`` (with ``Cost: $… message, $… session.`` when
  prices are known);
* ``--message`` always exits 0, even after API errors. An API error prints the
  litellm exception (``litellm.RateLimitError: …``) and aider's own sentence
  (``The API provider has rate limited you. …``, ``… is not able to authenticate
  you. …``, ``… servers are down or overloaded.``), then ``Retrying in N seconds...``
  while it retries. The iteration failed when such an error block comes after the
  last ``Tokens:`` line: the error lines count only because no reply followed
  them, and only lines that *start* with the litellm class name are read.
"""

from __future__ import annotations

import re
from collections import deque
from typing import TYPE_CHECKING

from autopilot.agents import failures
from autopilot.agents.adapter import CliAgent, CliFacts
from autopilot.agents.base import (
    AgentEvent,
    Classification,
    Invocation,
    shorten,
)
from autopilot.agents.parser import AgentParser
from autopilot.core.vocabulary import AgentEventKind, ErrorKind

if TYPE_CHECKING:
    from autopilot.agents.base import InvocationRequest, IterationReport, WallClock

_TAIL_LINES = 400
_TOKENS = re.compile(
    r"^Tokens: (?P<sent>[\d.,]+)(?P<sk>[kKmM]?) sent(?:, [\d.,]+[kKmM]? cache (?:write|hit))*"
    r", (?P<received>[\d.,]+)(?P<rk>[kKmM]?) received\."
    r"(?: Cost: \$(?P<cost>[\d.,]+) message, \$[\d.,]+ session\.)?"
)
_LITELLM = re.compile(r"^litellm\.(?P<cls>\w+):")
_BANNER = re.compile(
    r"^(?:Aider v\d|Model: |Weak model: |Editor model: |Git repo: |Repo-map: "
    r"|Added .+ to the chat\.$|https://aider\.chat/HISTORY\.html|Analytics have been"
    r"|Warning: Input is not a terminal|HTTPSConnectionPool\("
    r"|You can skip this check with --no-gitignore|Added \.aider\* to \.gitignore"
    r"|Cur working dir: |Use /help )"
)
_RETRYING = re.compile(r"^Retrying in (\d+(?:\.\d+)?) seconds\.\.\.$")
_CLASS_KINDS = {
    "RateLimitError": ErrorKind.RATE_LIMIT,
    "RouterRateLimitError": ErrorKind.RATE_LIMIT,
    "AuthenticationError": ErrorKind.AUTH,
    "PermissionDeniedError": ErrorKind.AUTH,
    "InternalServerError": ErrorKind.SERVER,
    "ServiceUnavailableError": ErrorKind.SERVER,
    "APIError": ErrorKind.SERVER,
    "APIConnectionError": ErrorKind.NETWORK,
    "Timeout": ErrorKind.NETWORK,
    "BadRequestError": ErrorKind.INVALID_REQUEST,
    "NotFoundError": ErrorKind.INVALID_REQUEST,
    "ContextWindowExceededError": ErrorKind.INVALID_REQUEST,
    "BudgetExceededError": ErrorKind.USAGE_LIMIT,
}


def _amount(number: str, suffix: str) -> int:
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[suffix.lower()]
    return int(float(number.replace(",", "")) * scale)


class AiderOutputParser(AgentParser):
    """Reads aider's plain-text output: reply, token counts, API errors.

    An API error block (a ``litellm.<Class>:`` line and the lines up to a blank line
    or ``Retrying in …``) sets ``is_error`` on the report; a later ``Tokens:`` line
    (a reply) clears it.

    Args:
        clock: The wall clock, for reset times.
    """

    session_id_shape = None

    def __init__(self, clock: WallClock | None = None) -> None:
        super().__init__(clock)
        self._report.tool_calls = None
        self._segment: deque[str] = deque(maxlen=_TAIL_LINES)
        self._error_class: str | None = None
        self._error_lines: list[str] = []
        self._in_block = False

    def feed(self, line: str) -> list[AgentEvent]:
        """Record one output line; the reply's lines are root text."""
        self._report.lines += 1
        text = line.rstrip("\r")
        tokens = _TOKENS.match(text)
        if tokens:
            return self._answered(tokens)
        litellm = _LITELLM.match(text)
        if litellm:
            self._error_class = litellm.group("cls")
            self._error_lines = [text]
            self._in_block = True
            self._segment.clear()
            self._record_error()
            return [AgentEvent(AgentEventKind.ERROR, text)]
        if self._in_block:
            return self._block_line(text)
        if _BANNER.match(text):
            self._segment.clear()
            return []
        self._segment.append(text)
        return [AgentEvent(AgentEventKind.TEXT, text)] if text.strip() else []

    def _block_line(self, text: str) -> list[AgentEvent]:
        if _RETRYING.match(text):
            self._in_block = False
            self._report.last_warning = self._report.error_text
            return [AgentEvent(AgentEventKind.RETRY, text)]
        if not text.strip() or len(self._error_lines) >= 20:
            self._in_block = False
            return []
        self._error_lines.append(text)
        self._record_error()
        return []

    def _record_error(self) -> None:
        words = " ".join(line.strip() for line in self._error_lines if line.strip())
        kind = _CLASS_KINDS.get(self._error_class or "") or failures.classify_error_text(words)
        self.fail(shorten(words, 1000), kind)

    def _answered(self, tokens: re.Match[str]) -> list[AgentEvent]:
        report = self._report
        reply = "\n".join(self._segment).strip()
        report.final_message = reply or None
        report.last_root_text = reply or report.last_root_text
        self.add_tokens(
            _amount(tokens["sent"], tokens["sk"]), _amount(tokens["received"], tokens["rk"])
        )
        if tokens["cost"]:
            self.add_cost(float(tokens["cost"].replace(",", "")))
        self.clear_failure()
        report.last_warning = None
        self._error_class = None
        self._in_block = False
        self._segment.clear()
        return [AgentEvent(AgentEventKind.USAGE, ""), AgentEvent(AgentEventKind.RESULT, reply)]


class AiderAdapter(CliAgent):
    """Drives ``aider --message``; see the module docstring for the invocation."""

    facts = CliFacts("aider", "0.86.2", "python -m pip install aider-chat")
    supports_sessions = False
    parser_class = AiderOutputParser
    env_needed = (
        "AIDER_*",
        "OPENAI_*",
        "ANTHROPIC_*",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
        "DEEPSEEK_API_KEY",
        "GROQ_API_KEY",
    )
    fixed_args = (
        "--yes-always --no-pretty --no-stream --no-auto-commits --no-check-update "
        "--analytics-disable --no-show-model-warnings --no-show-release-notes"
    )

    def build_invocation(self, request: InvocationRequest) -> Invocation:
        """``aider … --message PROMPT`` (or ``--message-file``), stdin ``/dev/null``."""
        argv = self.argv(request)
        prompt = request.prompt
        if prompt.startswith("-") or not self.argv_can_carry(prompt):
            return Invocation(argv=[*argv, "--message-file", str(request.prompt_path)])
        return Invocation(argv=[*argv, "--message", prompt])

    def classify(self, report: IterationReport, exit_code: int, stderr_tail: str) -> Classification:
        """Success is a reply (a ``Tokens:`` line) with no API error after it.

        aider exits 0 after API errors, so an error block that no reply followed is
        the failure. The verdict is also recorded on ``report``.
        """
        if report.is_error or exit_code != 0:
            return super().classify(report, exit_code, stderr_tail)
        if report.final_message is None:
            report.error_kind = ErrorKind.UNKNOWN
            report.error_text = "aider printed no reply"
            return Classification(False, ErrorKind.UNKNOWN, report.error_text)
        return Classification(True)
